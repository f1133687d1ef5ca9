package io.regmem.registration;

import static io.regmem.registration.ObjectModelTest.assertRdma;
import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.Errno;
import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.Providers;
import io.regmem.registration.testkit.UdNode;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.nio.ByteOrder;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Unreliable-datagram QPs ({@code IBV_QPT_UD} on an {@code RDMA_PS_UDP} ID) on the provider under
 * test, as rdma-core documents them and rxe implements them: ready once created, a send names its
 * address handle, QP number and Q_Key; every receive starts with the 40-byte GRH area (rxe's form for
 * IPv4: 20 zero bytes and the IPv4 header); the completion says GRH, the source QP and the sender's
 * address; no receive, too small a receive or another Q_Key drops the datagram and counts it,
 * never failing either side; a message over the path MTU is not sent and its send succeeds
 * (C10-93.1.1); only SEND and SEND_WITH_IMM post. On a provider without datagrams: refused, said.
 */
@ExtendWith(NoLeaks.class)
class UdQpTest {
    private static final ValueLayout.OfShort BE_SHORT = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    private UdNode a;
    private UdNode b;
    private final WorkRequest wr = new WorkRequest(2);

    @BeforeEach
    void setUp() {
        try (RdmaDevice probe = Providers.open()) {
            if (!probe.supportsDatagrams()) {
                assertRdma(() -> probe.createCmId(PortSpace.UDP), Errno.EOPNOTSUPP, "carries no datagrams");
                assertRdma(probe::datagramAddress, Errno.EOPNOTSUPP);
                assertThat(probe.attributes().maxMcastGroups()).isZero();
                try (ProtectionDomain pd = probe.allocPd()) {
                    assertRdma(() -> pd.createAh(AhAttributes.of(InetAddress.getLoopbackAddress())), Errno.EOPNOTSUPP);
                }
                Assumptions.abort(Providers.NAME + " carries no datagrams (refused with EOPNOTSUPP, checked)");
            }
        }
        a = new UdNode();
        b = new UdNode();
    }

    @AfterEach
    void tearDown() {
        if (a != null) {
            a.close();
            b.close();
        }
    }

    @Test
    void aUdQpIsReadyOnceCreatedAndNumbered() {
        QueuePair q1 = a.qp();
        QueuePair q2 = b.qp();
        assertThat(q1.qpType()).isEqualTo(QpType.UD);
        assertThat(q1.cmId().portSpace()).isEqualTo(PortSpace.UDP);
        assertThat(q1.state()).isEqualTo(QueuePair.State.RTS);
        assertThat(q1.qkey()).isEqualTo(QpInitAttributes.RDMA_UDP_QKEY);
        assertThat(q1.qpNum()).isBetween(2, 0xFFFFFE).isNotEqualTo(q2.qpNum());
        CmId rc = a.device.createCmId();
        assertThat(rc.portSpace()).isEqualTo(PortSpace.TCP);
        QueuePair rcQp = rc.createQp(a.pd, QpInitAttributes.of(a.cq));
        assertThat(rcQp.qpType()).isEqualTo(QpType.RC);
        assertThat(rcQp.qpNum()).isNotIn(q1.qpNum(), q2.qpNum());
        rc.destroyQp();
        rc.close();
    }

