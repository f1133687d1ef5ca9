package io.regmem.registration.ucx;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.CmEvent;
import io.regmem.registration.CmId;
import io.regmem.registration.JoinFlag;
import io.regmem.registration.PortSpace;
import io.regmem.core.Errno;
import io.regmem.registration.testkit.NamespacedPair;
import io.regmem.registration.AddressHandle;
import io.regmem.registration.AhAttributes;
import io.regmem.registration.DatagramDrop;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.Providers;
import io.regmem.registration.testkit.Refused;
import io.regmem.registration.testkit.UdNode;
import io.regmem.registration.udp.SipHash;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;
import java.net.StandardProtocolFamily;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.DatagramChannel;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * What a UCX device does with datagrams from the network that regmem did not send: garbage, every
 * length up to UDP's largest, forged tags, tags under another secret, and correctly tagged datagrams
 * that break the format (each field out of range), to the unicast socket and to a group. Each is
 * dropped and counted ({@code MALFORMED}, {@code UNAUTHENTICATED}, or the QP's own reason), nothing of
 * it reaches a receive, the QPs stay ready, and a well-formed datagram from the same socket is then
 * taken as any peer's: the wire format is the one docs/providers.md describes. And datagrams the
 * kernel drops while nobody reads the socket are counted as {@code LOST} when the next one arrives, per
 * sender QP, however the senders interleave.
 * And a group joined on an interface that goes down is lost: {@code MULTICAST_ERROR}, the QP detached.
 */
@ExtendWith(NoLeaks.class)
class UcxDatagramHostileTest {
    private static final String SECRET = "ucx-datagram-hostile-test-secret-0123456789";
    private static final int HEADER = 40;
    private final List<UdNode> nodes = new ArrayList<>();
    private final List<DatagramChannel> channels = new ArrayList<>();

    @AfterEach
    void tearDown() throws Exception {
        for (DatagramChannel c : channels) {
            c.close();
        }
        for (UdNode n : nodes) {
            n.close();
        }
    }

    private UdNode node(Map<String, String> options) {
        Map<String, String> all = new java.util.HashMap<>(options);
        all.put("secret", SECRET);
        UdNode n = new UdNode(Providers.open("ucx", all), 64);
        nodes.add(n);
        return n;
    }

    private DatagramChannel raw() throws Exception {
        DatagramChannel c = DatagramChannel.open(StandardProtocolFamily.INET);
        channels.add(c);
        c.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
        c.setOption(StandardSocketOptions.IP_MULTICAST_IF, NetworkInterface.getByInetAddress(InetAddress.getLoopbackAddress()));
        return c;
    }

    /** The datagram key of a secret, as the wire format defines it. */
    static byte[] key(String secret) throws Exception {
        Mac mac = Mac.getInstance("HmacSHA256");
        mac.init(new SecretKeySpec(secret.getBytes(StandardCharsets.UTF_8), "HmacSHA256"));
        byte[] d = mac.doFinal("regmem udp datagram key 1".getBytes(StandardCharsets.US_ASCII));
        return java.util.Arrays.copyOf(d, 16);
    }

    /** A datagram as the wire format lays it out, each field given; tagged under {@code key}. */
    static final class Forged {
        int version = 1;
        int flags;
        int trafficClass;
        int reserved;
        int srcQpn = 0x123456;
        int dstQpn;
        int qkey = QpInitAttributes.RDMA_UDP_QKEY;
        int imm;
        int seq = 1;
        int word28;
        long group;
        byte[] payload = new byte[16];

        ByteBuffer build(byte[] key) {
            ByteBuffer b = ByteBuffer.allocate(HEADER + payload.length + 8).order(ByteOrder.LITTLE_ENDIAN);
            b.putInt(0x47444752).put((byte) version).put((byte) flags).put((byte) trafficClass).put((byte) reserved)
                    .putInt(srcQpn).putInt(dstQpn).putInt(qkey).putInt(imm).putInt(seq).putInt(word28).putLong(group)
                    .put(payload);
            MemorySegment m = MemorySegment.ofArray(b.array());
            b.putLong(SipHash.hash(SipHash.k0(key), SipHash.k1(key), m, 0, HEADER + payload.length));
            return b.flip();
        }
    }

    private static long groupLo(InetAddress group) {
        byte[] a = group.getAddress();
        byte[] lo = {0, 0, (byte) 0xFF, (byte) 0xFF, a[0], a[1], a[2], a[3]};
        return ByteBuffer.wrap(lo).order(ByteOrder.LITTLE_ENDIAN).getLong();
    }

    private static InetSocketAddress to(UdNode n) {
        AhAttributes a = n.device.datagramAddress();
        return new InetSocketAddress(a.dgid(), a.port());
    }

    @Test
    void whatRegmemDidNotSendIsDroppedAndCountedAndTheQpsStayReady() throws Exception {
        UdNode b = node(Map.of());
        QueuePair q = b.qp();
        for (int i = 0; i < 8; i++) {
            b.postRecv(q, i, 4096);
        }
        DatagramChannel raw = raw();
        InetSocketAddress target = to(b);
        byte[] key = key(SECRET);
        SplittableRandom rnd = new SplittableRandom(7);
        long malformed = 0;
        // garbage of every kind of length: empty, shorter than a header, random, UDP's largest
        for (int length : new int[] {0, 1, 47, 48, 100, 4144, 65_507}) {
            byte[] junk = new byte[length];
            rnd.nextBytes(junk);
            raw.send(ByteBuffer.wrap(junk), target);
            malformed++;
        }
        b.awaitDropped(DatagramDrop.MALFORMED, malformed);
        // forged tags: random, and a correct one under another secret
        Forged f = new Forged();
        f.dstQpn = q.qpNum();
        ByteBuffer forged = f.build(key);
        forged.putLong(forged.limit() - 8, rnd.nextLong());
        raw.send(forged, target);
        raw.send(f.build(key("another secret, another key, 0123456789")), target);
        b.awaitDropped(DatagramDrop.UNAUTHENTICATED, 2);
        // correctly tagged, but each breaking one rule of the format
        List<Forged> broken = new ArrayList<>();
        for (int rule = 0; rule < 9; rule++) {
            Forged x = new Forged();
            x.dstQpn = q.qpNum();
            switch (rule) {
                case 0 -> x.version = 2;
                case 1 -> x.flags = 0x80;
                case 2 -> x.reserved = 1;
                case 3 -> x.srcQpn = 0x0100_0000;
                case 4 -> x.dstQpn = AhAttributes.MULTICAST_QPN; // a group's QPN, to the unicast socket
                case 5 -> x.flags = 4; // a multicast datagram, to the unicast socket
                case 6 -> x.word28 = 1;
                case 7 -> x.group = groupLo(InetAddress.getByName("239.1.1.1")); // a group, on a unicast datagram
                default -> x.payload = new byte[4097]; // longer than any path MTU
            }
            broken.add(x);
            raw.send(x.build(key), target);
            malformed++;
        }
        b.awaitDropped(DatagramDrop.MALFORMED, malformed);
        // well-formed, to a QP number nobody has, and with another Q_Key
        Forged nobody = new Forged();
        nobody.dstQpn = 0x0ABCDE;
        raw.send(nobody.build(key), target);
        b.awaitDropped(DatagramDrop.NO_QP, 1);
        Forged otherKey = new Forged();
        otherKey.dstQpn = q.qpNum();
        otherKey.qkey = 0x42;
        otherKey.seq = 2;
        raw.send(otherKey.build(key), target);
        b.awaitDropped(DatagramDrop.QKEY, 1);
        // a thousand single-byte corruptions of a good datagram: each fails the tag or the format
        Forged good = new Forged();
        good.dstQpn = q.qpNum();
        for (int i = 0; i < 1000; i++) {
            ByteBuffer d = good.build(key);
            int at = rnd.nextInt(d.limit());
            d.put(at, (byte) (d.get(at) ^ (1 + rnd.nextInt(255))));
            raw.send(d, target);
        }
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (b.device.counters().datagramsDropped(DatagramDrop.MALFORMED)
                + b.device.counters().datagramsDropped(DatagramDrop.UNAUTHENTICATED) < malformed + 2 + 1000) {
            assertThat(b.poll()).as("no corrupted datagram is delivered").isNull();
            assertThat(System.nanoTime()).isLessThan(deadline);
        }
        assertThat(b.device.counters().datagramsDropped(DatagramDrop.MALFORMED)
                + b.device.counters().datagramsDropped(DatagramDrop.UNAUTHENTICATED)).isEqualTo(malformed + 2 + 1000);
        assertThat(b.poll()).as("nothing of it reached a receive").isNull();
        assertThat(q.outstandingRecvs()).isEqualTo(8);
        assertThat(q.state()).isEqualTo(QueuePair.State.RTS);
        // a well-formed datagram from the same socket is any peer's: it lands, naming its sender
        good.imm = 77;
        good.flags = 1;
        good.seq = 3;
        good.payload = "a peer that holds the secret".getBytes(StandardCharsets.US_ASCII);
        raw.send(good.build(key), target);
        WorkCompletion wc = b.await();
        assertThat(wc.status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(wc.withImm()).isTrue();
        assertThat(wc.immData()).isEqualTo(77);
        assertThat(wc.srcQp()).isEqualTo(0x123456);
        assertThat(wc.byteLen()).isEqualTo(40 + good.payload.length);
        assertThat(wc.source()).isEqualTo(AhAttributes.of((InetSocketAddress) raw.getLocalAddress()));
        byte[] got = new byte[good.payload.length];
        MemorySegment.copy(b.slot((int) wc.wrId()), ValueLayout.JAVA_BYTE, 40, got, 0, got.length);
        assertThat(new String(got, StandardCharsets.US_ASCII)).isEqualTo("a peer that holds the secret");
        assertThat(b.device.counters().datagramsDropped(DatagramDrop.LOST)).as("sequences 1, 2, 3: none missing").isZero();
    }

    @Test
    void gapsAreCountedPerSenderQpWhileSendersInterleave() throws Exception {
        UdNode b = node(Map.of());
        QueuePair q = b.qp();
        for (int i = 0; i < 16; i++) {
            b.postRecv(q, i, 4096);
        }
        DatagramChannel one = raw();
        DatagramChannel two = raw();
        InetSocketAddress target = to(b);
        byte[] key = key(SECRET);
        // (socket, source QP, sequence), each taken before the next is sent; the gaps: one's QP 0x10 from 2 to 5 (2
        // missing), one's QP 0x11 from 2 to 10 (7), two's QP 0x10 from 1 to 4 (2): 11 lost, whatever came in between.
        // A sequence of 0, which no sender sends (a peer's forgery), is taken and starts that sender afresh: one's QP
        // 0x10 then jumps from 0 to 9 and counts nothing
        Object[][] sends = {{one, 0x10, 1}, {one, 0x10, 2}, {one, 0x11, 1}, {one, 0x10, 5}, {two, 0x10, 1}, {one, 0x11, 2},
            {one, 0x10, 6}, {one, 0x11, 10}, {two, 0x10, 4}, {one, 0x10, 7}, {one, 0x10, 0}, {two, 0x10, 5}, {one, 0x10, 9}};
        for (Object[] s : sends) {
            Forged f = new Forged();
            f.dstQpn = q.qpNum();
            f.srcQpn = (int) s[1];
            f.seq = (int) s[2];
            ((DatagramChannel) s[0]).send(f.build(key), target);
            WorkCompletion wc = b.await();
            assertThat(wc.status()).isEqualTo(WcStatus.SUCCESS);
            assertThat(wc.srcQp()).isEqualTo(f.srcQpn);
            assertThat(wc.source()).isEqualTo(AhAttributes.of((InetSocketAddress) ((DatagramChannel) s[0]).getLocalAddress()));
        }
        assertThat(b.device.counters().datagramsDropped(DatagramDrop.LOST)).isEqualTo(11);
        assertThat(b.device.counters().datagramsDropped()).as("nothing else dropped").isEqualTo(11);
    }

    @Test
    void garbageSentToAGroupIsDroppedAndCountedByEveryMemberDevice() throws Exception {
        InetAddress group = InetAddress.getByName("239.77.9.1");
        UdNode m1 = node(Map.of());
        UdNode m2 = node(Map.of());
        QueuePair q1 = m1.qp();
        QueuePair q2 = m2.qp();
        q1.attachMulticast(group);
        q2.attachMulticast(group);
        m1.postRecv(q1, 0, 4096);
        m2.postRecv(q2, 0, 4096);
        DatagramChannel raw = raw();
        InetSocketAddress target = new InetSocketAddress(group, 24791);
        byte[] junk = new byte[200];
        new SplittableRandom(3).nextBytes(junk);
        raw.send(ByteBuffer.wrap(junk), target);
        Forged forged = new Forged();
        forged.flags = 4;
        forged.dstQpn = AhAttributes.MULTICAST_QPN;
        forged.group = groupLo(group);
        raw.send(forged.build(key("not the secret of these devices 0123456789")), target);
        m1.awaitDropped(DatagramDrop.MALFORMED, 1);
        m2.awaitDropped(DatagramDrop.MALFORMED, 1);
        m1.awaitDropped(DatagramDrop.UNAUTHENTICATED, 1);
        m2.awaitDropped(DatagramDrop.UNAUTHENTICATED, 1);
        raw.send(forged.build(key(SECRET)), target); // the secret's: a member's datagram like any other
        assertThat(m1.await().byteLen()).isEqualTo(40 + 16);
        assertThat(m2.await().byteLen()).isEqualTo(40 + 16);
        q1.detachMulticast(group);
        q2.detachMulticast(group);
    }

    @Test
    void datagramsTheKernelDroppedAreCountedAsLostWhenTheNextOneArrives() throws Exception {
        UdNode a = node(Map.of());
        UdNode b = node(Map.of());
        QueuePair sender = a.qp(new QpInitAttributes().maxSendWr(64));
        QueuePair receiver = b.qp();
        for (int i = 0; i < 8; i++) {
            b.postRecv(receiver, i, 4096);
        }
        AddressHandle ah = a.ah(b.device.datagramAddress());
        WorkRequest wr = new WorkRequest(1);
        WorkCompletion[] wcs = {new WorkCompletion()};
        int count = 20_000; // 1 KiB each, nobody reading b's socket: far more than its buffer holds
        for (int s = 0; s < count; s++) {
            sender.postSend(a.send(wr, 40, 1024).ud(ah, receiver.qpNum(), QpInitAttributes.RDMA_UDP_QKEY));
            while (a.cq.poll(wcs) > 0) {
                assertThat(wcs[0].status()).isEqualTo(WcStatus.SUCCESS);
            }
        }
        // b takes what its socket kept: 8 land, the rest find no receive
        long received = 0;
        long before = -1;
        long quietSince = System.nanoTime();
        while (System.nanoTime() - quietSince < 200_000_000L) {
            WorkCompletion wc = b.take();
            if (wc != null) {
                received++;
            }
            long now = received + b.device.counters().datagramsDropped(DatagramDrop.NO_RECEIVE);
            if (now != before) {
                before = now;
                quietSince = System.nanoTime();
            }
        }
        assertThat(received).isEqualTo(8);
        assertThat(b.device.counters().datagramsDropped(DatagramDrop.NO_RECEIVE)).as("the socket kept some")
                .isPositive().isLessThan(count - 8);
        // the next datagram shows the gap: every one sent is accounted for
        b.postRecv(receiver, 9, 4096);
        sender.postSend(a.send(wr, 40, 1024).ud(ah, receiver.qpNum(), QpInitAttributes.RDMA_UDP_QKEY));
        assertThat(b.await().status()).isEqualTo(WcStatus.SUCCESS);
        received++;
        assertThat(received + b.device.counters().datagramsDropped(DatagramDrop.NO_RECEIVE)
                + b.device.counters().datagramsDropped(DatagramDrop.LOST)).isEqualTo(count + 1);
        assertThat(b.device.counters().datagramsDropped(DatagramDrop.LOST)).isPositive();
        a.drain();
    }

    @Test
    void aGroupOnAnInterfaceThatGoesDownIsAMulticastErrorAndItsQpIsDetached() throws Exception {
        NamespacedPair.assume("a veth pair", "ip", "netns", "list");
        long n = ProcessHandle.current().pid() % 100000;
        String ns = "rmdg" + n;
        String here = "rmdga" + n;
        String there = "rmdgb" + n;
        String[][] up = {
            {"ip", "netns", "add", ns}, {"ip", "link", "add", here, "type", "veth", "peer", "name", there},
            {"ip", "link", "set", there, "netns", ns}, {"ip", "addr", "add", "10.213.9.1/30", "dev", here},
            {"ip", "link", "set", here, "up"}, {"ip", "-n", ns, "link", "set", there, "up"}};
        try {
            for (String[] c : up) {
                assertThat(NamespacedPair.run(c)).as(String.join(" ", c)).isZero();
            }
            UdNode node = node(Map.of("datagramBind", "10.213.9.1:0"));
            List<CmEvent> events = new java.util.concurrent.CopyOnWriteArrayList<>();
            CmId id = node.device.createCmId(PortSpace.UDP);
            id.onEvent(e -> {
                events.add(e);
                return false;
            });
            id.bindAddr("127.0.0.1:0");
            QueuePair qp = id.createQp(node.pd, QpInitAttributes.of(node.cq));
            InetAddress group = InetAddress.getByName("239.77.9.9");
            id.joinMulticast(group, JoinFlag.FULLMEMBER);
            assertThat(events).extracting(CmEvent::type).containsExactly(CmEvent.Type.MULTICAST_JOIN);
            assertThat(NamespacedPair.run("ip", "link", "set", here, "down")).isZero();
            long deadline = System.nanoTime() + 20_000_000_000L;
            while (events.size() < 2) { // a poll progresses the device, which looks at its interface
                node.poll();
                assertThat(System.nanoTime()).as("MULTICAST_ERROR within 20 s (events %s)", events).isLessThan(deadline);
                Thread.sleep(1);
            }
            CmEvent lost = events.get(1);
            assertThat(lost.type()).isEqualTo(CmEvent.Type.MULTICAST_ERROR);
            assertThat(lost.status()).isEqualTo(-Errno.ENETDOWN.value());
            assertThat(lost.group()).isEqualTo(group);
            Refused.assertRdma(() -> id.leaveMulticast(group), Errno.EADDRNOTAVAIL);
            Refused.assertRdma(() -> qp.detachMulticast(group), Errno.EINVAL);
            // the interface back up: the group is joined again as any group is
            assertThat(NamespacedPair.run("ip", "link", "set", here, "up")).isZero();
            id.joinMulticast(group, JoinFlag.FULLMEMBER);
            assertThat(events.get(2).type()).isEqualTo(CmEvent.Type.MULTICAST_JOIN);
            id.leaveMulticast(group);
            id.destroyQp();
            id.close();
        } finally {
            NamespacedPair.run("ip", "link", "del", here);
            NamespacedPair.run("ip", "netns", "del", ns);
        }
    }

    /** Lines of a /proc/net table that name a local UDP port (hex, as the kernel prints it). */
    private static long socketsOnPort(int port) throws Exception {
        String hex = String.format(":%04X ", port);
        try (java.util.stream.Stream<String> lines = java.nio.file.Files.lines(java.nio.file.Path.of("/proc/net/udp"))) {
            return lines.filter(l -> l.trim().split("\\s+")[1].endsWith(hex.trim())).count();
        }
    }

    private static long openDescriptors() throws Exception {
        try (java.util.stream.Stream<java.nio.file.Path> fds = java.nio.file.Files.list(java.nio.file.Path.of("/proc/self/fd"))) {
            return fds.count();
        }
    }

    @Test
    void aDevicesSocketsAndMembershipsGoWithItsGroupsAndWithTheDevice() throws Exception {
        InetAddress g1 = InetAddress.getByName("239.77.9.21");
        InetAddress g2 = InetAddress.getByName("239.77.9.22");
        for (int warm = 0; warm < 2; warm++) { // (the first round loads classes and opens what the JDK keeps)
            UdNode n = new UdNode(Providers.open("ucx", Map.of("secret", SECRET)), 4);
            n.qp().attachMulticast(g1);
            n.close();
        }
        long fds = openDescriptors();
        long multicastSockets = socketsOnPort(24791);
        for (int round = 0; round < 20; round++) {
            UdNode n = new UdNode(Providers.open("ucx", Map.of("secret", SECRET)), 4);
            QueuePair q = n.qp();
            n.device.datagramAddress();
            q.attachMulticast(g1);
            q.attachMulticast(g2);
            assertThat(socketsOnPort(24791)).as("one multicast socket for the device's groups").isEqualTo(multicastSockets + 1);
            q.detachMulticast(g1);
            q.detachMulticast(g2);
            assertThat(socketsOnPort(24791)).as("the multicast socket goes with the last group").isEqualTo(multicastSockets);
            q.attachMulticast(g1); // destroying the QP detaches it; closing the device closes the rest
            n.close();
        }
        assertThat(socketsOnPort(24791)).isEqualTo(multicastSockets);
        assertThat(openDescriptors()).as("descriptors after 20 devices with datagram sockets and groups").isEqualTo(fds);
    }
}
