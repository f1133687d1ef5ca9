package io.regmem.registration.rpc;

import io.regmem.registration.LincheckBudget;
import io.regmem.registration.testkit.NoLeaks;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import org.jetbrains.kotlinx.lincheck.Actor;
import org.jetbrains.kotlinx.lincheck.execution.ExecutionScenario;
import org.jetbrains.lincheck.datastructures.ModelCheckingOptions;
import org.jetbrains.lincheck.datastructures.Operation;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Lincheck model checking of the send-context ring in its roles, as the transport uses it: the
 * consumer (the sender) gets a slot and posts its Send, or gets a slot, fails to prepare the Send and
 * gives the slot back; the producer (the send-completion handler) completes the oldest Send once it
 * is posted (a completion can only follow a post), or delivers the last one again. Consumer operations never run in
 * parallel with each other, nor do the producer's; a consumer and a producer run in parallel. Every
 * interleaving must be linearizable against the same operations run sequentially. Bounded for CI;
 * more in a soak run ({@link LincheckBudget}).
 */
@ExtendWith(NoLeaks.class)
public class SendCtxRingLincheckTest {
    /** Three slots: two outstanding at most, so "full" is reached within a few operations. */
    private final SendCtxRing ring = new SendCtxRing(1, 3, null, null);
    /** Per slot, the work-request id of its posted Send (what the send queue would hold). */
    private final AtomicLongArray posted = new AtomicLongArray(3);
    /** The id of the last completion applied (0: none yet): the producer's own record. */
    private final AtomicLong lastApplied = new AtomicLong();

    /** Consumer: get a slot and post its Send; the slot's index, or -1 when the ring is full. */
    @Operation(nonParallelGroup = "consumer")
    public int post() {
        SendCtx sc = ring.getLocked();
        if (sc == null) {
            return -1;
        }
        posted.set(sc.index(), sc.wrId());
        return sc.index();
    }

    /** Consumer: get a slot, fail to prepare the Send, give the slot back; its index, or -1 when full. */
    @Operation(nonParallelGroup = "consumer")
    public int getAndUnget() {
        SendCtx sc = ring.getLocked();
        if (sc == null) {
            return -1;
        }
        ring.ungetLocked(sc);
        return sc.index();
    }

    /**
     * Producer: the completion of the oldest outstanding Send, if it was posted (the multi-slot
     * sweep of one completion is covered by the unit and two-thread stress tests); its slot index,
     * or -1 when the oldest is not posted or nothing is outstanding.
     */
    @Operation(nonParallelGroup = "producer")
    public int completeOldest() {
        int oldest = oldestPosted(ring, posted);
        if (oldest < 0) {
            return -1;
        }
        long id = posted.get(oldest);
        if (!ring.complete(id)) {
            return -2;
        }
        lastApplied.set(id);
        return oldest;
    }

    /** Producer: the last applied completion delivered again (a duplicate): always refused. */
    @Operation(nonParallelGroup = "producer")
    public boolean completeAgain() {
        long id = lastApplied.get();
        return id != 0 && ring.complete(id);
    }

    /**
     * Consumer: how many slots are outstanding (asked by the consumer: between the two steps of its
     * own getAndUnget the count is a state no sequential history shows).
     */
    @Operation(nonParallelGroup = "consumer")
    public int outstanding() {
        return ring.outstanding();
    }

    /**
     * The ring with its space hook set, as the transport runs it: a consumer that finds the ring
     * full raises the waiting flag and gives up; a completion that frees slots must then run the
     * hook (the transport's wake-up). {@link #lostWakeup()} asks whether the consumer is waiting, was
     * not woken since, and yet the ring has room: sequentially never, so an interleaving that loses
     * the wake-up is not linearizable. (Lincheck explores interleavings under sequential
     * consistency; the store-load ordering the flag also needs is checked by the wake-up stress test.)
     * Checked to fail when a full consumer does not look at the tail again after raising the flag.
     */
    public static class WithSpaceHook {
        private final AtomicLong wakeups = new AtomicLong();
        private final SendCtxRing ring = new SendCtxRing(1, 3, null, wakeups::incrementAndGet);
        private final AtomicLongArray posted = new AtomicLongArray(3);
        /**
         * The consumer's state, read by the producer's check: waiting since a failed get, and the
         * wake-ups counted before that get began (a wake-up during the get counts as one).
         */
        private volatile boolean waiting;
        private volatile long wakeupsBeforeFailure;

        /** Consumer: get a slot and post its Send; the slot's index, or -1 when the ring is full (then it waits). */
        @Operation(nonParallelGroup = "consumer")
        public int post() {
            long before = wakeups.get();
            SendCtx sc = ring.getLocked();
            if (sc == null) {
                if (!waiting) {
                    wakeupsBeforeFailure = before;
                    waiting = true;
                }
                return -1;
            }
            waiting = false;
            posted.set(sc.index(), sc.wrId());
            return sc.index();
        }

        /**
         * Producer (so that no completion is half done meanwhile): is the consumer waiting for a
         * wake-up that never came although the ring has room?
         */
        @Operation(nonParallelGroup = "producer")
        public boolean lostWakeup() {
            if (!waiting) {
                return false;
            }
            long before = wakeupsBeforeFailure;
            return wakeups.get() == before && ring.outstanding() < 2;
        }

        /** Producer: the completion of the oldest outstanding Send, if it was posted; its slot, or -1. */
        @Operation(nonParallelGroup = "producer")
        public int completeOldest() {
            int oldest = oldestPosted(ring, posted);
            if (oldest < 0 || !ring.complete(posted.get(oldest))) {
                return -1;
            }
            return oldest;
        }
    }

    /**
     * The slot of the oldest outstanding Send if it was posted (a completion can only follow a
     * post), else -1. The producer's view: what the send queue would complete next.
     */
    static int oldestPosted(SendCtxRing ring, AtomicLongArray posted) {
        int oldest = ring.oldestIndex();
        return oldest >= 0 && posted.get(oldest) == ring.slot(oldest).wrId() ? oldest : -1;
    }

    @Test
    void withTheSpaceHookNoWakeupIsLost() throws NoSuchMethodException {
        // Besides the random scenarios, the one where a wake-up can be lost: the ring fills, then
        // a consumer finds it full while the producer frees a slot, then the producer asks.
        Actor post = new Actor(WithSpaceHook.class.getMethod("post"), List.of());
        Actor complete = new Actor(WithSpaceHook.class.getMethod("completeOldest"), List.of());
        Actor lost = new Actor(WithSpaceHook.class.getMethod("lostWakeup"), List.of());
        ExecutionScenario fullRing = new ExecutionScenario(List.of(post, post),
                List.of(List.of(post), List.of(complete, lost)), List.of(lost), null);
        new ModelCheckingOptions()
                .addCustomScenario(fullRing)
                .iterations(LincheckBudget.iterations(8))
                .invocationsPerIteration(LincheckBudget.invocations(200))
                .threads(2)
                .actorsPerThread(4)
                .check(WithSpaceHook.class);
    }

    @Test
    void isLinearizable() {
        new ModelCheckingOptions()
                .iterations(LincheckBudget.iterations(6))
                .invocationsPerIteration(LincheckBudget.invocations(200))
                .threads(2)
                .actorsPerThread(4)
                .check(SendCtxRingLincheckTest.class);
    }
}
