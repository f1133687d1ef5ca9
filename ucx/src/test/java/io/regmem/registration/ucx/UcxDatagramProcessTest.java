package io.regmem.registration.ucx;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.AddressHandle;
import io.regmem.registration.AhAttributes;
import io.regmem.registration.CmEvent;
import io.regmem.registration.CmId;
import io.regmem.registration.DatagramDrop;
import io.regmem.registration.JoinFlag;
import io.regmem.registration.Opcode;
import io.regmem.registration.PortSpace;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.UdParam;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import io.regmem.registration.testkit.ChildJvm;
import io.regmem.registration.testkit.NamespacedPair;
import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.Providers;
import io.regmem.registration.testkit.UdNode;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Datagrams between two processes over ucx (kernel UDP on the loopback): rdma_cm's UD address
 * exchange with a child JVM ({@link UcxDatagramPeerMain}) over the authenticated link, then echoes of
 * every size byte-exact; a rejected exchange carries the child's private data; an exchange that
 * reaches a TCP port space listener is rejected (invalid service ID); multicast both ways, each
 * datagram acknowledged (resent until it is, so nothing here depends on the kernel never dropping);
 * and a member process killed mid-stream costs the sender and the other members nothing.
 */
@ExtendWith(NoLeaks.class)
class UcxDatagramProcessTest {
    private static final String SECRET = "ucx-datagram-process-test-secret-0123456789";
    private static final String GROUP = "239.77.8.1";
    private final List<UdNode> nodes = new ArrayList<>();
    private final List<CmId> ids = new ArrayList<>();
    private final List<ChildJvm> children = new ArrayList<>();
    private final List<CmEvent> events = new CopyOnWriteArrayList<>();

    @AfterEach
    void tearDown() throws Exception {
        for (ChildJvm c : children) {
            c.close();
        }
        for (CmId id : ids.reversed()) {
            if (!id.isDestroyed()) {
                if (id.qp() != null) {
                    id.destroyQp();
                }
                id.close();
            }
        }
        for (UdNode n : nodes) {
            n.close();
        }
    }

    private UdNode node() {
        UdNode n = new UdNode(Providers.open("ucx", Map.of("secret", SECRET)), 64);
        nodes.add(n);
        return n;
    }

    private CmId id(UdNode n) {
        CmId id = n.device.createCmId(PortSpace.UDP);
        ids.add(id);
        id.onEvent(e -> {
            events.add(e);
            return false;
        });
        return id;
    }

    /** A child with its three listeners and its member joined; its listeners' addresses by kind. */
    private Map<String, String> child() throws Exception {
        ChildJvm c = ChildJvm.of(UcxDatagramPeerMain.class).args("127.0.0.1:0", GROUP).env("REGMEM_SECRET", SECRET).start();
        children.add(c);
        Map<String, String> at = new java.util.HashMap<>();
        for (int i = 0; i < 3; i++) {
            String[] w = c.expect("LISTENING").split(" ");
            at.put(w[w.length - 2], w[w.length - 1]);
        }
        c.expect("JOINED");
        return at;
    }

    private CmEvent awaitEvent(CmId id, CmEvent.Type... types) {
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (true) {
            for (CmEvent e : events) {
                if (e.id() == id && List.of(types).contains(e.type())) {
                    return e;
                }
            }
            assertThat(System.nanoTime()).as("an event %s of %s within 20 s (saw %s)", List.of(types), id, events)
                    .isLessThan(deadline);
            Thread.onSpinWait();
        }
    }

