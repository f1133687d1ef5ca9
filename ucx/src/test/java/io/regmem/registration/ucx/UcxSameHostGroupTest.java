package io.regmem.registration.ucx;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.AddressHandle;
import io.regmem.registration.AhAttributes;
import io.regmem.registration.DatagramDrop;
import io.regmem.registration.Opcode;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.UdNode;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A ucx device's groups on its own host: with {@code sameHostLane} (the default) each datagram it
 * sends to a group goes into a shared-memory ring as well as over UDP multicast, and the members of
 * this host read it there: an shm member (no UDP at all) and a ucx member (which ignores the UDP copy
 * of a sender whose ring it reads) each get every datagram exactly once, in order, as does a ucx member
 * with {@code sameHostLane=false} (over UDP only); an shm sender reaches the ucx member through its
 * ring too.
 */
@ExtendWith(NoLeaks.class)
class UcxSameHostGroupTest {
    private static final String SECRET = "ucx-same-host-group-test-secret-0123456789";
    private static final String GROUP = "239.77.11.1";
    private static final int COUNT = 2_000;
    private static final int BURST = 32;
    private final List<UdNode> nodes = new ArrayList<>();
    private final WorkRequest wr = new WorkRequest(1);
    private final WorkCompletion[] one = {new WorkCompletion()};

    @AfterEach
    void tearDown() {
        for (UdNode n : nodes.reversed()) {
            n.close();
        }
    }

    private UdNode node(String provider, Map<String, String> options) {
        UcxAvailable.assumeInstalled();
        Map<String, String> all = new HashMap<>(options);
        all.put("secret", SECRET);
        UdNode n = new UdNode(RdmaDevice.open(provider, all), 64);
        nodes.add(n);
        return n;
    }

    private static QueuePair member(UdNode n, InetAddress group) {
        QueuePair qp = n.qp();
        qp.attachMulticast(group);
        for (int i = 0; i < 48; i++) {
            n.postRecv(qp, i, 256);
        }
        return qp;
    }

    /** Sends {@code from .. from + BURST - 1} from {@code qp}, then takes each at every member, once, in order. */
    private void burst(UdNode pub, QueuePair qp, AddressHandle to, long from, Map<UdNode, QueuePair> members) {
        for (long s = from; s < from + BURST; s++) {
            pub.slot(63).set(ValueLayout.JAVA_LONG_UNALIGNED, 0, s);
            qp.postSend(pub.send(wr, 63, 8).ud(to, AhAttributes.MULTICAST_QPN, QpInitAttributes.RDMA_UDP_QKEY));
            assertThat(pub.cq.poll(one)).isOne();
            assertThat(one[0].opcode()).isEqualTo(Opcode.SEND);
        }
        for (Map.Entry<UdNode, QueuePair> m : members.entrySet()) {
            UdNode n = m.getKey();
            for (long s = from; s < from + BURST; s++) {
                WorkCompletion wc = n.await();
                assertThat(wc.status()).isEqualTo(WcStatus.SUCCESS);
                assertThat(wc.opcode()).isEqualTo(Opcode.RECV);
                assertThat(n.slot((int) wc.wrId()).get(ValueLayout.JAVA_LONG_UNALIGNED, 40)).as("%s: datagram %d", n.device, s)
                        .isEqualTo(s);
                n.postRecv(m.getValue(), (int) wc.wrId(), 256);
            }
        }
    }

    private static void nothingMore(Map<UdNode, QueuePair> members) {
        long until = System.nanoTime() + 200_000_000L;
        while (System.nanoTime() < until) {
            for (UdNode n : members.keySet()) {
                assertThat(n.poll()).as("%s: no datagram twice", n.device).isNull();
            }
        }
        for (UdNode n : members.keySet()) {
            for (DatagramDrop d : DatagramDrop.values()) {
                assertThat(n.device.counters().datagramsDropped(d)).as("%s: %s drops", n.device, d).isZero();
            }
        }
    }

    private static long ringMappings() throws Exception {
        try (var lines = Files.lines(Path.of("/proc/self/maps"))) {
            return lines.filter(l -> l.contains("memfd:regmem-group-" + GROUP)).count();
        }
    }

    @Test
    void aUcxSendersMembersOnThisHostReadItsRingAndTakeEachDatagramOnce() throws Exception {
        InetAddress group = InetAddress.getByName(GROUP);
        UdNode shm = node("shm", Map.of());
        UdNode ucx = node("ucx", Map.of("sameHostLane", "true")); // (this module's tests turn it off by default)
        UdNode udpOnly = node("ucx", Map.of("sameHostLane", "false"));
        Map<UdNode, QueuePair> members = new HashMap<>();
        members.put(shm, member(shm, group));
        members.put(ucx, member(ucx, group));
        members.put(udpOnly, member(udpOnly, group));
        UdNode pub = node("ucx", Map.of("sameHostLane", "true"));
        QueuePair qp = pub.qp();
        AddressHandle to = pub.ah(AhAttributes.of(group));
        for (long s = 0; s < COUNT; s += BURST) {
            burst(pub, qp, to, s, members);
        }
        nothingMore(members);
        assertThat(ringMappings()).as("the sender's ring, and the two members' read-only mappings of it").isEqualTo(3);
        for (Map.Entry<UdNode, QueuePair> m : members.entrySet()) {
            m.getValue().detachMulticast(group);
        }
    }

    @Test
    void anShmSendersRingReachesAUcxMemberOfThisHost() throws Exception {
        InetAddress group = InetAddress.getByName(GROUP);
        UdNode ucx = node("ucx", Map.of("sameHostLane", "true"));
        Map<UdNode, QueuePair> members = Map.of(ucx, member(ucx, group));
        UdNode pub = node("shm", Map.of());
        QueuePair qp = pub.qp();
        AddressHandle to = pub.ah(AhAttributes.of(group));
        for (long s = 0; s < COUNT; s += BURST) {
            burst(pub, qp, to, s, members);
        }
        nothingMore(members);
        members.get(ucx).detachMulticast(group);
    }
}
