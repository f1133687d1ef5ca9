package io.regmem.registration.shm;

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
import io.regmem.registration.testkit.ChildJvm;
import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.UdNode;
import java.io.IOException;
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
 * shm's multicast groups between processes, in shared memory: a child's publication reaches a member
 * here whole and in order without the kernel's IP multicast (no membership in {@code /proc/net/igmp}),
 * and its ring is unmapped here once the child is killed; a member process that is stopped costs the
 * publisher and the other members nothing, and once it runs again accounts for every datagram as
 * received, lost to the ring's lapping, or dropped for want of a receive; a device without the secret
 * neither hears a group nor is heard.
 */
@ExtendWith(NoLeaks.class)
class ShmGroupProcessTest {
    private static final String SECRET = "shm-group-process-test-secret-0123456789";
    private static final String GROUP = "239.77.9.1";
    /** The group as /proc/net/igmp prints it. */
    private static final String IGMP = "01094DEF";
    private static final String MAPPING = "memfd:regmem-group-" + GROUP;
    private static final int CHUNK = 50;
    private final InetAddress group;
    private final List<UdNode> nodes = new ArrayList<>();
    private final List<ChildJvm> children = new ArrayList<>();
    private final WorkRequest wr = new WorkRequest(1);
    private final WorkCompletion[] sent = {new WorkCompletion()};

    ShmGroupProcessTest() throws IOException {
        group = InetAddress.getByName(GROUP);
    }

    @AfterEach
    void tearDown() throws Exception {
        for (ChildJvm c : children) {
            c.close();
        }
        for (UdNode n : nodes.reversed()) {
            n.close();
        }
    }

    private UdNode node(Map<String, String> options) {
        Map<String, String> all = new HashMap<>(options);
        all.put("secret", SECRET);
        UdNode n = new UdNode(RdmaDevice.open("shm", all), 64);
        nodes.add(n);
        return n;
    }

    private ChildJvm child(String role, String secret, String options) throws IOException {
        ChildJvm c = ChildJvm.of(ShmGroupPeerMain.class).args(role, GROUP, options).env("REGMEM_SECRET", secret).start();
        children.add(c);
        return c;
    }

    private QueuePair member(UdNode n) {
        QueuePair qp = n.qp();
        qp.attachMulticast(group);
        for (int i = 0; i < ShmGroupPeerMain.RECEIVES; i++) {
            n.postRecv(qp, i, 256);
        }
        return qp;
    }

    /** Takes {@code count} datagrams at {@code n}, which must be {@code from}, {@code from + 1}, ... in order. */
    private static long receive(UdNode n, QueuePair qp, long from, int count) {
        long next = from;
        long deadline = System.nanoTime() + 30_000_000_000L;
        while (next < from + count) {
            WorkCompletion wc = n.poll();
            if (wc == null) {
                assertThat(System.nanoTime()).as("datagram %d within 30 s", next).isLessThan(deadline);
                Thread.onSpinWait();
                continue;
            }
            assertThat(wc.status()).isEqualTo(WcStatus.SUCCESS);
            if (wc.opcode() != Opcode.RECV) {
                continue;
            }
            assertThat(ShmGroupPeerMain.check(n, (int) wc.wrId(), wc.byteLen())).as("the datagram's number, whole").isEqualTo(next);
            next++;
            n.postRecv(qp, (int) wc.wrId(), 256);
        }
        return next;
    }

    /** Sends datagrams {@code from} to {@code from + count - 1} to the group from {@code qp}, taking their completions. */
    private void publish(UdNode n, QueuePair qp, AddressHandle to, long from, int count) {
        for (long s = from; s < from + count; s++) {
            ShmGroupPeerMain.fill(n, 63, s);
            qp.postSend(n.send(wr, 63, ShmGroupPeerMain.BYTES).ud(to, AhAttributes.MULTICAST_QPN, QpInitAttributes.RDMA_UDP_QKEY));
            assertThat(n.cq.poll(sent)).isOne(); // (a UD send completes when it is posted)
            assertThat(sent[0].qp()).isSameAs(qp);
            assertThat(sent[0].opcode()).isEqualTo(Opcode.SEND);
        }
    }

    private static long mappings() throws IOException {
        try (var lines = Files.lines(Path.of("/proc/self/maps"))) {
            return lines.filter(l -> l.contains(MAPPING)).count();
        }
    }

    private static boolean kernelMember() throws IOException {
        return Files.readString(Path.of("/proc/net/igmp")).contains(IGMP);
    }

    @Test
    void aChildsPublicationReachesAMemberHereInSharedMemoryAndIsUnmappedOnceTheChildDies() throws Exception {
        UdNode here = node(Map.of());
        QueuePair qp = member(here);
        ChildJvm pub = child("publisher", SECRET, "");
        pub.expect("READY");
        long next = 0;
        for (int c = 0; c < 100; c++) {
            pub.command("PUBLISH " + CHUNK);
            next = receive(here, qp, next, CHUNK);
        }
        pub.expect("PUBLISHED " + CHUNK);
        assertThat(kernelMember()).as("no membership of the kernel's: the group is shared memory").isFalse();
        assertThat(mappings()).as("the child's ring, mapped here").isEqualTo(1);
        assertThat(here.device.counters().datagramsDropped(DatagramDrop.LOST)).isZero();
        assertThat(here.device.counters().datagramsDropped(DatagramDrop.NO_RECEIVE)).isZero();
        pub.close(); // killed
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (mappings() > 0) {
            here.poll();
            assertThat(System.nanoTime()).as("the dead child's ring is unmapped within 10 s").isLessThan(deadline);
            Thread.sleep(10);
        }
        qp.detachMulticast(group);
    }