    @Test
    void theUdExchangeAcrossProcessesThenEchoesOfEverySizeByteExact() throws Exception {
        Map<String, String> at = child();
        UdNode a = node();
        CmId id = id(a);
        QueuePair qp = id.createQp(a.pd, QpInitAttributes.of(a.cq).maxRecvWr(16).maxSendWr(16));
        for (int i = 0; i < 16; i++) {
            a.postRecv(qp, i, UdNode.SLOT);
        }
        id.connect(at.get("udp"), "hello".getBytes());
        CmEvent est = awaitEvent(id, CmEvent.Type.ESTABLISHED, CmEvent.Type.REJECTED, CmEvent.Type.UNREACHABLE,
                CmEvent.Type.CONNECT_ERROR);
        assertThat(est.type()).isEqualTo(CmEvent.Type.ESTABLISHED);
        assertThat(new String(id.privateData())).startsWith("echo");
        UdParam ud = est.ud();
        assertThat(ud.ah().dgid().isLoopbackAddress()).isTrue();
        assertThat(ud.ah().port()).isPositive().isNotEqualTo(a.device.datagramAddress().port());
        assertThat(ud.qkey()).isEqualTo(QpInitAttributes.RDMA_UDP_QKEY);
        AddressHandle ah = a.ah(ud.ah());
        WorkRequest wr = new WorkRequest(1);
        SplittableRandom rnd = new SplittableRandom(11);
        for (int m = 0; m < 60; m++) {
            int length = m == 0 ? 0 : m == 1 ? 4096 : 1 + rnd.nextInt(4096);
            byte[] bytes = new byte[length];
            rnd.nextBytes(bytes);
            java.lang.foreign.MemorySegment.copy(bytes, 0, a.slot(40), ValueLayout.JAVA_BYTE, 0, length);
            qp.postSend(a.send(wr, 40, length).ud(ah, ud.qpNum(), ud.qkey()));
            WorkCompletion echo = null;
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (echo == null) {
                WorkCompletion wc = a.take();
                if (wc != null && wc.opcode() == Opcode.RECV) {
                    echo = wc;
                } else if (wc != null) {
                    assertThat(wc.status()).isEqualTo(WcStatus.SUCCESS);
                }
                assertThat(System.nanoTime()).as("echo %d within 10 s", m).isLessThan(deadline);
            }
            assertThat(echo.status()).isEqualTo(WcStatus.SUCCESS);
            assertThat(echo.byteLen()).isEqualTo(40 + length);
            assertThat(echo.srcQp()).isEqualTo(ud.qpNum());
            assertThat(echo.source()).isEqualTo(ud.ah());
            byte[] got = new byte[length];
            java.lang.foreign.MemorySegment.copy(a.slot((int) echo.wrId()), ValueLayout.JAVA_BYTE, 40, got, 0, length);
            assertThat(got).as("echo %d (%d bytes)", m, length).isEqualTo(bytes);
            a.postRecv(qp, (int) echo.wrId(), UdNode.SLOT);
        }
        assertThat(a.device.counters().datagramsDropped()).isZero();
        children.getFirst().finish();
    }

    @Test
    void aRejectedExchangeCarriesThePrivateDataAndATcpListenerIsTheWrongService() throws Exception {
        Map<String, String> at = child();
        UdNode a = node();
        CmId rejected = id(a);
        rejected.createQp(a.pd, QpInitAttributes.of(a.cq));
        rejected.connect(at.get("reject"));
        CmEvent r = awaitEvent(rejected, CmEvent.Type.REJECTED, CmEvent.Type.ESTABLISHED);
        assertThat(r.type()).isEqualTo(CmEvent.Type.REJECTED);
        assertThat(r.status()).isEqualTo(CmEvent.REJECT_CONSUMER_DEFINED);
        assertThat(new String(r.consumerRejectData())).startsWith("full");
        CmId wrongSpace = id(a);
        wrongSpace.createQp(a.pd, QpInitAttributes.of(a.cq));
        wrongSpace.connect(at.get("tcp"));
        CmEvent w = awaitEvent(wrongSpace, CmEvent.Type.REJECTED, CmEvent.Type.ESTABLISHED);
        assertThat(w.type()).isEqualTo(CmEvent.Type.REJECTED);
        assertThat(w.status()).isEqualTo(CmEvent.REJECT_INVALID_SERVICE_ID);
        assertThat(w.rejectMessage()).isNotBlank();
        children.getFirst().finish();
    }

