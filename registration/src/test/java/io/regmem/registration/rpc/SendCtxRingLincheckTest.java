package io.regmem.registration.rpc;

import io.regmem.registration.LincheckBudget;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import org.jetbrains.lincheck.datastructures.ModelCheckingOptions;
import org.jetbrains.lincheck.datastructures.Operation;
import org.junit.jupiter.api.Test;

/**
 * Lincheck model checking of the send-context ring in its roles, as the transport uses it: the
 * consumer (the sender) gets a slot and posts its Send, or gets a slot, fails to prepare the Send and
 * gives the slot back; the producer (the send-completion handler) completes the oldest Send once it
 * is posted (a completion can only follow a post), or delivers the last one again. Consumer operations never run in
 * parallel with each other, nor do the producer's; a consumer and a producer run in parallel. Every
 * interleaving must be linearizable against the same operations run sequentially. Bounded for CI;
 * more in a soak run ({@link LincheckBudget}).
 */
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
        int oldest = ring.oldestIndex();
        if (oldest < 0) {
            return -1;
        }
        long id = posted.get(oldest);
        if (id != ring.slot(oldest).wrId()) {
            return -1;
        }
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
