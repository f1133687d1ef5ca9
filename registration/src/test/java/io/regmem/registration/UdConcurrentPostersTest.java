package io.regmem.registration;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.Providers;
import io.regmem.registration.testkit.UdNode;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Several threads posting datagrams on one UD QP at once, as verbs allows ({@code ibv_post_send} is
 * thread-safe), on the provider under test: each thread's datagrams arrive in its own order, each
 * once and whole (never another thread's bytes, never a slot rewritten under a send), every post
 * completes once and successfully, and what did not arrive is counted. A third thread polls the
 * sender's CQ, a fourth the member's; the posters reuse a payload slot only once its send completed.
 */
@ExtendWith(NoLeaks.class)
class UdConcurrentPostersTest {
    private static final int POSTERS = 2;
    private static final int SLOTS_EACH = 16;
    private static final int PER_POSTER = 4_000;
    private static final int LENGTH = 64;
    private final List<UdNode> nodes = new ArrayList<>();

    @AfterEach
    void tearDown() {
        for (UdNode n : nodes) {
            n.close();
        }
    }

    private UdNode node() {
        UdNode n = new UdNode(Map.of(), 64);
        nodes.add(n);
        return n;
    }

    @Test
    void threadsPostingToAGroupOnOneQpEachKeepTheirOrderAndNothingIsTornOrLost() throws Exception {
        try (RdmaDevice probe = Providers.open()) {
            Assumptions.assumeTrue(probe.supportsDatagrams() && probe.attributes().maxMcastGroups() > 0,
                    Providers.NAME + " has no multicast (max_mcast_grp 0)");
        }
        InetAddress group = InetAddress.getByName("239.78.0." + (1 + (int) (System.nanoTime() & 127)));
        UdNode pub = node();
        UdNode sub = node();
        QueuePair sender = pub.qp(new QpInitAttributes().maxSendWr(POSTERS * SLOTS_EACH));
        QueuePair member = sub.qp();
        member.attachMulticast(group);
        for (int i = 0; i < 64; i++) {
            sub.postRecv(member, i, 40 + LENGTH);
        }
        AddressHandle ah = pub.ah(AhAttributes.of(group));
        AtomicLongArray completed = new AtomicLongArray(POSTERS);
        AtomicBoolean postersDone = new AtomicBoolean();
        AtomicBoolean membersDone = new AtomicBoolean();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        long deadline = System.nanoTime() + 60_000_000_000L;
        AtomicLong received = new AtomicLong();
        List<Thread> threads = new ArrayList<>();
        for (int p = 0; p < POSTERS; p++) {
            int me = p;
            threads.add(Thread.ofPlatform().name("poster-" + p).start(() -> {
                try {
                    WorkRequest wr = new WorkRequest(1);
                    for (int seq = 0; seq < PER_POSTER; seq++) {
                        while (completed.get(me) < seq - SLOTS_EACH + 1) { // the slot's last send has completed
                            check(deadline, "poster " + me + " waiting for its completions");
                            Thread.onSpinWait();
                        }
                        int slot = me * SLOTS_EACH + seq % SLOTS_EACH;
                        for (int w = 0; w < LENGTH; w += 8) {
                            pub.slot(slot).set(ValueLayout.JAVA_LONG_UNALIGNED, w, (long) me << 32 | seq);
                        }
                        pub.send(wr, slot, LENGTH).wrId((long) me << 32 | seq)
                                .ud(ah, AhAttributes.MULTICAST_QPN, QpInitAttributes.RDMA_UDP_QKEY);
                        while (sender.tryPostSend(wr) == QueuePair.BACK_PRESSURED) {
                            check(deadline, "poster " + me + " back-pressured");
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
                long[] next = new long[POSTERS];
                while (!postersDone.get() || pub.cq.pending() > 0) {
                    int n = pub.cq.poll(wcs);
                    if (n == 0) {
                        check(deadline, "the sender's CQ");
                        Thread.onSpinWait();
                    }
                    for (int i = 0; i < n; i++) {
                        assertThat(wcs[i].status()).isEqualTo(WcStatus.SUCCESS);
                        int p = (int) (wcs[i].wrId() >>> 32);
                        assertThat((int) wcs[i].wrId()).as("poster %d's sends complete once each, in its order", p)
                                .isEqualTo(next[p]++);
                        completed.incrementAndGet(p);
                    }
                }
            } catch (Throwable t) {
                failure.compareAndSet(null, t);
            }
        }));
        threads.add(Thread.ofPlatform().name("member-cq").start(() -> {
            try {
                WorkRequest rwr = new WorkRequest(1);
                WorkCompletion[] wcs = {new WorkCompletion()};
                long[] last = {-1, -1};
                while (!membersDone.get() || sub.cq.pending() > 0) {
                    if (sub.cq.poll(wcs) == 0) {
                        check(deadline, "the member's CQ");
                        Thread.onSpinWait();
                        continue;
                    }
                    assertThat(wcs[0].status()).isEqualTo(WcStatus.SUCCESS);
                    assertThat(wcs[0].byteLen()).isEqualTo(40 + LENGTH);
                    int slot = (int) wcs[0].wrId();
                    long v = sub.slot(slot).get(ValueLayout.JAVA_LONG_UNALIGNED, 40);
                    for (int w = 8; w < LENGTH; w += 8) {
                        assertThat(sub.slot(slot).get(ValueLayout.JAVA_LONG_UNALIGNED, 40 + w)).as("a whole datagram").isEqualTo(v);
                    }
                    int p = (int) (v >>> 32);
                    assertThat(p).isBetween(0, POSTERS - 1);
                    assertThat((long) (int) v).as("poster %d's datagrams in its order, each once", p).isGreaterThan(last[p]);
                    last[p] = (int) v;
                    received.incrementAndGet();
                    member.postRecv(rwr.reset().wrId(slot).addSge(sub.slot(slot).address(), 40 + LENGTH, sub.mr.lkey()));
                }
            } catch (Throwable t) {
                failure.compareAndSet(null, t);
            }
        }));
        for (int p = 0; p < POSTERS; p++) {
            threads.get(p).join(70_000);
        }
        postersDone.set(true);
        threads.get(POSTERS).join(70_000);
        long total = (long) POSTERS * PER_POSTER;
        long seen = -1;
        long quietSince = System.nanoTime();
        while (failure.get() == null && received.get() + drops(sub) < total && System.nanoTime() < deadline
                && System.nanoTime() - quietSince < 2_000_000_000L) { // (what is still on its way reaches the member's poll)
            long now = received.get() + drops(sub);
            if (now != seen) {
                seen = now;
                quietSince = System.nanoTime();
            }
            Thread.onSpinWait();
        }
        membersDone.set(true);
        threads.get(POSTERS + 1).join(70_000);
        for (Thread t : threads) {
            assertThat(t.isAlive()).as("%s ended", t.getName()).isFalse();
        }
        assertThat(failure.get()).isNull();
        for (int p = 0; p < POSTERS; p++) {
            assertThat(completed.get(p)).as("poster %d's completions", p).isEqualTo(PER_POSTER);
        }
        sub.assertAccounted(received.get(), total, "the member");
        assertThat(received.get()).as("datagrams received").isPositive();
        assertThat(sender.state()).isEqualTo(QueuePair.State.RTS);
    }

    private static long drops(UdNode n) {
        return n.device.counters().datagramsDropped(DatagramDrop.NO_RECEIVE) + n.device.counters().datagramsDropped(DatagramDrop.LOST);
    }

    private static void check(long deadline, String what) {
        if (System.nanoTime() > deadline) {
            throw new AssertionError(what + ": ran past 60 s");
        }
    }
}