    @Test
    void aStoppedMemberProcessCostsTheOthersNothingAndThenAccountsForEveryDatagram() throws Exception {
        ChildJvm slow = child("member", SECRET, "");
        slow.expect("JOINED");
        UdNode pub = node(Map.of("groupRingBytes", "65536")); // 64 KiB: about 540 of these datagrams
        UdNode local = node(Map.of());
        QueuePair lq = member(local);
        QueuePair pq = pub.qp();
        AddressHandle to = pub.ah(AhAttributes.of(group));
        publish(pub, pq, to, 0, CHUNK);
        long next = receive(local, lq, 0, CHUNK);
        long deadline = System.nanoTime() + 30_000_000_000L;
        while (true) {
            slow.command("REPORT");
            if (slow.find("GOT ").startsWith("GOT received=" + CHUNK + " ")) {
                break;
            }
            assertThat(System.nanoTime()).as("the child takes the first datagrams").isLessThan(deadline);
            Thread.sleep(20);
        }
        slow.signal("STOP");
        int total = 20_000;
        for (int c = 0; c < total / CHUNK; c++) {
            publish(pub, pq, to, next, CHUNK);
            next = receive(local, lq, next, CHUNK); // every one, in order, while the other member is stopped
        }
        slow.signal("CONT");
        Map<String, Long> r;
        do {
            slow.command("REPORT");
            r = fields(slow.find("GOT "));
            assertThat(r.get("bad")).as("datagrams not whole, or out of order").isZero();
            assertThat(System.nanoTime()).as("the child accounts for every datagram").isLessThan(deadline + 30_000_000_000L);
        } while (r.get("received") + r.get("lost") + r.get("noreceive") < CHUNK + total);
        assertThat(r.get("received") + r.get("lost") + r.get("noreceive")).isEqualTo(CHUNK + total);
        assertThat(r.get("lost")).as("lapped by the ring while stopped").isPositive();
        assertThat(r.get("last")).as("it goes on with the latest").isEqualTo(CHUNK + total - 1);
        slow.finish();
        lq.detachMulticast(group);
    }

    @Test
    void aMemberThatJoinsWhileAPublisherIsStoppedHearsItOnceItRunsAgain() throws Exception {
        ChildJvm pub = child("publisher", SECRET, "");
        pub.expect("READY");
        pub.command("PUBLISH 1"); // (its ring exists from now on)
        pub.expect("PUBLISHED 1");
        pub.signal("STOP");
        UdNode here = node(Map.of());
        QueuePair qp = member(here); // its fetch from the stopped child is not answered in time
        pub.signal("CONT");
        long first = -1;
        long published = 1;
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (first < 0) { // (asked again every 100 ms: the datagrams before that are not heard)
            pub.command("PUBLISH 1");
            published++;
            long until = System.nanoTime() + 100_000_000L;
            while (first < 0 && System.nanoTime() < until) {
                WorkCompletion wc = here.poll();
                if (wc != null && wc.opcode() == Opcode.RECV) {
                    first = ShmGroupPeerMain.check(here, (int) wc.wrId(), wc.byteLen());
                    here.postRecv(qp, (int) wc.wrId(), 256);
                }
            }
            assertThat(System.nanoTime()).as("the member hears the publisher once it runs again").isLessThan(deadline);
        }
        assertThat(first).isPositive();
        pub.command("PUBLISH " + CHUNK);
        long next = first + 1;
        WorkCompletion wc;
        long end = System.nanoTime() + 30_000_000_000L;
        while (next < published + CHUNK) { // every datagram after the first it heard, whole and in order
            wc = here.poll();
            if (wc == null) {
                assertThat(System.nanoTime()).isLessThan(end);
                continue;
            }
            if (wc.opcode() == Opcode.RECV) {
                assertThat(ShmGroupPeerMain.check(here, (int) wc.wrId(), wc.byteLen())).isEqualTo(next++);
                here.postRecv(qp, (int) wc.wrId(), 256);
            }
        }
        qp.detachMulticast(group);
    }

    private static Map<String, Long> fields(String line) {
        Map<String, Long> m = new HashMap<>();
        for (String f : line.substring(4).split(" ")) {
            m.put(f.substring(0, f.indexOf('=')), Long.parseLong(f.substring(f.indexOf('=') + 1)));
        }
        return m;
    }

    @Test
    void aDeviceWithoutTheSecretNeitherHearsTheGroupNorIsHeard() throws Exception {
        ChildJvm outsider = child("member", "a-secret-of-its-own-for-the-outsider-012345", "");
        ChildJvm forger = child("publisher", "a-secret-of-its-own-for-the-forger-0123456", "");
        outsider.expect("JOINED");
        forger.expect("READY");
        UdNode here = node(Map.of());
        QueuePair qp = member(here);
        forger.command("PUBLISH " + CHUNK);
        forger.expect("PUBLISHED " + CHUNK);
        UdNode pub = node(Map.of());
        QueuePair pq = pub.qp();
        publish(pub, pq, pub.ah(AhAttributes.of(group)), 0, CHUNK);
        receive(here, qp, 0, CHUNK); // a device's with the secret, and nothing of the forger's
        long until = System.nanoTime() + 300_000_000L;
        while (System.nanoTime() < until) {
            WorkCompletion wc = here.poll();
            assertThat(wc == null || wc.opcode() != Opcode.RECV).as("nothing from a device without the secret").isTrue();
        }
        outsider.command("REPORT");
        assertThat(outsider.find("GOT ")).startsWith("GOT received=0 ");
        assertThat(mappings()).as("only the ring of the device with the secret").isEqualTo(2); // (its writer's mapping, and here's)
        outsider.finish();
        forger.finish();
        qp.detachMulticast(group);
    }
}
