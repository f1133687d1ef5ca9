package io.regmem.registration;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.testkit.Loopback;
import io.regmem.registration.testkit.NoLeaks;
import java.util.List;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AddLifecycleHook;

/**
 * Invariant 20, completion accounting as in verbs: a request keeps its queue slot until its
 * completion is polled (an unsignaled one, until a later completion of its send queue is polled),
 * so a CQ at least as deep as the queues that complete on it never overruns, whatever the order of
 * posts and polls: random sequences of posts and polls (the cases of {@code CompletionAccountingTest}
 * are the loops that overran).
 */
@AddLifecycleHook(NoLeaks.class)
class CompletionAccountingPropertyTest {

    /** One step of a random run: who posts or polls what. */
    record Step(int kind, boolean signaled, int count) {
    }

    @Provide
    Arbitrary<List<Step>> steps() {
        return Arbitraries.integers().between(0, 5).flatMap(kind -> Arbitraries.of(true, false, false)
                .flatMap(sig -> Arbitraries.integers().between(1, 6).map(n -> new Step(kind, sig, n))))
                .list().ofMinSize(1).ofMaxSize(120);
    }

    /**
     * Any interleaving of WRITEs and SENDs (signaled or not) from A, receives posted at A and B,
     * SENDs from B and polls of either CQ (up to a few entries at a time), with each CQ exactly as
     * deep as its QP's two queues: no CQ overruns, no QP leaves RTS, a post fails only with ENOMEM
     * and only when its queue's slots are all taken, and at the end every slot comes back.
     */
    @Property(tries = 150)
    void aCqAsDeepAsItsQueuesNeverOverruns(@ForAll("steps") List<Step> steps, @ForAll boolean smallQueues) {
        int sq = smallQueues ? 3 : 8;
        int rq = smallQueues ? 2 : 5;
        try (Loopback lb = CompletionAccountingTest.loopback(sq, rq, sq + rq, false)) {
            MemoryRegion localA = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
            MemoryRegion localB = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
            WorkCompletion[] some = new WorkCompletion[6];
            for (int i = 0; i < some.length; i++) {
                some[i] = new WorkCompletion();
            }
            long recvsAtB = 0;
            long sendsToB = 0;
            long recvsAtA = 0;
            long sendsToA = 0;
            long id = 0;
            for (Step s : steps) {
                switch (s.kind()) {
                    case 0 -> post(lb.qpA, CompletionAccountingTest.write(lb, localA, localB, id++, s.signaled()), sq);
                    case 1 -> {
                        if (recvsAtB > sendsToB && post(lb.qpA, new WorkRequest(1).wrId(id++).opcode(Opcode.SEND)
                                .signaled(s.signaled()).addSge(localA.address(), 16, localA.lkey()), sq)) {
                            sendsToB++;
                        }
                    }
                    case 2 -> {
                        if (postRecv(lb.qpB, localB, id++, rq)) {
                            recvsAtB++;
                        }
                    }
                    case 3 -> {
                        if (postRecv(lb.qpA, localA, id++, rq)) {
                            recvsAtA++;
                        }
                    }
                    case 4 -> {
                        if (recvsAtA > sendsToA && post(lb.qpB, new WorkRequest(1).wrId(id++).opcode(Opcode.SEND)
                                .signaled(true).addSge(localB.address(), 16, localB.lkey()), sq)) {
                            sendsToA++;
                        }
                    }
                    default -> pollSome(s.count() % 2 == 0 ? lb.cqA : lb.cqB, some, s.count());
                }
                assertThat(lb.cqA.overrun()).as("CQ A overran").isFalse();
                assertThat(lb.cqB.overrun()).as("CQ B overran").isFalse();
                assertThat(lb.qpA.state()).isEqualTo(QueuePair.State.RTS);
                assertThat(lb.qpB.state()).isEqualTo(QueuePair.State.RTS);
                assertThat(lb.qpA.outstandingSends()).isBetween(0, sq);
                assertThat(lb.qpA.outstandingRecvs()).isBetween(0, rq);
            }
            // The end: everything polled, then both QPs drained: every slot comes back (unsignaled
            // requests after the last completion included, as the drain's marker would retire them).
            while (lb.cqA.poll(lb.wcs) + lb.cqB.poll(lb.wcs) > 0) {
                assertThat(lb.cqA.overrun() || lb.cqB.overrun()).isFalse();
            }
            lb.qpA.drain();
            lb.qpB.drain();
            while (lb.cqA.poll(lb.wcs) + lb.cqB.poll(lb.wcs) > 0) {
                assertThat(lb.cqA.overrun() || lb.cqB.overrun()).isFalse();
            }
            assertThat(lb.qpA.outstandingSends() + lb.qpA.outstandingRecvs()).isZero();
            assertThat(lb.qpB.outstandingSends() + lb.qpB.outstandingRecvs()).isZero();
        }
    }

    /** Posts; on ENOMEM checks that the queue was full. True if posted. */
    private static boolean post(QueuePair qp, WorkRequest wr, int max) {
        int before = qp.outstandingSends();
        try {
            qp.postSend(wr);
            assertThat(before).isLessThan(max);
            return true;
        } catch (RdmaException e) {
            assertThat(e.errno()).isEqualTo(Errno.ENOMEM);
            assertThat(before).as("ENOMEM only when full").isEqualTo(max);
            return false;
        }
    }

    private static boolean postRecv(QueuePair qp, MemoryRegion mr, long id, int max) {
        int before = qp.outstandingRecvs();
        try {
            qp.postRecv(new WorkRequest(1).wrId(id).addSge(mr.address() + 4096, 64, mr.lkey()));
            assertThat(before).isLessThan(max);
            return true;
        } catch (RdmaException e) {
            assertThat(e.errno()).isEqualTo(Errno.ENOMEM);
            assertThat(before).isEqualTo(max);
            return false;
        }
    }

    private static void pollSome(CompletionQueue cq, WorkCompletion[] some, int n) {
        WorkCompletion[] batch = java.util.Arrays.copyOf(some, Math.max(1, Math.min(n, some.length)));
        int got = cq.poll(batch);
        for (int i = 0; i < got; i++) {
            assertThat(batch[i].status()).as("%s", batch[i]).isEqualTo(WcStatus.SUCCESS);
        }
    }
}
