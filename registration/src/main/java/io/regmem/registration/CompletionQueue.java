package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.spi.CqContext;
import io.regmem.registration.spi.ProviderCq;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A completion queue ({@code ib_create_cq}): where work completions of the queue pairs that use it
 * arrive. It counts the QPs that use it; destroying it while any does fails with {@link Errno#EBUSY}.
 *
 * <p>Threads: completions are added by whichever thread executes a QP that completes here and
 * taken by pollers; a short lock of the CQ's own orders both, so CQs of independent connections
 * never wait on each other.
 */
public final class CompletionQueue extends CountedResource implements AutoCloseable {
    private final int depth;
    /** Preallocated entries; head/tail count polls and pushes. Guarded by {@link #lock}. */
    private final WorkCompletion[] ring;
    private final ReentrantLock lock = new ReentrantLock();
    private long head;
    private long tail;
    private volatile boolean overrun;
    /** What the provider sees of this CQ. */
    final Context context = new Context();
    /** The provider's half (set once, at creation). */
    ProviderCq provider;

    CompletionQueue(RdmaDevice device, int depth) {
        super(device, "CompletionQueue", null);
        this.depth = depth;
        this.ring = new WorkCompletion[depth];
        for (int i = 0; i < depth; i++) {
            ring[i] = new WorkCompletion();
        }
    }

    /**
     * Progresses the work that completes on this CQ (on soft: executes the queue pairs whose
     * requests complete here, and nothing else), then moves up to {@code out.length} completions
     * into the caller's array ({@code ib_poll_cq}). Each completion polled frees its request's slot
     * in its queue, and the slots of the unsignaled requests before it in the same send queue
     * ({@link QueuePair#outstandingSends()}). Allocates nothing.
     *
     * @return how many entries of {@code out} were filled, oldest first
     * @throws RdmaException {@link Errno#EBADF} if the CQ was destroyed
     */
    public int poll(WorkCompletion[] out) {
        checkAlive("poll");
        provider.progress();
        int n = 0;
        lock.lock();
        try {
            while (n < out.length && head != tail) {
                copy(ring[(int) (head % depth)], out[n++]);
                head++;
            }
        } finally {
            lock.unlock();
        }
        // Polling frees each request's queue slot (and those of the unsignaled ones before it).
        for (int i = 0; i < n; i++) {
            WorkCompletion wc = out[i];
            wc.qp.retire(wc.fromRecvQueue, wc.queueSeq);
        }
        return n;
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
        to.fromRecvQueue = from.fromRecvQueue;
        to.queueSeq = from.queueSeq;
    }

    /** Adds a completion; false when the CQ is full (an overrun: the caller moves the QP to the error state). */
    boolean push(QueuePair qp, boolean recv, long seq, long wrId, WcStatus status, Opcode op, long bytes,
                 boolean withImm, int imm, boolean withInv, int invRkey) {
        lock.lock();
        try {
            if (tail - head == depth) {
                overrun = true;
                return false;
            }
            WorkCompletion wc = ring[(int) (tail % depth)];
            wc.qp = qp;
            wc.fromRecvQueue = recv;
            wc.queueSeq = seq;
            wc.wrId = wrId;
            wc.status = status;
            wc.opcode = op;
            wc.byteLen = bytes;
            wc.withImm = withImm;
            wc.immData = withImm ? imm : 0;
            wc.withInv = withInv;
            wc.invalidatedRkey = withInv ? invRkey : 0;
            tail++;
            return true;
        } finally {
            lock.unlock();
        }
    }

    /** True once a completion was lost because the CQ was full (the QP then went to the error state). */
    public boolean overrun() {
        return overrun;
    }

    /** Completions waiting to be polled (progresses nothing). */
    public int pending() {
        lock.lock();
        try {
            return (int) (tail - head);
        } finally {
            lock.unlock();
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
            provider.destroy();
        }
    }

    /** The CQ as its provider sees it. */
    final class Context implements CqContext {
        private volatile Object attachment;

        @Override
        public CompletionQueue completionQueue() {
            return CompletionQueue.this;
        }

        @Override
        public Object attachment() {
            return attachment;
        }

        @Override
        public void attach(Object state) {
            attachment = state;
        }
    }
}
