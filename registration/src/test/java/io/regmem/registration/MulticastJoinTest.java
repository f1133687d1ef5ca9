package io.regmem.registration;

import static io.regmem.registration.ObjectModelTest.assertRdma;
import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.Errno;
import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.Providers;
import io.regmem.registration.testkit.UdNode;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * {@code rdma_join_multicast(3)} and {@code rdma_leave_multicast(3)} on the provider under test, and
 * librdmacm's {@code examples/mckey.c} ported: receivers join a group as full members, a sender
 * joins it send-only, each takes the {@code MULTICAST_JOIN} event's UD parameters, the sender makes
 * an address handle of them and sends {@code message_count} messages to QPN {@code 0xFFFFFF}, and
 * every receiver gets every message once; then they leave and receive nothing more. Plus the rules:
 * a bound UDP ID only, a multicast address, one join per group and ID, leave what was joined, the
 * device's limits as a {@code MULTICAST_ERROR} event.
 */
@ExtendWith(NoLeaks.class)
class MulticastJoinTest {
    private final List<UdNode> nodes = new ArrayList<>();
    private final List<CmId> ids = new ArrayList<>();
    private final List<CmEvent> events = new ArrayList<>();
    private InetAddress group;

    @BeforeEach
    void setUp() throws Exception {
        try (RdmaDevice probe = Providers.open()) {
            Assumptions.assumeTrue(probe.supportsDatagrams() && probe.attributes().maxMcastGroups() > 0,
                    Providers.NAME + " has no multicast (max_mcast_grp 0)");
        }
        group = InetAddress.getByName("239.78.0." + (1 + (int) (System.nanoTime() & 127)));
    }

