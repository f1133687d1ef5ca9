package io.regmem.registration;

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
 * <p>Threads: pushing and executing happen under the QP's lock. Retiring happens when a completion
 * is polled, without that lock (a poller holds no QP lock): {@code retired} only grows, by a
 * compare-and-set to the larger value, and an executor records a completion
 * ({@link #produced}) before it moves {@code head} past the request, so a poller that sees the new
 * head also sees the completion it must wait for.
 */
final class WorkQueue {
    private static final VarHandle RETIRED;

    static {
        try {
            RETIRED = MethodHandles.lookup().findVarHandle(WorkQueue.class, "retired", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private final Wqe[] ring;
    private volatile long head;
    private volatile long tail;
    private volatile long retired;
    /** The newest executed request that produced a completion (or lost it to a full CQ); -1 if none. */
    private volatile long lastCompletion = -1;

    WorkQueue(int depth, int maxSge) {
        ring = new Wqe[depth];
        for (int i = 0; i < depth; i++) {
            ring[i] = new Wqe(maxSge);
        }
    }

    /** Slots occupied: posted and not yet retired. */
    int size() {
        return (int) (tail - retired);
    }

    /** Slots free for posting. */
    int room() {
        return ring.length - size();
    }

    /** The sequence number the next push gets. */
    long tailSeq() {
        return tail;
    }

    /** The slot the next push fills; {@link #commitPush(int)} makes it visible. */
    Wqe pushSlot(int ahead) {
        long seq = tail + ahead;
        Wqe w = ring[(int) (seq % ring.length)];
        w.seq = seq;
        return w;
    }

    void commitPush(int n) {
        tail += n;
    }

    /** The oldest request not yet executed, or null. */
    Wqe peek() {
        long h = head;
        return h == tail ? null : ring[(int) (h % ring.length)];
    }

    /** The sequence number of the request {@link #peek()} returns: what its completion retires. */
    long headSeq() {
        return head;
    }

    void pop() {
        head++;
    }

    /** Records that executed request {@code seq} produced a completion (one that will retire it); before {@link #pop}. */
    void produced(long seq) {
        lastCompletion = seq;
    }

    /** Frees the slots of every executed request up to and including sequence number {@code seq}. Any thread. */
    void retire(long seq) {
        raise(Math.min(seq + 1, head));
    }

    /**
     * For a QP in the error state, where no request completes silently any more: once the last
     * completion of the queue is polled, unsignaled requests executed after it have nothing left to
     * retire them, so their slots are freed (as the marker of {@code ib_drain_qp} would free them).
     * Any thread.
     */
    void settle() {
        long h = head; // read before lastCompletion: a completion made before h is then visible
        if (retired > lastCompletion) {
            raise(h);
        }
    }

    private void raise(long next) {
        long r;
        while ((r = retired) < next) {
            if (RETIRED.compareAndSet(this, r, next)) {
                return;
            }
        }
    }
}