    /** Sends DATA {@code seq} to the group until the child's ACK of it comes; acknowledges the child's DATA meanwhile. */
    private void publishAcked(UdNode a, QueuePair member, AddressHandle group, long seq) {
        WorkRequest wr = new WorkRequest(1);
        long deadline = System.nanoTime() + 20_000_000_000L;
        long resendAt = 0;
        while (true) {
            if (System.nanoTime() >= resendAt) {
                a.slot(63).set(ValueLayout.JAVA_LONG_UNALIGNED, 0, seq);
                a.slot(63).set(ValueLayout.JAVA_LONG_UNALIGNED, 8, UcxDatagramPeerMain.DATA);
                member.postSend(a.send(wr, 63, 16).ud(group, AhAttributes.MULTICAST_QPN, QpInitAttributes.RDMA_UDP_QKEY));
                resendAt = System.nanoTime() + 100_000_000L;
            }
            WorkCompletion wc = a.take();
            if (wc != null && wc.opcode() == Opcode.RECV) {
                int slot = (int) wc.wrId();
                long kind = a.slot(slot).get(ValueLayout.JAVA_LONG_UNALIGNED, 48);
                long got = a.slot(slot).get(ValueLayout.JAVA_LONG_UNALIGNED, 40);
                a.postRecv(member, slot, 256);
                if (kind == UcxDatagramPeerMain.ACK && got == seq) {
                    return;
                }
            }
            assertThat(System.nanoTime()).as("the child's ACK of %d within 20 s", seq).isLessThan(deadline);
        }
    }

    @Test
    void multicastBothWaysBetweenProcessesEveryDatagramAcknowledged() throws Exception {
        child();
        ChildJvm c = children.getFirst();
        UdNode a = node();
        CmId mid = id(a);
        mid.bindAddr("127.0.0.1:0");
        QueuePair member = mid.createQp(a.pd, QpInitAttributes.of(a.cq).maxRecvWr(8).maxSendWr(32)
                .blockSelfMulticastLoopback(true));
        for (int i = 0; i < 8; i++) {
            a.postRecv(member, 48 + i, 256);
        }
        InetAddress group = InetAddress.getByName(GROUP);
        mid.joinMulticast(group, JoinFlag.FULLMEMBER);
        assertThat(awaitEvent(mid, CmEvent.Type.MULTICAST_JOIN, CmEvent.Type.MULTICAST_ERROR).type())
                .isEqualTo(CmEvent.Type.MULTICAST_JOIN);
        AddressHandle toGroup = a.ah(awaitEvent(mid, CmEvent.Type.MULTICAST_JOIN).ud().ah());
        for (long s = 0; s < 30; s++) { // this process to the child, through the group
            publishAcked(a, member, toGroup, s);
        }
        c.command("PUBLISH 40"); // the child to this process, through the group
        WorkRequest wr = new WorkRequest(1);
        long next = 0;
        long deadline = System.nanoTime() + 30_000_000_000L;
        while (next < 40) {
            WorkCompletion wc = a.take();
            if (wc != null && wc.opcode() == Opcode.RECV) {
                int slot = (int) wc.wrId();
                long seq = a.slot(slot).get(ValueLayout.JAVA_LONG_UNALIGNED, 40);
                long kind = a.slot(slot).get(ValueLayout.JAVA_LONG_UNALIGNED, 48);
                AhAttributes from = wc.source();
                int srcQp = wc.srcQp();
                a.postRecv(member, slot, 256);
                if (kind == UcxDatagramPeerMain.DATA) {
                    assertThat(seq).as("the child's DATA in order (a resend repeats the last)").isBetween(next - 1, next);
                    if (seq == next) {
                        next++;
                    }
                    a.slot(62).set(ValueLayout.JAVA_LONG_UNALIGNED, 0, seq);
                    a.slot(62).set(ValueLayout.JAVA_LONG_UNALIGNED, 8, UcxDatagramPeerMain.ACK);
                    AddressHandle back = a.ah(from);
                    member.postSend(a.send(wr, 62, 16).ud(back, srcQp, QpInitAttributes.RDMA_UDP_QKEY));
                }
            }
            assertThat(System.nanoTime()).as("40 datagrams from the child within 30 s (at %d)", next).isLessThan(deadline);
        }
        c.expect("PUBLISHED");
        mid.leaveMulticast(group);
        c.finish();
    }

