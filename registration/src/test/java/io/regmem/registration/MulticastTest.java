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
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Multicast on the provider under test ({@code ibv_attach_mcast(3)}, {@code ibv_detach_mcast}): a
 * datagram sent to a group (remote QPN {@code 0xFFFFFF}, as rdma-core's tests send) reaches every
 * attached QP of every device once (a double attach still one copy; the sender's own QP too unless
 * it blocks its loopback); the rules and the device's limits; a member that stops receiving loses
 * what it has no receive for and costs the others and the sender nothing; threads posting to a group
 * on one QP at once each keep their order. rdma-core's
 * {@code tests/utils.py} skips multicast where {@code max_mcast_grp} is 0: so does this.
 */
@ExtendWith(NoLeaks.class)
class MulticastTest {
    private final List<UdNode> nodes = new ArrayList<>();
    private final WorkRequest wr = new WorkRequest(1);
    private InetAddress group;

    @BeforeEach
    void setUp() throws Exception {
        try (RdmaDevice probe = Providers.open()) {
            Assumptions.assumeTrue(probe.supportsDatagrams() && probe.attributes().maxMcastGroups() > 0,
                    Providers.NAME + " has no multicast (max_mcast_grp 0)");
        }
        group = InetAddress.getByName("239.77.0." + (1 + (int) (System.nanoTime() & 127)));
    }

    @AfterEach
    void tearDown() {
        for (UdNode n : nodes) {
            n.close();
        }
    }

    private UdNode node(Map<String, String> options) {
        UdNode n = new UdNode(options, 64);
        nodes.add(n);
        return n;
    }

    private UdNode node() {
        return node(Map.of());
    }

    private void sendToGroup(UdNode from, QueuePair qp, int slot, long seq) {
        from.slot(slot).set(ValueLayout.JAVA_LONG_UNALIGNED, 0, seq);
        AddressHandle ah = from.ah(AhAttributes.of(group));
        qp.postSend(from.send(wr, slot, 8).ud(ah, AhAttributes.MULTICAST_QPN, QpInitAttributes.RDMA_UDP_QKEY));
    }

    @Test
    void aGroupDatagramReachesEveryAttachedQpOnceTheSendersOwnToo() {
        UdNode a = node();
        UdNode b = node();
        UdNode c = node();
        QueuePair sender = a.qp();
        QueuePair deaf = a.qp(new QpInitAttributes().blockSelfMulticastLoopback(true));
        QueuePair b1 = b.qp();
        QueuePair b2 = b.qp();
        QueuePair twice = c.qp();
        QueuePair outside = c.qp();
        for (QueuePair q : List.of(sender, deaf, b1, b2, twice)) {
            q.attachMulticast(group);
        }
        twice.attachMulticast(group); // a double attach: still one copy
        assertThat(deaf.blocksSelfMulticastLoopback()).isTrue();
        for (QueuePair q : List.of(sender, deaf, b1, b2, twice, outside)) {
            UdNode n = q.device() == a.device ? a : q.device() == b.device ? b : c;
            for (int k = 0; k < 4; k++) {
                n.postRecv(q, (q == b2 || q == outside ? 1 : 0) + 2 * k, 4096);
            }
        }
        sendToGroup(a, sender, 10, 42);
        int[] got = new int[6];
        List<QueuePair> qps = List.of(sender, deaf, b1, b2, twice, outside);
        int sends = 0;
        for (WorkCompletion wc : UdNode.collect(6, a, b, c)) {
            UdNode n = UdNode.of(wc, a, b, c);
            assertThat(wc.status()).isEqualTo(WcStatus.SUCCESS);
            if (wc.opcode() == Opcode.SEND) {
                sends++;
                continue;
            }
            assertThat(wc.srcQp()).isEqualTo(sender.qpNum());
            assertThat(wc.byteLen()).isEqualTo(48);
            assertThat(n.slot((int) wc.wrId()).get(ValueLayout.JAVA_LONG_UNALIGNED, 40)).isEqualTo(42L);
            got[qps.indexOf(wc.qp())]++;
        }
        assertThat(sends).isEqualTo(1);
        assertThat(got).as("sender, deaf, b1, b2, twice, outside").containsExactly(1, 1, 1, 1, 1, 0);
        // a QP that blocks its loopback gets none of its own datagrams; the others get them
        sendToGroup(a, deaf, 13, 45);
        java.util.Arrays.fill(got, 0);
        for (WorkCompletion wc : UdNode.collect(5, a, b, c)) {
            if (wc.opcode() != Opcode.SEND) {
                assertThat(wc.srcQp()).isEqualTo(deaf.qpNum());
                got[qps.indexOf(wc.qp())]++;
            }
        }
        assertThat(got).as("sender, deaf (blocks its loopback), b1, b2, twice, outside").containsExactly(1, 0, 1, 1, 1, 0);
        // a group datagram is sent from a QP that need not be attached
        twice.detachMulticast(group);
        assertRdma(() -> twice.detachMulticast(group), Errno.EINVAL, "not attached");
        sendToGroup(c, outside, 11, 43);
        int copies = 0;
        for (WorkCompletion wc : UdNode.collect(5, c, a, b)) {
            if (wc.opcode() == Opcode.SEND) {
                assertThat(wc.qp()).isSameAs(outside);
                continue;
            }
            assertThat(wc.qp()).isNotSameAs(twice).isNotSameAs(outside);
            copies++;
        }
        assertThat(copies).as("sender, deaf, b1, b2").isEqualTo(4);
        // destroying a member detaches it; the group goes on for the rest
        b1.cmId().destroyQp();
        sendToGroup(a, sender, 12, 44);
        java.util.Arrays.fill(got, 0);
        for (WorkCompletion wc : UdNode.collect(4, a, b, c)) {
            if (wc.opcode() != Opcode.SEND) {
                got[qps.indexOf(wc.qp())]++;
            }
        }
        assertThat(got).as("sender, deaf, b1 (destroyed), b2, twice (detached), outside").containsExactly(1, 1, 0, 1, 0, 0);
        for (UdNode n : List.of(a, b, c)) {
            assertThat(n.device.counters().datagramsDropped()).isZero();
        }
        for (QueuePair q : List.of(sender, deaf, b2)) {
            assertThat(q.state()).isEqualTo(QueuePair.State.RTS);
        }
    }

    @Test
    void attachRules() throws Exception {
        UdNode a = node();
        QueuePair ud = a.qp();
        CmId rc = a.device.createCmId();
        QueuePair rcQp = rc.createQp(a.pd, QpInitAttributes.of(a.cq));
        try {
            assertRdma(() -> rcQp.attachMulticast(group), Errno.EINVAL, "RC QP");
            assertRdma(() -> ud.attachMulticast(InetAddress.getByName("10.1.2.3")), Errno.EINVAL, "not a multicast address");
            assertRdma(() -> ud.attachMulticast(null), Errno.EINVAL);
            assertRdma(() -> ud.detachMulticast(group), Errno.EINVAL, "not attached");
            if (Providers.datagramsCrossANetwork()) { // over UDP/IPv4: an IPv6 group is refused, said
                assertRdma(() -> ud.attachMulticast(InetAddress.getByName("ff0e::1:2")), Errno.EOPNOTSUPP, "IPv4");
            } else {
                ud.attachMulticast(InetAddress.getByName("ff0e::1:2"));
                ud.detachMulticast(InetAddress.getByName("ff0e::1:2"));
            }
        } finally {
            rc.destroyQp();
            rc.close();
        }
        UdNode none = node(Map.of("maxMcastGroups", "0", "maxMcastQpAttach", "0"));
        QueuePair q = none.qp();
        assertRdma(() -> q.attachMulticast(group), Errno.EOPNOTSUPP, "no multicast");
    }

    @Test
    void theDevicesLimitsAreEnomemAndChangeNothing() throws Exception {
        UdNode a = node(Map.of("maxMcastGroups", "2", "maxMcastQpAttach", "1"));
        QueuePair q1 = a.qp();
        QueuePair q2 = a.qp();
        InetAddress g2 = InetAddress.getByName("239.77.1.2");
        InetAddress g3 = InetAddress.getByName("239.77.1.3");
        q1.attachMulticast(group);
        q1.attachMulticast(g2);
        assertRdma(() -> q1.attachMulticast(g3), Errno.ENOMEM, "maxMcastGroups 2");
        assertRdma(() -> q2.attachMulticast(group), Errno.ENOMEM, "maxMcastQpAttach 1");
        assertRdma(() -> q2.detachMulticast(group), Errno.EINVAL);
        q1.detachMulticast(g2);
        q2.attachMulticast(g3);
        // another device's QPs count against their own device only
        UdNode b = node(Map.of("maxMcastGroups", "2", "maxMcastQpAttach", "1"));
        b.qp().attachMulticast(group);
    }

    @Test
    void aStoppedMemberCostsTheOthersAndTheSenderNothing() throws Exception {
        int count = 3000;
        UdNode pub = node();
        UdNode live1 = node();
        UdNode live2 = node();
        UdNode stopped = node();
        QueuePair sender = pub.qp(new QpInitAttributes().maxSendWr(32)); // a payload slot is reused only once sent
        List<QueuePair> members = new ArrayList<>();
        for (UdNode n : List.of(live1, live2, stopped)) {
            QueuePair q = n.qp();
            q.attachMulticast(group);
            members.add(q);
        }
        for (int i = 0; i < 4; i++) {
            stopped.postRecv(members.get(2), i, 64);
        }
        AtomicBoolean done = new AtomicBoolean();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        long[] received = new long[2];
        List<Thread> threads = new ArrayList<>();
        for (int m = 0; m < 2; m++) {
            UdNode n = m == 0 ? live1 : live2;
            QueuePair q = members.get(m);
            int index = m;
            for (int i = 0; i < 32; i++) {
                n.postRecv(q, i, 64);
            }
            threads.add(Thread.ofPlatform().name("member-" + m).start(() -> {
                try {
                    long last = -1;
                    WorkRequest rwr = new WorkRequest(1);
                    WorkCompletion[] wcs = {new WorkCompletion()};
                    long deadline = System.nanoTime() + 60_000_000_000L;
                    for (;;) {
                        boolean finished = done.get(); // (read before the poll, which takes what the group holds for it)
                        if (n.cq.poll(wcs) == 0) {
                            if (finished) {
                                break;
                            }
                            if (System.nanoTime() > deadline) {
                                throw new AssertionError("member " + index + " ran past 60 s");
                            }
                            Thread.onSpinWait();
                            continue;
                        }
                        WorkCompletion wc = wcs[0];
                        assertThat(wc.status()).isEqualTo(WcStatus.SUCCESS);
                        int slot = (int) wc.wrId();
                        long seq = n.slot(slot).get(ValueLayout.JAVA_LONG_UNALIGNED, 40);
                        assertThat(seq).as("in order, each once").isGreaterThan(last);
                        last = seq;
                        received[index]++;
                        q.postRecv(rwr.reset().wrId(slot).addSge(n.slot(slot).address(), 64, n.mr.lkey()));
                    }
                } catch (Throwable t) {
                    failure.compareAndSet(null, t);
                }
            }));
        }
        AddressHandle ah = pub.ah(AhAttributes.of(group));
        WorkCompletion[] wcs = {new WorkCompletion()};
        long deadline = System.nanoTime() + 60_000_000_000L;
        int completed = 0;
        for (int s = 0; s < count; s++) {
            pub.slot(s & 63).set(ValueLayout.JAVA_LONG_UNALIGNED, 0, s);
            pub.send(wr, s & 63, 8).ud(ah, AhAttributes.MULTICAST_QPN, QpInitAttributes.RDMA_UDP_QKEY);
            while (sender.tryPostSend(wr) == QueuePair.BACK_PRESSURED) {
                completed += drainSends(pub, wcs);
                assertThat(System.nanoTime()).as("the sender is never held for long").isLessThan(deadline);
            }
            completed += drainSends(pub, wcs);
        }
        while (completed < count) {
            completed += drainSends(pub, wcs);
            assertThat(System.nanoTime()).isLessThan(deadline);
        }
        done.set(true);
        for (Thread t : threads) {
            t.join(70_000);
        }
        assertThat(failure.get()).isNull();
        for (int m = 0; m < 2; m++) {
            UdNode n = m == 0 ? live1 : live2;
            n.assertAccounted(received[m], count, "member " + m);
            assertThat(received[m]).as("member %d received", m).isPositive();
        }
        assertThat(stopped.drain()).isEqualTo(4);
        long stoppedDrops = stopped.droppedOrLost();
        if (Providers.datagramsCrossANetwork()) {
            assertThat(stoppedDrops).isLessThanOrEqualTo(count - 4);
        } else {
            assertThat(stoppedDrops).isEqualTo(count - 4);
        }
        assertThat(sender.state()).isEqualTo(QueuePair.State.RTS);
        for (QueuePair q : members) {
            assertThat(q.state()).isEqualTo(QueuePair.State.RTS);
        }
    }

    @Test
    void aProgressThreadExecutesDatagramsAsAPollDoes() {
        UdNode pub = node(Map.of("progressThread", "true"));
        UdNode m1 = node(Map.of("progressThread", "true"));
        UdNode m2 = node(Map.of("progressThread", "true"));
        QueuePair sender = pub.qp();
        QueuePair q1 = m1.qp();
        QueuePair q2 = m2.qp();
        q1.attachMulticast(group);
        q2.attachMulticast(group);
        for (int i = 0; i < 20; i++) {
            m1.postRecv(q1, i, 64);
            m2.postRecv(q2, i, 64);
        }
        AddressHandle ah = pub.ah(AhAttributes.of(group));
        for (int s = 0; s < 20; s++) {
            pub.slot(40 + s).set(ValueLayout.JAVA_LONG_UNALIGNED, 0, s);
            sender.postSend(pub.send(wr, 40 + s, 8).ud(ah, AhAttributes.MULTICAST_QPN, QpInitAttributes.RDMA_UDP_QKEY));
        }
        // nobody polls the publisher's CQ until every copy arrived: its device's thread sent them
        for (UdNode m : List.of(m1, m2)) {
            for (int s = 0; s < 20; s++) {
                WorkCompletion wc = m.await();
                assertThat(wc.status()).isEqualTo(WcStatus.SUCCESS);
                assertThat(m.slot((int) wc.wrId()).get(ValueLayout.JAVA_LONG_UNALIGNED, 40)).isEqualTo(s);
            }
        }
        for (int s = 0; s < 20; s++) {
            assertThat(pub.await().status()).isEqualTo(WcStatus.SUCCESS);
        }
    }

    private static int drainSends(UdNode pub, WorkCompletion[] wcs) {
        int n = 0;
        while (pub.cq.poll(wcs) > 0) {
            assertThat(wcs[0].status()).isEqualTo(WcStatus.SUCCESS);
            n++;
        }
        return n;
    }

    /**
     * Several threads posting datagrams on one UD QP at once, as verbs allows ({@code ibv_post_send}
     * is thread-safe): each thread's datagrams arrive in its own order, each once and whole (never
     * another thread's bytes, never a slot rewritten under a send), every post completes once and
     * successfully, and what did not arrive is counted. A third thread polls the sender's CQ, a fourth
     * the member's; the posters reuse a payload slot only once its send completed.
     */
    @Test
    void threadsPostingToAGroupOnOneQpEachKeepTheirOrderAndNothingIsTornOrLost() throws Exception {
        int posters = 2;
        int slotsEach = 16;
        int perPoster = 4_000;
        int length = 64;
        UdNode pub = node();
        UdNode sub = node();
        QueuePair sender = pub.qp(new QpInitAttributes().maxSendWr(posters * slotsEach));
        QueuePair member = sub.qp();
        member.attachMulticast(group);
        for (int i = 0; i < 64; i++) {
            sub.postRecv(member, i, 40 + length);
        }
        AddressHandle ah = pub.ah(AhAttributes.of(group));
        AtomicLongArray completed = new AtomicLongArray(posters);
        AtomicBoolean membersDone = new AtomicBoolean();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        long deadline = System.nanoTime() + 60_000_000_000L;
        AtomicLong received = new AtomicLong();
        List<Thread> threads = new ArrayList<>();
        for (int p = 0; p < posters; p++) {
            int me = p;
            threads.add(Thread.ofPlatform().name("poster-" + p).start(() -> {
                try {
                    WorkRequest wr = new WorkRequest(1);
                    for (int seq = 0; seq < perPoster; seq++) {
                        while (completed.get(me) < seq - slotsEach + 1) { // the slot's last send has completed
                            checkDeadline(deadline, "poster " + me + " waiting for its completions");
                            Thread.onSpinWait();
                        }
                        int slot = me * slotsEach + seq % slotsEach;
                        for (int w = 0; w < length; w += 8) {
                            pub.slot(slot).set(ValueLayout.JAVA_LONG_UNALIGNED, w, (long) me << 32 | seq);
                        }
                        pub.send(wr, slot, length).wrId((long) me << 32 | seq)
                                .ud(ah, AhAttributes.MULTICAST_QPN, QpInitAttributes.RDMA_UDP_QKEY);
                        while (sender.tryPostSend(wr) == QueuePair.BACK_PRESSURED) {
                            checkDeadline(deadline, "poster " + me + " back-pressured");
                            Thread.onSpinWait();
                        }
                    }
                } catch (Throwable t) {
                    failure.compareAndSet(null, t);
                }
            }));
        }
        threads.add(Thread.ofPlatform().name("sender-cq").start(() -> {
            try {
                WorkCompletion[] wcs = {new WorkCompletion(), new WorkCompletion()};
                long[] next = new long[posters];
                long expected = (long) posters * perPoster;
                long taken = 0;
                // Until every post completed (each does, once): the last ones may still be on their way
                // when the posters end, so an empty CQ then is no end.
                while (taken < expected && failure.get() == null) {
                    int n = pub.cq.poll(wcs);
                    if (n == 0) {
                        checkDeadline(deadline, "the sender's CQ");
                        Thread.onSpinWait();
                    }
                    for (int i = 0; i < n; i++) {
                        assertThat(wcs[i].status()).isEqualTo(WcStatus.SUCCESS);
                        int p = (int) (wcs[i].wrId() >>> 32);
                        assertThat((int) wcs[i].wrId()).as("poster %d's sends complete once each, in its order", p)
                                .isEqualTo(next[p]++);
                        completed.incrementAndGet(p);
                        taken++;
                    }
                }
            } catch (Throwable t) {
                failure.compareAndSet(null, t);
            }
        }));
        threads.add(Thread.ofPlatform().name("member-cq").start(() -> {
            try {
                WorkCompletion[] wcs = {new WorkCompletion()};
                long[] last = new long[posters];
                Arrays.fill(last, -1);
                while (!membersDone.get() || sub.cq.pending() > 0) {
                    if (sub.cq.poll(wcs) == 0) {
                        checkDeadline(deadline, "the member's CQ");
                        Thread.onSpinWait();
                        continue;
                    }
                    assertThat(wcs[0].status()).isEqualTo(WcStatus.SUCCESS);
                    assertThat(wcs[0].byteLen()).isEqualTo(40 + length);
                    int slot = (int) wcs[0].wrId();
                    long v = sub.slot(slot).get(ValueLayout.JAVA_LONG_UNALIGNED, 40);
                    for (int w = 8; w < length; w += 8) {
                        assertThat(sub.slot(slot).get(ValueLayout.JAVA_LONG_UNALIGNED, 40 + w)).as("a whole datagram").isEqualTo(v);
                    }
                    int p = (int) (v >>> 32);
                    assertThat(p).isBetween(0, posters - 1);
                    assertThat((long) (int) v).as("poster %d's datagrams in its order, each once", p).isGreaterThan(last[p]);
                    last[p] = (int) v;
                    received.incrementAndGet();
                    sub.postRecv(member, slot, 40 + length); // (this thread's alone once it started)
                }
            } catch (Throwable t) {
                failure.compareAndSet(null, t);
            }
        }));
        for (int p = 0; p < posters; p++) {
            threads.get(p).join(70_000);
        }
        threads.get(posters).join(70_000);
        long total = (long) posters * perPoster;
        long seen = -1;
        long quietSince = System.nanoTime();
        while (failure.get() == null && received.get() + sub.droppedOrLost() < total && System.nanoTime() < deadline
                && System.nanoTime() - quietSince < 2_000_000_000L) { // (what is still on its way reaches the member's poll)
            long now = received.get() + sub.droppedOrLost();
            if (now != seen) {
                seen = now;
                quietSince = System.nanoTime();
            }
            Thread.onSpinWait();
        }
        membersDone.set(true);
        threads.get(posters + 1).join(70_000);
        for (Thread t : threads) {
            assertThat(t.isAlive()).as("%s ended", t.getName()).isFalse();
        }
        assertThat(failure.get()).isNull();
        for (int p = 0; p < posters; p++) {
            assertThat(completed.get(p)).as("poster %d's completions", p).isEqualTo(perPoster);
        }
        sub.assertAccounted(received.get(), total, "the member");
        assertThat(received.get()).as("datagrams received").isPositive();
        assertThat(sender.state()).isEqualTo(QueuePair.State.RTS);
    }

    private static void checkDeadline(long deadline, String what) {
        if (System.nanoTime() > deadline) {
            throw new AssertionError(what + ": ran past 60 s");
        }
    }
}
