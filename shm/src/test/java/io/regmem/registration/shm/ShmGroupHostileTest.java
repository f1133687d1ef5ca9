package io.regmem.registration.shm;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.AhAttributes;
import io.regmem.registration.Opcode;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.UdNode;
import io.regmem.registration.udp.UdpCarrier;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * What a group's directory does with listeners and offers that break its rules: a listener under a
 * group listener's name that never answers, or answers garbage, costs a joining device at most the
 * reply deadline and a publisher nothing it needs; an offer (even one tagged with the key) of a memfd
 * that is not sealed against writers, of the wrong size, or whose header is not a ring's is refused;
 * and nothing of any of it stays open.
 */
@ExtendWith(NoLeaks.class)
class ShmGroupHostileTest {
    private static final String SECRET = "shm-group-hostile-test-secret-0123456789";
    private static final String GROUP = "239.77.10.1";

    private static long fds() throws IOException {
        try (Stream<Path> s = Files.list(Path.of("/proc/self/fd"))) {
            return s.count();
        }
    }

    @Test
    void listenersThatNeverAnswerOrAnswerGarbageCostAJoinNoMoreThanTheDeadline() throws Exception {
        joinAmongHostileListeners(); // (the first round opens what the JDK keeps open: /dev/urandom, say)
        long before = fds();
        joinAmongHostileListeners();
        assertThat(fds()).as("descriptors open after the devices closed").isLessThanOrEqualTo(before);
    }

    private void joinAmongHostileListeners() throws Exception {
        String prefix = "regmem-groups-" + UdpCarrier.DEFAULT_MULTICAST_PORT + "-" + ProcessHandle.current().pid() + "-";
        int silent = UnixSocket.listen(prefix + "silent", 1);
        int garbage = UnixSocket.listen(prefix + "garbage", 16);
        AtomicBoolean stop = new AtomicBoolean();
        Thread liar = Thread.ofPlatform().start(() -> { // answers every connection with 64 random bytes, and a descriptor
            Random random = new Random(3);
            while (!stop.get()) {
                try {
                    if (!UnixSocket.awaitReadable(garbage, System.nanoTime() + 20_000_000L)) {
                        continue;
                    }
                    int c = UnixSocket.accept(garbage, System.nanoTime() + 20_000_000L, () -> false);
                    byte[] b = new byte[64];
                    random.nextBytes(b);
                    UnixSocket.send(c, b, garbage);
                    SharedFile.close(c);
                } catch (IOException e) {
                    // the next one
                }
            }
        });
        InetAddress group = InetAddress.getByName(GROUP);
        try (UdNode pub = new UdNode(RdmaDevice.open("shm", Map.of("secret", SECRET)), 8);
             UdNode member = new UdNode(RdmaDevice.open("shm", Map.of("secret", SECRET)), 8)) {
            QueuePair mq = member.qp();
            for (int i = 0; i < 3; i++) { // (a join, a leave: each join asks every listener again)
                mq.attachMulticast(group);
                mq.detachMulticast(group);
            }
            mq.attachMulticast(group);
            for (int i = 0; i < 8; i++) {
                member.postRecv(mq, i, 256);
            }
            QueuePair pq = pub.qp();
            WorkRequest wr = new WorkRequest(1);
            for (int i = 0; i < 8; i++) {
                pq.postSend(pub.send(wr, 0, 8).ud(pub.ah(AhAttributes.of(group)), AhAttributes.MULTICAST_QPN,
                        QpInitAttributes.RDMA_UDP_QKEY));
            }
            int got = 0;
            while (got < 8) {
                WorkCompletion wc = member.await(pub);
                got += wc.opcode() == Opcode.RECV ? 1 : 0;
            }
            mq.detachMulticast(group);
        } finally {
            stop.set(true);
            liar.join(5_000);
            SharedFile.close(silent);
            SharedFile.close(garbage);
        }
    }

    private static long groupMappings() throws IOException {
        try (Stream<String> maps = Files.lines(Path.of("/proc/self/maps"))) {
            return maps.filter(l -> l.contains("memfd:regmem-group-")).count();
        }
    }

    @Test
    void aSenderToManyGroupsKeepsAtMostItsBudgetOfPublications() throws Exception {
        long before = fds();
        try (UdNode pub = new UdNode(RdmaDevice.open("shm", Map.of("secret", SECRET, "groupRingBytes", "65536")), 8)) {
            QueuePair pq = pub.qp();
            WorkRequest wr = new WorkRequest(1);
            WorkCompletion[] wc = {new WorkCompletion()};
            for (int g = 0; g < ShmGroups.MAX_PUBLICATIONS + 44; g++) {
                InetAddress group = InetAddress.getByName("239.78." + (g >> 8) + "." + (g & 255));
                pq.postSend(pub.send(wr, 0, 8).ud(pub.ah(AhAttributes.of(group)), AhAttributes.MULTICAST_QPN,
                        QpInitAttributes.RDMA_UDP_QKEY));
                assertThat(pub.cq.poll(wc)).isOne();
                assertThat(groupMappings()).as("mappings of publications").isLessThanOrEqualTo(ShmGroups.MAX_PUBLICATIONS);
            }
            assertThat(groupMappings()).isEqualTo(ShmGroups.MAX_PUBLICATIONS);
        }
        assertThat(groupMappings()).as("after the device closed").isZero();
        assertThat(fds()).as("descriptors after the device closed").isLessThanOrEqualTo(before + 2); // (the JDK's own)
    }

    @Test
    void offersThatAreNotSealedSizedAndFormattedAsARingAreRefusedAndClosed() throws Exception {
        InetAddress group = InetAddress.getByName(GROUP);
        ShmGroups groups = new ShmGroups("test", new InetSocketAddress("127.0.0.1", 9), 1, 2, 24999, 1 << 16, false);
        try {
            groups.join(group);
            long before = fds();
            long size = GroupRing.bytes(1 << 16);
            GroupMessage offer = new GroupMessage(GroupMessage.OFFER, GroupMessage.ipv4(group), 5, 1234, 1, 1 << 16,
                    0x7F000001, 4000, 0);
            int unsealed = SharedFile.createPublication("regmem-group-hostile", size);
            groups.offered(offer, unsealed, -1, true);
            int small = SharedFile.createPublication("regmem-group-hostile", size - 4096);
            SharedFile.sealPublication(small);
            groups.offered(offer, small, -1, true);
            int blank = SharedFile.createPublication("regmem-group-hostile", size); // sealed, sized, but no ring in it
            SharedFile.sealPublication(blank);
            groups.offered(offer, blank, -1, true);
            assertThat(groups.toString()).endsWith("0 read");
            assertThat(fds()).as("every offered descriptor closed").isEqualTo(before);
            int good = SharedFile.createPublication("regmem-group-hostile", size);
            try (Arena a = Arena.ofShared()) {
                MemorySegment ring = SharedFile.map(good, size, a);
                GroupRing.Writer w = new GroupRing.Writer(ring, 1 << 16);
                SharedFile.sealPublication(good);
                groups.offered(offer, ShmGroups.dup(good), -1, true);
                groups.offered(offer, ShmGroups.dup(good), -1, true); // the same publication again: kept once
                assertThat(groups.toString()).endsWith("1 read");
                w.close();
            } finally {
                SharedFile.close(good);
            }
        } finally {
            groups.close();
        }
    }
}