    @Test
    void aDatagramLandsAfterTheGrhAreaAndNamesItsSender() throws Exception {
        QueuePair server = b.qp();
        QueuePair client = a.qp();
        b.postRecv(server, 0, 40 + 100);
        a.slot(1).asSlice(0, 100).fill((byte) 0x5A);
        AddressHandle ah = a.ah(b.device.datagramAddress());
        client.postSend(a.send(wr, 1, 100).opcode(Opcode.SEND_WITH_IMM).immData(7).ud(ah, server.qpNum(),
                QpInitAttributes.RDMA_UDP_QKEY));
        WorkCompletion sent = a.await(b);
        assertThat(sent.status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(sent.withGrh()).isFalse();
        WorkCompletion got = b.await(a);
        assertThat(got.status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(got.opcode()).isEqualTo(Opcode.RECV);
        assertThat(got.byteLen()).as("the GRH area counts").isEqualTo(140);
        assertThat(got.withGrh()).isTrue();
        assertThat(got.withImm()).isTrue();
        assertThat(got.immData()).isEqualTo(7);
        assertThat(got.srcQp()).isEqualTo(client.qpNum());
        assertThat(got.source()).isEqualTo(a.device.datagramAddress());
        MemorySegment buf = b.slot(0);
        for (int i = 0; i < 100; i++) {
            assertThat(buf.get(ValueLayout.JAVA_BYTE, 40 + i)).as("payload byte %d", i).isEqualTo((byte) 0x5A);
        }
        InetAddress from = got.source().dgid();
        if (from.getAddress().length == 4) { // rxe's IPv4 form: 20 zero bytes, then the IPv4 header
            for (int i = 0; i < 20; i++) {
                assertThat(buf.get(ValueLayout.JAVA_BYTE, i)).as("GRH byte %d", i).isZero();
            }
            assertThat(buf.get(ValueLayout.JAVA_BYTE, 20)).isEqualTo((byte) 0x45);
            assertThat(buf.get(ValueLayout.JAVA_BYTE, 29)).as("protocol UDP").isEqualTo((byte) 17);
            byte[] src = new byte[4];
            byte[] dst = new byte[4];
            MemorySegment.copy(buf, ValueLayout.JAVA_BYTE, 32, src, 0, 4);
            MemorySegment.copy(buf, ValueLayout.JAVA_BYTE, 36, dst, 0, 4);
            assertThat(InetAddress.getByAddress(src)).isEqualTo(from);
            assertThat(InetAddress.getByAddress(dst)).isEqualTo(b.device.datagramAddress().dgid());
            int sum = 0;
            for (int i = 20; i < 40; i += 2) {
                sum += Short.toUnsignedInt(buf.get(BE_SHORT, i));
            }
            sum = (sum & 0xFFFF) + (sum >>> 16);
            assertThat(sum & 0xFFFF).as("the IPv4 header's checksum holds").isEqualTo(0xFFFF);
            int total = Short.toUnsignedInt(buf.get(BE_SHORT, 22));
            assertThat(total).as("IPv4 + UDP + BTH + DETH + imm + payload + ICRC").isEqualTo(20 + 8 + 12 + 8 + 4 + 100 + 4);
        } else {
            assertThat(buf.get(ValueLayout.JAVA_BYTE, 0) & 0xF0).isEqualTo(0x60);
        }
        assertThat(server.state()).isEqualTo(QueuePair.State.RTS);
    }

    @Test
    void theReceiverAnswersTheSenderThroughAnAddressHandleFromTheCompletion() {
        QueuePair server = b.qp();
        QueuePair client = a.qp();
        b.postRecv(server, 0, 4096);
        a.postRecv(client, 0, 4096);
        AddressHandle toServer = a.ah(b.device.datagramAddress());
        client.postSend(a.send(wr, 1, 8).ud(toServer, server.qpNum(), QpInitAttributes.RDMA_UDP_QKEY));
        assertThat(a.await(b).status()).isEqualTo(WcStatus.SUCCESS);
        WorkCompletion request = b.await(a);
        AddressHandle back = b.pd.createAhFromWc(request);
        try {
            assertThat(back.attributes()).isEqualTo(request.source());
            b.slot(2).set(ValueLayout.JAVA_LONG_UNALIGNED, 0, 0x1122334455667788L);
            server.postSend(b.send(wr, 2, 8).ud(back, request.srcQp(), QpInitAttributes.RDMA_UDP_QKEY));
            assertThat(b.await(a).status()).isEqualTo(WcStatus.SUCCESS);
            WorkCompletion reply = a.await(b);
            assertThat(reply.srcQp()).isEqualTo(server.qpNum());
            assertThat(a.slot(0).get(ValueLayout.JAVA_LONG_UNALIGNED, 40)).isEqualTo(0x1122334455667788L);
        } finally {
            back.close();
        }
        WorkCompletion notADatagram = new WorkCompletion();
        assertRdma(() -> b.pd.createAhFromWc(notADatagram), Errno.EINVAL, "createAhFromWc", "GRH");
        assertRdma(() -> b.pd.createAhFromWc(null), Errno.EINVAL);
    }

    @Test
    void noReceiveTooSmallAReceiveOrAnotherQkeyDropAndCountNeverFailing() {
        QueuePair server = b.qp();
        QueuePair client = a.qp();
        QueuePair otherKey = a.qp(new QpInitAttributes().qkey(0x42));
        AddressHandle ah = a.ah(b.device.datagramAddress());
        DeviceCounters counters = b.device.counters();
        // no receive posted
        client.postSend(a.send(wr, 1, 64).ud(ah, server.qpNum(), QpInitAttributes.RDMA_UDP_QKEY));
        assertThat(a.await(b).status()).isEqualTo(WcStatus.SUCCESS);
        b.awaitDropped(DatagramDrop.NO_RECEIVE, 1);
        // a receive one byte short of GRH + message: dropped, and the receive stays posted
        b.postRecv(server, 0, 40 + 63);
        client.postSend(a.send(wr, 1, 64).ud(ah, server.qpNum(), QpInitAttributes.RDMA_UDP_QKEY));
        assertThat(a.await(b).status()).isEqualTo(WcStatus.SUCCESS);
        b.awaitDropped(DatagramDrop.TOO_SMALL, 1);
        assertThat(b.poll(a)).isNull();
        assertThat(server.outstandingRecvs()).isEqualTo(1);
        // another Q_Key
        client.postSend(a.send(wr, 1, 8).ud(ah, server.qpNum(), 0x42));
        assertThat(a.await(b).status()).isEqualTo(WcStatus.SUCCESS);
        b.awaitDropped(DatagramDrop.QKEY, 1);
        // a Q_Key with its top bit set means the sender's own: 0x42 here, so dropped too
        otherKey.postSend(a.send(wr, 1, 8).ud(ah, server.qpNum(), 0x8000_0000));
        assertThat(a.await(b).status()).isEqualTo(WcStatus.SUCCESS);
        b.awaitDropped(DatagramDrop.QKEY, 2);
        // ... and the client's own (RDMA_UDP_QKEY) matches
        client.postSend(a.send(wr, 1, 63).ud(ah, server.qpNum(), 0x8000_0000));
        assertThat(a.await(b).status()).isEqualTo(WcStatus.SUCCESS);
        WorkCompletion got = b.await(a);
        assertThat(got.byteLen()).isEqualTo(40 + 63);
        assertThat(counters.datagramsDropped()).isEqualTo(4);
        assertThat(a.device.counters().datagramsDropped()).isZero();
        assertThat(server.state()).isEqualTo(QueuePair.State.RTS);
        assertThat(client.state()).isEqualTo(QueuePair.State.RTS);
        // a QP number nobody has: lost in the fabric, the send still succeeds
        int gone = server.qpNum();
        server.cmId().destroyQp();
        client.postSend(a.send(wr, 1, 8).ud(ah, gone, QpInitAttributes.RDMA_UDP_QKEY));
        assertThat(a.await(b).status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(client.state()).isEqualTo(QueuePair.State.RTS);
    }

    @Test
    void aMessageOverThePathMtuIsNeverSentAndItsSendSucceeds() {
        UdNode small = new UdNode(Map.of("activeMtu", "1024"), 4);
        try {
            assertThat(small.device.attributes().activeMtu()).isEqualTo(1024);
            QueuePair server = b.qp();
            QueuePair client = small.qp();
            b.postRecv(server, 0, 4096);
            AddressHandle ah = small.ah(b.device.datagramAddress());
            client.postSend(small.send(wr, 1, 1025).ud(ah, server.qpNum(), QpInitAttributes.RDMA_UDP_QKEY));
            WorkCompletion sent = small.await(b);
            assertThat(sent.status()).as("IBA C10-93.1.1: no packet, no error").isEqualTo(WcStatus.SUCCESS);
            assertThat(b.poll(small)).isNull();
            assertThat(b.device.counters().datagramsDropped()).isZero();
            client.postSend(small.send(wr, 1, 1024).ud(ah, server.qpNum(), QpInitAttributes.RDMA_UDP_QKEY));
            assertThat(small.await(b).status()).isEqualTo(WcStatus.SUCCESS);
            assertThat(b.await(small).byteLen()).isEqualTo(40 + 1024);
        } finally {
            small.close();
        }
    }

    @Test
    void theOversizeOptionMakesAnOverMtuSendALengthError() {
        UdNode strict = new UdNode(Map.of("udOversizeError", "true"), 4);
        try {
            QueuePair client = strict.qp();
            AddressHandle ah = strict.ah(b.device.datagramAddress());
            client.postSend(strict.send(wr, 1, 4097).ud(ah, 0x100, QpInitAttributes.RDMA_UDP_QKEY));
            assertThat(strict.await(b).status()).isEqualTo(WcStatus.LOC_LEN_ERR);
            assertThat(client.state()).isEqualTo(QueuePair.State.ERROR);
        } finally {
            strict.close();
        }
    }

    @Test
    void onlySendsWithADestinationOfTheQpsPdPostAndARefusalPostsNothing() throws Exception {
        QueuePair client = a.qp();
        AddressHandle ah = a.ah(b.device.datagramAddress());
        AddressHandle group = a.ah(AhAttributes.of(InetAddress.getByName("239.1.2.3")));
        int qkey = QpInitAttributes.RDMA_UDP_QKEY;
        assertRdma(() -> client.postSend(a.send(wr, 1, 8).opcode(Opcode.RDMA_WRITE).ud(ah, 0x100, qkey)), Errno.EINVAL,
                "only SEND and SEND_WITH_IMM", "bad WR index 0");
        assertRdma(() -> client.postSend(a.send(wr, 1, 8).opcode(Opcode.SEND_WITH_INV).ud(ah, 0x100, qkey)), Errno.EINVAL);
        assertRdma(() -> client.postSend(a.send(wr, 1, 8)), Errno.EINVAL, "needs its destination");
        assertRdma(() -> client.postSend(a.send(wr, 1, 8).ud(ah, 0x1000000, qkey)), Errno.EINVAL, "more than 24 bits");
        assertRdma(() -> client.postSend(a.send(wr, 1, 8).ud(ah, AhAttributes.MULTICAST_QPN, qkey)), Errno.EINVAL,
                "multicast group");
        assertRdma(() -> client.postSend(a.send(wr, 1, 8).ud(group, 0x100, qkey)), Errno.EINVAL, "multicast group");
        AddressHandle foreign = b.ah(a.device.datagramAddress());
        assertRdma(() -> client.postSend(a.send(wr, 1, 8).ud(foreign, 0x100, qkey)), Errno.EINVAL, "not the QP's");
        AddressHandle closed = a.pd.createAh(b.device.datagramAddress());
        closed.close();
        assertRdma(() -> client.postSend(a.send(wr, 1, 8).ud(closed, 0x100, qkey)), Errno.EINVAL, "was destroyed");
        WorkRequest good = new WorkRequest(1);
        a.send(good, 2, 8).ud(ah, 0x100, qkey);
        assertRdma(() -> client.postSend(good.next(a.send(wr, 1, 8).opcode(Opcode.RDMA_READ).ud(ah, 0x100, qkey))),
                Errno.EINVAL, "bad WR index 1");
        assertThat(client.outstandingSends()).as("nothing of a refused chain").isZero();
        assertThat(client.state()).isEqualTo(QueuePair.State.RTS);
        // an RC QP takes no datagram destination
        CmId rc = a.device.createCmId();
        QueuePair rcQp = rc.createQp(a.pd, QpInitAttributes.of(a.cq));
        try {
            assertRdma(() -> rcQp.postSend(a.send(wr, 1, 8).ud(ah, 0x100, qkey)), Errno.EINVAL);
        } finally {
            rc.destroyQp();
            rc.close();
        }
    }

    @Test
    void creationRulesOfAUdQpAndItsId() {
        CmId id = a.device.createCmId(PortSpace.UDP);
        try {
            assertRdma(() -> id.createQp(a.pd, QpInitAttributes.of(a.cq).maxRdmaCtxs(1)), Errno.EINVAL, "no rw contexts");
            assertRdma(() -> id.createQp(a.pd, QpInitAttributes.of(a.cq).qkey(0x8000_0001)), Errno.EINVAL, "top bit");
            assertThat(id.qp()).isNull();
            assertRdma(() -> id.connect("anywhere"), Errno.EINVAL, "needs a QP"); // the UD address exchange needs its QP
            assertRdma(() -> a.device.createCmId(null), Errno.EINVAL, "port space");
        } finally {
            id.close();
        }
    }

    @Test
    void addressHandlesAreChildrenOfTheirPd() {
        try (ProtectionDomain pd = a.device.allocPd()) {
            AddressHandle ah = pd.createAh(b.device.datagramAddress());
            assertThat(ah.pd()).isSameAs(pd);
            assertRdma(pd::close, Errno.EBUSY, "address handle");
            ah.close();
            assertRdma(ah::close, Errno.EBADF);
            assertRdma(() -> pd.createAh(null), Errno.EINVAL);
        }
        assertRdma(() -> AhAttributes.of(InetAddress.getByName("0.0.0.0")), Errno.EINVAL);
        assertRdma(() -> AhAttributes.of(InetAddress.getLoopbackAddress(), 70000), Errno.EINVAL);
        assertThat(AhAttributes.of(InetAddress.getLoopbackAddress()).gid())
                .containsExactly(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 127, 0, 0, 1);
    }
}