    @AfterEach
    void tearDown() {
        for (CmId id : ids) {
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

    private UdNode node(Map<String, String> options) {
        UdNode n = new UdNode(options, 64);
        nodes.add(n);
        return n;
    }

    /** A bound UDP ID of {@code n} with a UD QP (or none), recording its events. */
    private CmId boundId(UdNode n, boolean withQp) {
        CmId id = n.device.createCmId(PortSpace.UDP);
        ids.add(id);
        id.onEvent(e -> {
            events.add(e);
            return false;
        });
        id.bindAddr(Providers.bindAddress("127.0.0.1"));
        if (withQp) {
            id.createQp(n.pd, QpInitAttributes.of(n.cq).maxSendWr(64).maxRecvWr(64));
        }
        return id;
    }

    private CmEvent lastEventOf(CmId id) {
        for (int i = events.size() - 1; i >= 0; i--) {
            if (events.get(i).id() == id) {
                return events.get(i);
            }
        }
        return null;
    }

    @Test
    void mckey() {
        int messageCount = 10;
        int messageSize = 100;
        UdNode sendNode = node(Map.of());
        List<UdNode> receivers = List.of(node(Map.of()), node(Map.of()));
        List<CmId> receiverIds = new ArrayList<>();
        for (UdNode r : receivers) {
            CmId id = boundId(r, true);
            for (int i = 0; i < messageCount; i++) {
                r.postRecv(id.qp(), i, 40 + messageSize);
            }
            id.joinMulticast(group, JoinFlag.FULLMEMBER);
            CmEvent joined = lastEventOf(id);
            assertThat(joined.type()).isEqualTo(CmEvent.Type.MULTICAST_JOIN);
            assertThat(joined.status()).isZero();
            assertThat(joined.group()).isEqualTo(group);
            assertThat(joined.ud().qpNum()).isEqualTo(AhAttributes.MULTICAST_QPN);
            receiverIds.add(id);
        }
        CmId sender = boundId(sendNode, true);
        sender.joinMulticast(group, JoinFlag.SENDONLY_FULLMEMBER);
        UdParam ud = lastEventOf(sender).ud();
        assertThat(ud.ah().dgid()).isEqualTo(group);
        assertThat(ud.qkey()).isEqualTo(QpInitAttributes.RDMA_UDP_QKEY);
        AddressHandle ah = sendNode.ah(ud.ah());
        WorkRequest wr = new WorkRequest(1);
        for (int m = 0; m < messageCount; m++) {
            sendNode.slot(m).asSlice(0, messageSize).fill((byte) (m + 1));
            sender.qp().postSend(sendNode.send(wr, m, messageSize).ud(ah, ud.qpNum(), ud.qkey()));
            assertThat(sendNode.await().status()).isEqualTo(WcStatus.SUCCESS);
        }
        for (int r = 0; r < receivers.size(); r++) {
            UdNode n = receivers.get(r);
            for (int m = 0; m < messageCount; m++) {
                WorkCompletion wc = n.await();
                assertThat(wc.status()).isEqualTo(WcStatus.SUCCESS);
                assertThat(wc.byteLen()).isEqualTo(40 + messageSize);
                assertThat(wc.srcQp()).isEqualTo(sender.qp().qpNum());
                assertThat(n.slot((int) wc.wrId()).get(ValueLayout.JAVA_BYTE, 40 + messageSize - 1)).isEqualTo((byte) (m + 1));
            }
            assertThat(n.poll()).isNull();
        }
        assertThat(sendNode.poll()).as("a send-only member's QP receives nothing of the group").isNull();
        // leaving detaches: nothing more arrives (and nothing is dropped: the QP is not a member)
        for (int r = 0; r < receivers.size(); r++) {
            receiverIds.get(r).leaveMulticast(group);
            receivers.get(r).postRecv(receiverIds.get(r).qp(), 0, 4096);
        }
        sender.qp().postSend(sendNode.send(wr, 0, 8).ud(ah, ud.qpNum(), ud.qkey()));
        assertThat(sendNode.await().status()).isEqualTo(WcStatus.SUCCESS);
        for (UdNode n : receivers) {
            assertThat(n.poll()).isNull();
            assertThat(n.device.counters().datagramsDropped()).isZero();
        }
        sender.leaveMulticast(group);
    }

    /**
     * A device whose groups ride the kernel's IP multicast (shm, ucx) can join as many as a socket of
     * this host may: {@code net.ipv4.igmp_max_memberships}, read whole (a sysctl file read as the JDK's
     * {@code Files.readString} reads it gives its first byte only: 2 groups of 20).
     */
    @Test
    void aKernelCarriedDevicesGroupLimitIsTheKernelsWholeSetting() throws Exception {
        Assumptions.assumeTrue(Providers.NAME.equals("shm") || Providers.NAME.equals("ucx"), "groups over the kernel's UDP");
        int kernel = Integer.parseInt(java.nio.file.Files.readAllLines(java.nio.file.Path.of("/proc/sys/net/ipv4/igmp_max_memberships"))
                .get(0).strip());
        try (RdmaDevice d = Providers.open()) {
            assertThat(d.attributes().maxMcastGroups()).isEqualTo(Math.max(1, Math.min(8192, kernel)));
        }
    }

    @Test
    void joinRulesEachChangingNothing() throws Exception {
        UdNode n = node(Map.of());
        CmId tcp = n.device.createCmId();
        ids.add(tcp);
        tcp.bindAddr(Providers.bindAddress("mc-rules-" + System.nanoTime()));
        assertRdma(() -> tcp.joinMulticast(group, JoinFlag.FULLMEMBER), Errno.EINVAL, "TCP port space");
        CmId unbound = n.device.createCmId(PortSpace.UDP);
        ids.add(unbound);
        assertRdma(() -> unbound.joinMulticast(group, JoinFlag.FULLMEMBER), Errno.EINVAL, "bind the ID first");
        CmId id = boundId(n, true);
        assertRdma(() -> id.joinMulticast(InetAddress.getByName("10.0.0.1"), JoinFlag.FULLMEMBER), Errno.EINVAL, "multicast");
        assertRdma(() -> id.joinMulticast(group, null), Errno.EINVAL);
        assertRdma(() -> id.leaveMulticast(group), Errno.EADDRNOTAVAIL, "has not joined");
        assertThat(events).isEmpty();
        id.joinMulticast(group, JoinFlag.FULLMEMBER);
        assertRdma(() -> id.joinMulticast(group, JoinFlag.SENDONLY_FULLMEMBER), Errno.EADDRINUSE, "already");
        assertThat(events).hasSize(1);
        id.leaveMulticast(group);
        assertRdma(() -> id.leaveMulticast(group), Errno.EADDRNOTAVAIL);
        // joined again after leaving; then destroying the QP detaches it and closing the ID ends the join
        id.joinMulticast(group, JoinFlag.FULLMEMBER);
        assertThat(id.qp().groups).contains(group);
        id.destroyQp();
        id.close();
        UdNode none = node(Map.of("maxMcastGroups", "0", "maxMcastQpAttach", "0"));
        CmId noMc = boundId(none, false);
        assertRdma(() -> noMc.joinMulticast(group, JoinFlag.FULLMEMBER), Errno.EOPNOTSUPP, "no multicast");
    }

    @Test
    void anAttachBeyondTheDevicesLimitIsAMulticastErrorEvent() throws Exception {
        UdNode n = node(Map.of("maxMcastGroups", "4", "maxMcastQpAttach", "1"));
        CmId first = boundId(n, true);
        CmId second = boundId(n, true);
        first.joinMulticast(group, JoinFlag.FULLMEMBER);
        assertThat(lastEventOf(first).type()).isEqualTo(CmEvent.Type.MULTICAST_JOIN);
        second.joinMulticast(group, JoinFlag.FULLMEMBER);
        CmEvent failed = lastEventOf(second);
        assertThat(failed.type()).isEqualTo(CmEvent.Type.MULTICAST_ERROR);
        assertThat(failed.status()).isEqualTo(-Errno.ENOMEM.value());
        assertThat(failed.group()).isEqualTo(group);
        assertThat(second.qp().groups).isEmpty();
        assertRdma(() -> second.leaveMulticast(group), Errno.EADDRNOTAVAIL);
        // a send-only join attaches nothing, so the limit does not apply to it
        second.joinMulticast(group, JoinFlag.SENDONLY_FULLMEMBER);
        assertThat(lastEventOf(second).type()).isEqualTo(CmEvent.Type.MULTICAST_JOIN);
        // a QP created after the join is not attached (librdmacm attaches when the event is taken)
        CmId late = boundId(n, false);
        late.joinMulticast(InetAddress.getByName("239.78.1.1"), JoinFlag.FULLMEMBER);
        late.createQp(n.pd, QpInitAttributes.of(n.cq));
        assertThat(late.qp().groups).isEmpty();
    }
}