    @Test
    void multicastBetweenTwoNetworkNamespacesJoinedByAVethPair() throws Exception {
        try (NamespacedPair.NetworkNamespaces ns = NamespacedPair.networkNamespaces()) {
            ChildJvm a = ChildJvm.of(UcxDatagramPeerMain.class).under(List.of("ip", "netns", "exec", ns.a))
                    .jvm("-Xmx96m", "-XX:TieredStopAtLevel=1")
                    .args("127.0.0.1:0", GROUP, "datagramBind=" + NamespacedPair.NetworkNamespaces.A_ADDRESS + ":0")
                    .env("REGMEM_SECRET", SECRET).start();
            children.add(a);
            ChildJvm b = ChildJvm.of(UcxDatagramPeerMain.class).under(List.of("ip", "netns", "exec", ns.b))
                    .jvm("-Xmx96m", "-XX:TieredStopAtLevel=1")
                    .args("127.0.0.1:0", GROUP, "datagramBind=" + NamespacedPair.NetworkNamespaces.B_ADDRESS + ":0")
                    .env("REGMEM_SECRET", SECRET).start();
            children.add(b);
            for (ChildJvm c : List.of(a, b)) {
                c.find("JOINED");
            }
            // each publishes to the group over the veth; the other acknowledges each datagram by unicast back
            a.command("PUBLISH 20");
            a.expect("PUBLISHED");
            b.command("PUBLISH 20");
            b.expect("PUBLISHED");
            a.finish();
            b.finish();
        }
    }

    @Test
    void aMemberProcessKilledMidStreamCostsTheSenderAndTheOtherMembersNothing() throws Exception {
        child();
        ChildJvm c = children.getFirst();
        UdNode pub = node();
        UdNode other = node();
        InetAddress group = InetAddress.getByName(GROUP);
        QueuePair sender = pub.qp(new QpInitAttributes().maxSendWr(64));
        QueuePair member = other.qp();
        member.attachMulticast(group);
        for (int i = 0; i < 32; i++) {
            other.postRecv(member, i, 256);
        }
        AddressHandle ah = pub.ah(AhAttributes.of(group));
        WorkRequest wr = new WorkRequest(1);
        WorkRequest rwr = new WorkRequest(1);
        WorkCompletion[] wcs = {new WorkCompletion()};
        int count = 4000;
        long received = 0;
        for (int s = 0; s < count; s++) {
            if (s == count / 4) {
                c.close(); // SIGKILL, mid-stream
            }
            pub.slot(63).set(ValueLayout.JAVA_LONG_UNALIGNED, 0, s);
            pub.slot(63).set(ValueLayout.JAVA_LONG_UNALIGNED, 8, 2); // neither DATA nor ACK: the child ignores it
            sender.postSend(pub.send(wr, 63, 16).ud(ah, AhAttributes.MULTICAST_QPN, QpInitAttributes.RDMA_UDP_QKEY));
            while (pub.cq.poll(wcs) > 0) {
                assertThat(wcs[0].status()).as("the sender is never failed").isEqualTo(WcStatus.SUCCESS);
            }
            while (other.cq.poll(wcs) > 0) {
                assertThat(wcs[0].status()).isEqualTo(WcStatus.SUCCESS);
                received++;
                int slot = (int) wcs[0].wrId();
                member.postRecv(rwr.reset().wrId(slot).addSge(other.slot(slot).address(), 256, other.mr.lkey()));
            }
        }
        long deadline = System.nanoTime() + 2_000_000_000L;
        while (System.nanoTime() < deadline) { // what is still on its way
            while (other.cq.poll(wcs) > 0) {
                received++;
                int slot = (int) wcs[0].wrId();
                member.postRecv(rwr.reset().wrId(slot).addSge(other.slot(slot).address(), 256, other.mr.lkey()));
            }
        }
        assertThat(received).as("the other member received after the kill too").isGreaterThan(count / 4);
        other.assertAccounted(received, count, "the other member");
        assertThat(sender.state()).isEqualTo(QueuePair.State.RTS);
        assertThat(member.state()).isEqualTo(QueuePair.State.RTS);
        assertThat(pub.device.counters().datagramsDropped(DatagramDrop.NO_QP)).isZero();
        member.detachMulticast(group);
    }
}
