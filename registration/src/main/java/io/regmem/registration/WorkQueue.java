package io.regmem.registration;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * A QP's send or receive queue: a ring of preallocated {@link Wqe}s.
 *
 * <p>Three counters, each only growing: {@code tail} counts posted requests, {@code head} executed
 * (or flushed) ones, {@code retired} the ones whose slot is free again. As in verbs, a request keeps
 * its slot after it executed, until its completion is polled ({@link #retire}: an unsignaled request
 * is retired with the next polled completion of the same queue), so the completions of a queue can
 * never outnumber its slots, and a CQ as deep as the queues it serves never overruns.
 * Once the QP is in the error state and every completion of the queue has been polled, the slots of
 * unsignaled requests that executed after the last completion are freed too ({@link #settle}).
 * <pre>
 *   retired ≤ head ≤ tail;  occupied slots = tail - retired ≤ depth;  to execute = tail - head
 * </pre>
 * <p>Threads: pushing happens under the QP's post lock, executing under its execution lock; they
 * meet at {@code tail}, which a push publishes with a release store after it filled the slots and an
 * executor reads with an acquire load. Retiring happens when a completion
 * is polled, under the consumer lock of the CQ the queue completes on (see {@link CompletionQueue}):
 * every change of {@code retired} holds that lock, so it is a plain release store.
 * An executor records a completion ({@link #produced}) before it moves {@code head} past the
 * request, so a poller that sees the new head also sees the completion it must wait for.
 */
final class WorkQueue {
    private static final VarHandle RETIRED;
    private static final VarHandle HEAD;
    private static final VarHandle TAIL;

    static {
        try {
            MethodHandles.Lookup l = MethodHandles.lookup();
            RETIRED = l.findVarHandle(WorkQueue.class, "retired", long.class);
            HEAD = l.findVarHandle(WorkQueue.class, "head", long.class);
            TAIL = l.findVarHandle(WorkQueue.class, "tail", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** A power of two at least {@code depth} long, so that a slot is found with a mask, not a division. */
    private final Wqe[] ring;
    private final int mask;
    private final int depth;
    // Volatile, so reads are plain loads with acquire semantics; written with release stores
    // (no full fence on the hot path) by the one thread that holds the lock guarding each.
    private volatile long head;
    private volatile long tail;
    private volatile long retired;
    /** The newest executed request that produced a completion (or lost it to a full CQ); -1 if none. */
    private long lastCompletion = -1; // read only after an acquire load of head, which orders it

    WorkQueue(int depth, int maxSge) {
        this(depth, maxSge, null, 0);
    }

    /** A queue whose slots each have {@code maxInline} bytes of {@code inlineArea} for an inline payload. */
    WorkQueue(int depth, int maxSge, MemorySegment inlineArea, int maxInline) {
        this.depth = depth;
        ring = new Wqe[Integer.highestOneBit(Math.max(1, depth - 1)) << 1];
        mask = ring.length - 1;
        for (int i = 0; i < ring.length; i++) {
            ring[i] = new Wqe(maxSge, inlineArea == null ? null : inlineArea.asSlice((long) i * maxInline, maxInline));
        }
    }

    /** Slots in the ring (a power of two, at least the depth). */
    static int slots(int depth) {
        return Integer.highestOneBit(Math.max(1, depth - 1)) << 1;
    }

    /** Slots occupied: posted and not yet retired. */
    int size() {
        return (int) (tail - retired);
    }

    /** Slots free for posting. */
    int room() {
        return depth - size();
    }

    /** The sequence number the next push gets. */
    long tailSeq() {
        return tail;
    }

    /** The sequence number the next push gets, from any thread (an acquire load). */
    long tailAcquire() {
        return tail;
    }

    /** True if nothing waits to execute (any thread: acquire loads). */
    boolean idle() {
        return head == tail;
    }

    /** The slot the next push fills; {@link #commitPush(int)} makes it visible. */
    Wqe pushSlot(int ahead) {
        long seq = tail + ahead;
        Wqe w = ring[(int) seq & mask];
        w.seq = seq;
        return w;
    }

    void commitPush(int n) {
        TAIL.setRelease(this, tail + n);
    }

    /** The oldest request not yet executed, or null. */
    Wqe peek() {
        long h = head;
        return h == tail ? null : ring[(int) h & mask];
    }

    /**
     * The request with sequence number {@code seq}: posted (below an acquire load of the tail) and
     * not yet executed or flushed.
     */
    Wqe at(long seq) {
        long h = head;
        long t = tail;
        if (seq < h || seq >= t) {
            throw new IllegalArgumentException("request " + seq + " is not queued (executed below " + h + ", posted below "
                    + t + ")");
        }
        return ring[(int) seq & mask];
    }

    /** The sequence number of the request {@link #peek()} returns: what its completion retires. */
    long headSeq() {
        return head;
    }

    void pop() {
        HEAD.setRelease(this, head + 1);
    }

    /** Records that executed request {@code seq} produced a completion (one that will retire it); before {@link #pop}. */
    void produced(long seq) {
        lastCompletion = seq; // published by the release store of head in pop()
    }

    /** Frees the slots of every executed request up to and including sequence number {@code seq} (the CQ's consumer lock held). */
    void retire(long seq) {
        raise(Math.min(seq + 1, head));
    }

    /**
     * For a QP in the error state, where no request completes silently any more: once the last
     * completion of the queue is polled, unsignaled requests executed after it have nothing left to
     * retire them, so their slots are freed (as the marker of {@code ib_drain_qp} would free them).
     * The CQ's consumer lock held.
     */
    void settle() {
        long h = head; // before lastCompletion: a completion recorded before h is visible
        if (retired > lastCompletion) {
            raise(h);
        }
    }

    private void raise(long next) {
        if (next > retired) {
            RETIRED.setRelease(this, next);
        }
    }
}
