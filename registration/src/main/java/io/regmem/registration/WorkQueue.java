package io.regmem.registration;

/**
 * A QP's send or receive queue: a ring of preallocated {@link Wqe}s, guarded by the fabric lock.
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
 */
final class WorkQueue {
    private final Wqe[] ring;
    private long head;
    private long tail;
    private long retired;
    /** The newest executed request that produced a completion (or lost it to a full CQ); -1 if none. */
    private long lastCompletion = -1;

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

    /** The slot the next push fills; {@link #commitPush(int)} makes it visible. */
    Wqe pushSlot(int ahead) {
        return ring[(int) ((tail + ahead) % ring.length)];
    }

    void commitPush(int n) {
        tail += n;
    }

    /** The oldest request not yet executed, or null. */
    Wqe peek() {
        return head == tail ? null : ring[(int) (head % ring.length)];
    }

    /** The sequence number of the request {@link #peek()} returns: what its completion retires. */
    long headSeq() {
        return head;
    }

    void pop() {
        head++;
    }

    /** Records that executed request {@code seq} produced a completion (one that will retire it). */
    void produced(long seq) {
        lastCompletion = seq;
    }

    /** Frees the slots of every executed request up to and including sequence number {@code seq}. */
    void retire(long seq) {
        long next = Math.min(seq + 1, head);
        if (next > retired) {
            retired = next;
        }
    }

    /**
     * For a QP in the error state, where no request completes silently any more: once the last
     * completion of the queue is polled, unsignaled requests executed after it have nothing left to
     * retire them, so their slots are freed (as the marker of {@code ib_drain_qp} would free them).
     */
    void settle() {
        if (retired > lastCompletion) {
            retired = head;
        }
    }
}
