package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;

/**
 * A completion queue ({@code ib_create_cq}): where work completions of the queue pairs that use it
 * arrive. It counts the QPs that use it; destroying it while any does fails with {@link Errno#EBUSY}.
 */
public final class CompletionQueue extends CountedResource implements AutoCloseable {
    private final int depth;
    /** Preallocated entries; head/tail count polls and pushes. Guarded by the fabric lock. */
    private final WorkCompletion[] ring;
    private long head;
    private long tail;
    private boolean overrun;

    CompletionQueue(RdmaDevice device, int depth) {
        super(device, "CompletionQueue", null);
        this.depth = depth;
        this.ring = new WorkCompletion[depth];
        for (int i = 0; i < depth; i++) {
            ring[i] = new WorkCompletion();
        }
    }

    /**
     * Progresses the soft devices, then moves up to {@code out.length} completions into the
     * caller's array ({@code ib_poll_cq}). Each completion polled frees its request's slot in its
     * queue, and the slots of the unsignaled requests before it in the same send queue
     * ({@link QueuePair#outstandingSends()}). Allocates nothing.
     *
     * @return how many entries of {@code out} were filled, oldest first
     * @throws RdmaException {@link Errno#EBADF} if the CQ was destroyed
     */
    public int poll(WorkCompletion[] out) {
        checkAlive("poll");
        Fabric.LOCK.lock();
        try {
            SoftEngine.progressAll();
            int n = 0;
            while (n < out.length && head != tail) {
                WorkCompletion wc = ring[(int) (head % depth)];
                copy(wc, out[n++]);
                head++;
                // Polling frees the request's queue slot (and those of the unsignaled ones before it).
                wc.qp.retire(wc.fromRecvQueue, wc.queueSeq);
            }
            return n;
        } finally {
            Fabric.LOCK.unlock();
        }
    }

    private static void copy(WorkCompletion from, WorkCompletion to) {
        to.wrId = from.wrId;
        to.status = from.status;
        to.opcode = from.opcode;
        to.byteLen = from.byteLen;
        to.qp = from.qp;
        to.invalidatedRkey = from.invalidatedRkey;
        to.immData = from.immData;
        to.withImm = from.withImm;
        to.withInv = from.withInv;
    }

    /**
     * The entry the next completion fills, or null when the CQ is full (an overrun: the caller
     * moves the QP to the error state). Fabric lock held.
     */
    WorkCompletion reserve() {
        if (tail - head == depth) {
            overrun = true;
            return null;
        }
        WorkCompletion wc = ring[(int) (tail % depth)];
        wc.withImm = false;
        wc.withInv = false;
        wc.immData = 0;
        wc.invalidatedRkey = 0;
        wc.byteLen = 0;
        return wc;
    }

    /** Publishes the entry {@link #reserve()} returned. */
    void commit() {
        tail++;
    }

    /** True once a completion was lost because the CQ was full (the QP then went to the error state). */
    public boolean overrun() {
        Fabric.LOCK.lock();
        try {
            return overrun;
        } finally {
            Fabric.LOCK.unlock();
        }
    }

    /** Completions waiting to be polled (progresses nothing). */
    public int pending() {
        Fabric.LOCK.lock();
        try {
            return (int) (tail - head);
        } finally {
            Fabric.LOCK.unlock();
        }
    }

    /** Entries the queue holds. */
    public int depth() {
        return depth;
    }

    /**
     * Destroys the CQ ({@code ib_destroy_cq}).
     *
     * @throws RdmaException {@link Errno#EBUSY} while queue pairs use it (the CQ stays usable);
     *                       {@link Errno#EBADF} if already destroyed
     */
    @Override
    public void close() {
        synchronized (device.lock) {
            destroyUnlessCounted("destroy", "queue pair role(s) using it", "destroy the QPs first");
        }
    }
}
