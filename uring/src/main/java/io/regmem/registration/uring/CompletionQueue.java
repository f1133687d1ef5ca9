package io.regmem.registration.uring;

import static io.regmem.registration.uring.UringLayout.*;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;

/**
 * A ring's completion queue and its reap: each completion is matched to its operation
 * ({@link Operations}), whose buffer is unpinned, and delivered to the handler (or stashed while the
 * ring waits for itself); the fixed-buffer table's tag completions go to {@link FixedBuffers}. Owner
 * thread only, as the ring; allocates nothing.
 */
final class CompletionQueue {
    private static final VarHandle INT = ValueLayout.JAVA_INT.varHandle();

    private final IoRing ring;
    private final MemorySegment cq;
    private final long headOff;
    private final long tailOff;
    private final long cqesOff;
    private final int mask;
    private int head;
    private final SubmissionQueue sq;
    private final Operations ops;
    private final FixedBuffers buffers;
    /** Completions reaped while the ring waited for itself (a chunk retiring), delivered first by poll. */
    final CompletionStash stash;
    /** Completions delivered since the ring was built. */
    long completed;

    CompletionQueue(IoRing ring, RingMemory mem, SubmissionQueue sq, Operations ops, FixedBuffers buffers, int capacity) {
        this.ring = ring;
        this.sq = sq;
        this.cq = mem.cq;
        this.headOff = mem.cqHeadOff;
        this.tailOff = mem.cqTailOff;
        this.cqesOff = mem.cqesOff;
        this.mask = mem.cqMask;
        this.head = (int) INT.getAcquire(cq, headOff);
        this.ops = ops;
        this.buffers = buffers;
        this.stash = new CompletionStash(capacity);
    }

    /** {@link IoRing#poll}: what is stashed, then what the queue has, entering the kernel only when it has work. */
    int poll(IoCompletionHandler handler) {
        if (buffers.hasDeferred()) {
            buffers.runDeferred();
        }
        int n = drainStash(handler);
        n += reap(handler);
        // A cleared fixed buffer's tag completion may need the ring's task work run to be posted:
        // enter (without waiting) while one is due, as for operations in flight.
        if (n == 0 && !ring.isClosed() && ((ops.inFlight() > sq.prepared && sq.kernelHasWork()) || buffers.awaitingTags())) {
            ring.enter(0, ENTER_GETEVENTS);
            n += reap(handler);
        }
        return n;
    }

    /** {@link IoRing#await}: submits, then waits until {@code minCompletions} (at most those in flight) were delivered. */
    int await(int minCompletions, IoCompletionHandler handler) {
        if (buffers.hasDeferred()) {
            buffers.runDeferred();
        }
        int n = drainStash(handler);
        n += reap(handler);
        while (n < minCompletions && ops.inFlight() > 0) {
            int want = Math.min(minCompletions - n, ops.inFlight());
            ring.enter(want, ENTER_GETEVENTS);
            n += reap(handler);
        }
        if (sq.prepared > 0) {
            ring.enter(0, 0);
        }
        return n;
    }

    /**
     * Closing on the owner: drops what was never submitted, asks the kernel to cancel everything in
     * flight and waits until all of it completed (nothing delivered).
     */
    void cancelAndAwaitAll(Preparation prep) {
        prep.dropPrepared();
        if (ops.inFlight() > 0) {
            if (prep.cancelAll()) {
                ring.enter(0, 0);
                sq.prepared = 0;
            }
            while (ops.inFlight() > 0) {
                ring.waitInternally();
            }
        }
    }

    /** Delivers what the ring stashed while it waited for itself. */
    private int drainStash(IoCompletionHandler handler) {
        int n = 0;
        while (stash.size() > 0) {
            long ud = stash.headUserData();
            int res = stash.headResult();
            stash.pop();
            completed++;
            n++;
            handler.onComplete(ud, res);
        }
        return n;
    }

    /** Reaps the completion queue; operations go to {@code handler}, or to the stash when it is null. */
    int reap(IoCompletionHandler handler) {
        int n = 0;
        // Only what was there when the call began: a handler that submits may make the kernel post
        // more at once (page-cache reads complete inline), and a reap must return.
        if (ring.isClosed()) {
            return 0;
        }
        int end = (int) INT.getAcquire(cq, tailOff);
        while (true) {
            // fields, not locals: a handler (or a chunk retiring inside one) may reap in between;
            // a handler may even close the ring, after which its memory is gone
            int h = head;
            if (ring.isClosed() || end - h <= 0) {
                return n;
            }
            long o = cqesOff + (long) (h & mask) * CQE_SIZE;
            long ud = cq.get(ValueLayout.JAVA_LONG, o + CQE_USER_DATA);
            int res = cq.get(ValueLayout.JAVA_INT, o + CQE_RES);
            head = h + 1;
            INT.setRelease(cq, headOff, h + 1);
            if (ud >= IoRing.CANCEL_USER_DATA) {
                if (ud >= IoRing.TAG_BASE) {
                    buffers.tagArrived(ud);
                }
                continue;
            }
            int id = (int) ud;
            long userData = ops.userData(id);
            FixedSlot s = ops.end(id);
            if (s != null && s.removed) {
                buffers.finishRetired(); // the last operation on a chunk that left its pool
            }
            if (handler == null) {
                stash.add(userData, res);
            } else {
                completed++;
                n++;
                handler.onComplete(userData, res);
            }
        }
    }
}
