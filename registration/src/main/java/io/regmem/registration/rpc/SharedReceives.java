package io.regmem.registration.rpc;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.SharedReceiveQueue;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * One receive pool for many RPC connections: a {@link SharedReceiveQueue} kept filled with replies
 * from one {@link RpcBuffer}, so a server with hundreds of connections posts receives once, not per
 * connection. Each connection's queue pair is created with {@code QpInitAttributes.srq(srq())} and its
 * transport with this object ({@link RpcTransport#RpcTransport(io.regmem.registration.QueuePair,
 * io.regmem.registration.CompletionQueue, RpcBuffer, SharedReceives, SendLock, RpcTransport.Handler,
 * int, int)}): a call arriving on any connection takes the oldest posted reply, and its handler gets a
 * rep of {@link #buffer()}, which it gives back there ({@code buffer().repPut(rep)}).
 *
 * <p>{@link #replenish()} tops the queue up to its depth (any transport's {@code postRecvs} calls it;
 * one poster at a time, others leave at once). The queue's limit is armed at a quarter of the depth
 * after each refill, so a thread waiting on the device's asynchronous events sees
 * {@code SRQ_LIMIT_REACHED} when the connections are eating the receives faster than they are posted.
 *
 * <p>A connection's failure or flush ends only the receive its QP had taken; the others stay posted
 * for the remaining connections. {@link #close()} (after every QP using it was destroyed) destroys
 * the SRQ and gives the replies still posted back to the buffer, unmapped.
 */
public final class SharedReceives implements AutoCloseable {
    private final RpcBuffer buffer;
    private final int depth;
    private final SharedReceiveQueue srq;
    private final RepChain chain;
    private final AtomicInteger poster = new AtomicInteger();
    /** Receives posted and not yet completed (or flushed). */
    private final AtomicInteger posted = new AtomicInteger();
    private volatile boolean closed;

    /**
     * A shared receive queue of {@code depth} receives on {@code buffer}'s PD, not yet filled (call
     * {@link #replenish()}).
     *
     * @param depth receives kept posted, in [1, buffer.maxRequests() + RpcBuffer.EXTRA_REPS] (the
     *              replies the buffer may make)
     * @throws RdmaException {@link Errno#EINVAL} for a depth out of range or beyond the device's limits
     */
    public SharedReceives(RpcBuffer buffer, int depth) {
        int most = buffer.maxRequests() + RpcBuffer.EXTRA_REPS;
        if (depth < 1 || depth > most) {
            throw new RdmaException(Errno.EINVAL, "SharedReceives: depth " + depth + " is outside [1, " + most
                    + "] (the replies " + buffer + " may make)");
        }
        this.buffer = buffer;
        this.depth = depth;
        ProtectionDomain pd = buffer.pd();
        this.srq = pd.createSrq(depth, 1);
        this.chain = new RepChain(buffer, depth, srq::postRecv);
    }

    /**
     * Posts replies until {@link #depth()} receives are posted, in one chain, and arms the queue's
     * limit. One poster at a time: a caller finding another inside leaves at once. Replies that cannot
     * be mapped, or that a refused post did not take, go back to the buffer.
     *
     * @return receives posted by this call (0 also when another thread is posting, or once closed)
     */
    public int replenish() {
        if (closed || posted.get() >= depth || !poster.compareAndSet(0, 1)) {
            return 0;
        }
        try {
            int n = chain.post(depth - posted.get());
            if (n > 0) {
                posted.addAndGet(n);
                srq.armLimit(Math.max(1, depth / 4));
            }
            return n;
        } finally {
            poster.set(0);
        }
    }

    /** A receive of this pool completed (or was flushed) on one of its connections. */
    void completed() {
        posted.decrementAndGet();
    }

    /** Receives posted and not yet completed. */
    public int posted() {
        return posted.get();
    }

    /** Receives kept posted. */
    public int depth() {
        return depth;
    }

    /** The shared receive queue: create each connection's QP with {@code QpInitAttributes.srq(srq())}. */
    public SharedReceiveQueue srq() {
        return srq;
    }

    /** The buffer the replies come from: a handler gives a received rep back here. */
    public RpcBuffer buffer() {
        return buffer;
    }

    /**
     * Destroys the shared receive queue and gives the replies still posted back to the buffer,
     * unmapped. A second close does nothing.
     *
     * @throws RdmaException {@link Errno#EBUSY} while queue pairs use the SRQ (nothing changes)
     */
    @Override
    public void close() {
        synchronized (this) {
            if (closed) {
                return;
            }
            srq.close(); // EBUSY while a QP uses it: nothing changed
            closed = true;
        }
        while (!poster.compareAndSet(0, 1)) {
            Thread.onSpinWait(); // a replenish that started before the close is ending
        }
        buffer.forEachRep(rep -> {
            if (rep.isPosted()) {
                rep.buffer.unmap();
                buffer.repPut(rep);
                posted.decrementAndGet();
            }
        });
    }

    @Override
    public String toString() {
        return "SharedReceives[" + srq + ", " + posted.get() + " of " + depth + " posted]";
    }
}
