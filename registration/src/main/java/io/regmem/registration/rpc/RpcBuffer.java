package io.regmem.registration.rpc;

import io.regmem.core.BufferPool;
import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.DmaDirection;
import io.regmem.registration.ProtectionDomain;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Consumer;

/**
 * The buffer pools of an RPC-over-RDMA transport ({@code struct rpcrdma_buffer}): preallocated
 * requests with their header, send and receive buffers; reply buffers made on demand; and the
 * send-context ring.
 *
 * <ul>
 * <li>Free requests: a bounded lock-free MPMC queue (JCTools {@code MpmcArrayQueue}); {@link #get()}
 * and {@link #put(Req)} from any thread, each request owned by at most one RPC (compare-and-set).</li>
 * <li>Free replies: a lock-free queue any thread pushes to ({@link #repPut}) and one thread at a time
 * pops from ({@link #repGet}, the receive poster) — JCTools {@code MpscArrayQueue}, the kernel's
 * lock-less stack with serialized pops.</li>
 * <li>The list of all requests: added to at creation; removed from only by {@link #destroyReq},
 * which requires the transport's {@link SendLock}, as in the kernel (the list is protected by that
 * lock, not by the pool's).</li>
 * </ul>
 * Sizes: {@code maxRequests} in [4, 16384] (default 128); replies at most {@code maxRequests + 40}
 * (32 backchannel, a batch of 7, 1 drain); the ring {@code maxRequests + 2} slots.
 */
public final class RpcBuffer {
    /** Replies beyond maxRequests: 32 backchannel requests, a receive batch of 7, one for drain. */
    public static final int EXTRA_REPS = 32 + 7 + 1;

    private final ProtectionDomain pd;
    private final BufferPool pool;
    private final int maxRequests;
    private final long inlineSend;
    private final long inlineRecv;
    private final long headerSize;
    private final FreeLists free;
    private final CopyOnWriteArrayList<Req> allReqs = new CopyOnWriteArrayList<>();
    private final List<Rep> allReps = new ArrayList<>(); // appended by the one rep popper; read at destroy
    /** Reps by id, for completions (written at creation under the lock; posting orders it for the handler). */
    private final Rep[] repsById;
    private final SendCtxRing ring;
    /** Who handles completions for this buffer's transport now (one transport per buffer). */
    private final PollRole pollRole = new PollRole(this);
    /** What a released send context does (the transport sets it: drop the request's send reference). */
    private volatile Consumer<SendCtx> releaseHook;
    /** Request numbers of destroyed requests, for new ones (numbers stay below maxRequests). Guarded by this. */
    private final ArrayDeque<Integer> freeIds = new ArrayDeque<>();
    private int nextReqId;
    private volatile boolean destroyed;

    private RpcBuffer(Builder b) {
        this.pd = b.pd;
        this.pool = b.pool;
        this.maxRequests = b.maxRequests;
        this.inlineSend = b.inlineSend;
        this.inlineRecv = b.inlineRecv;
        // next power of two >= 4 x (fixed header words + 3 + maxRdmaSegs x read-segment words), in bytes
        this.headerSize = Long.highestOneBit(Math.max(64, 4L * (7 + 3 + b.maxRdmaSegs * 6L)) * 2 - 1);
        this.free = new FreeLists(maxRequests, maxRequests + EXTRA_REPS);
        this.repsById = new Rep[maxRequests + EXTRA_REPS];
        this.releaseHook = b.onRelease;
        this.ring = new SendCtxRing(maxRequests, b.maxSendSge, sc -> {
            Consumer<SendCtx> hook = releaseHook;
            if (hook != null) {
                hook.accept(sc);
            }
        }, b.onSpace);
        try {
            for (int i = 0; i < maxRequests; i++) {
                Req req = createReq();
                free.addFree(req);
            }
        } catch (RuntimeException e) {
            for (Req r : allReqs) {
                freeBuffers(r);
            }
            throw e;
        }
    }

    /** A builder for the buffers of a transport over {@code pd}, taking memory from {@code pool}. */
    public static Builder builder(ProtectionDomain pd, BufferPool pool) {
        return new Builder(pd, pool);
    }

    // ---- requests --------------------------------------------------------------------------------

    /**
     * Makes one more request with its three buffers ({@code rpcrdma_req_create}) and adds it to the
     * list of all requests; it is owned by the caller, and on the free list only once {@link #put}.
     * At most {@code maxRequests} requests exist at a time; a destroyed request's number is reused.
     *
     * @throws RdmaException {@link Errno#ENOMEM} when {@code maxRequests} requests exist, or the pool
     *                       cannot supply the buffers (nothing is kept)
     */
    public synchronized Req createReq() {
        checkLive("createReq");
        if (freeIds.isEmpty() && nextReqId == maxRequests) {
            throw new RdmaException(Errno.ENOMEM, "RpcBuffer.createReq: all " + maxRequests
                    + " requests exist (maxRequests); destroy one first");
        }
        RegBuf header = RegBuf.alloc(pool, headerSize, DmaDirection.TO_DEVICE);
        RegBuf send = null;
        try {
            send = RegBuf.alloc(pool, inlineSend, DmaDirection.TO_DEVICE);
            RegBuf recv = RegBuf.alloc(pool, inlineRecv, DmaDirection.NONE);
            Req req = new Req(this, freeIds.isEmpty() ? nextReqId++ : freeIds.pollFirst(), header, send, recv);
            allReqs.add(req);
            free.addOwned(req);
            return req;
        } catch (RuntimeException e) {
            header.free();
            RegBuf.free(send);
            throw e;
        }
    }

    /**
     * Prepares a request for a new connection ({@code rpcrdma_req_setup}): maps its header buffer.
     *
     * @return false if the device refused the mapping (the connection attempt fails)
     */
    public boolean setupReq(Req req) {
        return req.header.dmaMap(pd);
    }

    /** Takes a free request ({@code rpcrdma_buffer_get}), or null when all are in use (the RPC waits). */
    public Req get() {
        return free.get();
    }

    /**
     * Gives a request back ({@code rpcrdma_buffer_put}): its reply, if any, goes back to the free
     * replies first.
     *
     * @throws RdmaException {@link Errno#EINVAL} for a request not owned (put twice, of another
     *                       buffer, destroyed): nothing changes
     */
    public void put(Req req) {
        if (req == null || req.buffer != this || req.state() != Req.OWNED) {
            throw new RdmaException(Errno.EINVAL, "RpcBuffer.put: " + req + " is not owned by an RPC of this buffer");
        }
        Rep rep = req.reply;
        req.reply = null;
        if (rep != null) {
            repPut(rep);
        }
        if (!free.release(req)) {
            // Only a put racing another put of the same request gets here: the other one freed it.
            throw new RdmaException(Errno.EINVAL, "RpcBuffer.put: " + req + " was put back twice at once");
        }
    }

    /**
     * Destroys a request ({@code rpcrdma_req_destroy}): takes it off the list of all requests and
     * frees its buffers. The list is protected by the transport's send lock, so the caller must hold it.
     *
     * @throws RdmaException {@link Errno#EPERM} without {@code sendLock} held by this thread, and
     *                       {@link Errno#EINVAL} for a request of another buffer or one still on the
     *                       free list: nothing changes then
     */
    public void destroyReq(Req req, SendLock sendLock) {
        if (sendLock == null || !sendLock.isHeldByCurrentThread()) {
            throw new RdmaException(Errno.EPERM, "RpcBuffer.destroyReq: " + req + ": the list of all requests is "
                    + "protected by the transport's send lock; hold it to destroy a request");
        }
        if (req == null || req.buffer != this || !allReqs.contains(req) || req.state() != Req.OWNED) {
            throw new RdmaException(Errno.EINVAL, "RpcBuffer.destroyReq: " + req + " is not an owned request of this "
                    + "buffer (take it with get() first)");
        }
        allReqs.remove(req);
        req.destroy();
        synchronized (this) {
            free.forget(req);
            freeIds.addLast(req.id);
        }
        if (req.reply != null) {
            repPut(req.reply);
            req.reply = null;
        }
        freeBuffers(req);
    }

    private static void freeBuffers(Req req) {
        req.header.free();
        req.send.free();
        req.recv.free();
    }

    // ---- replies ---------------------------------------------------------------------------------

    /**
     * Takes a free reply, making one if none is free and fewer than {@code maxRequests + 40} exist;
     * null otherwise. One caller at a time (the receive poster), as the kernel serializes pops.
     *
     * @throws RdmaException {@link Errno#EBUSY} if another thread is taking replies right now
     */
    public Rep repGet() {
        Rep rep = free.pop();
        if (rep != null) {
            return rep;
        }
        synchronized (this) {
            if (destroyed || allReps.size() == maxRequests + EXTRA_REPS) {
                return null;
            }
            rep = new Rep(allReps.size(), RegBuf.alloc(pool, inlineRecv, DmaDirection.FROM_DEVICE));
            allReps.add(rep);
            repsById[rep.id] = rep;
            free.addRep(rep); // starts taken
        }
        return rep;
    }

    /**
     * Gives a reply back to the free replies ({@code rpcrdma_rep_put}); any thread.
     *
     * @throws RdmaException {@link Errno#EINVAL} for a reply already free or of another buffer
     */
    public void repPut(Rep rep) {
        if (rep == null || !free.push(rep)) {
            throw new RdmaException(Errno.EINVAL, "RpcBuffer.repPut: " + rep + " is already free (or destroyed)");
        }
    }

    /** Sets what the ring does with each send context it releases (one transport per buffer). */
    void onSendReleased(Consumer<SendCtx> hook) {
        this.releaseHook = hook;
    }

    /** The poll role of the transport over this buffer. */
    PollRole pollRole() {
        return pollRole;
    }

    /** The rep with this id, or null. */
    Rep rep(int id) {
        return id >= 0 && id < repsById.length ? repsById[id] : null;
    }

    /** Runs {@code action} for every request that exists. */
    public void forEachReq(Consumer<Req> action) {
        allReqs.forEach(action);
    }

    /** Runs {@code action} for every reply made so far. */
    public synchronized void forEachRep(Consumer<Rep> action) {
        allReps.forEach(action);
    }

    // ---- teardown --------------------------------------------------------------------------------

    /**
     * Frees every reply and every free request ({@code rpcrdma_buffer_destroy}); call after the
     * queue pair is drained. Requests still owned by RPCs are not freed: they are reported.
     *
     * <p>If a thread is handling completions of this buffer's transport, destroy first waits for
     * its batch to end and keeps it out meanwhile (the transport's polls return 0), so no handler
     * is reading a reply whose memory goes back to the pool: the grace period of the kernel's
     * drain before {@code rpcrdma_buffer_destroy}.
     *
     * @return the requests that were still checked out (empty when everything came back)
     * @throws RdmaException {@link Errno#EBUSY}, having changed nothing, from inside a completion
     *                       handler of the transport, or if a poller stayed in its batch for 10 s
     */
    public List<Req> destroy() {
        pollRole.await(); // a grace period: no completion handler is using a reply's memory from here on
        try {
            return destroyHeld();
        } finally {
            pollRole.release();
        }
    }

    private synchronized List<Req> destroyHeld() {
        if (destroyed) {
            return List.of();
        }
        destroyed = true;
        List<Req> leaked = new ArrayList<>();
        for (Req req : allReqs) {
            if (free.claimFree(req)) {
                req.destroy();
                freeBuffers(req);
            } else if (req.state() == Req.OWNED) {
                leaked.add(req);
            }
        }
        allReqs.removeIf(r -> r.state() == Req.DESTROYED);
        for (Rep rep : allReps) {
            if (rep.state() != Rep.ATTACHED || rep.owner == null || rep.owner.state() != Req.OWNED) {
                rep.destroy();
                rep.buffer.free();
            }
        }
        free.clear();
        return leaked;
    }

    private void checkLive(String who) {
        if (destroyed) {
            throw new RdmaException(Errno.EBADF, "RpcBuffer." + who + ": the buffer was destroyed");
        }
    }

    // ---- accessors -------------------------------------------------------------------------------

    /** The send-context ring. */
    public SendCtxRing ring() {
        return ring;
    }

    /** The protection domain the buffers map for. */
    public ProtectionDomain pd() {
        return pd;
    }

    /** The request limit. */
    public int maxRequests() {
        return maxRequests;
    }

    /** Requests on the free list now. */
    public int freeRequests() {
        return free.freeRequests();
    }

    /** Requests that exist (free or owned). */
    public int requests() {
        return allReqs.size();
    }

    /** Replies made so far. */
    public synchronized int replies() {
        return allReps.size();
    }

    /** Replies on the free stack now. */
    public int freeReplies() {
        return free.freeReplies();
    }

    /** The header buffer size. */
    public long headerSize() {
        return headerSize;
    }

    @Override
    public String toString() {
        return "RpcBuffer[" + maxRequests + " requests, " + freeRequests() + " free]";
    }

    /** Settings; defaults: 128 requests, 2048-byte inline send and receive buffers, 8 RDMA segments, 3 SGEs. */
    public static final class Builder {
        private final ProtectionDomain pd;
        private final BufferPool pool;
        private int maxRequests = 128;
        private long inlineSend = 2048;
        private long inlineRecv = 2048;
        private int maxRdmaSegs = 8;
        private int maxSendSge = 3;
        private Consumer<SendCtx> onRelease;
        private Runnable onSpace;

        private Builder(ProtectionDomain pd, BufferPool pool) {
            this.pd = pd;
            this.pool = pool;
        }

        /** Requests, in [4, 16384]. */
        public Builder maxRequests(int n) {
            this.maxRequests = n;
            return this;
        }

        /** Bytes of each request's send buffer and receive buffer, and of each reply buffer. */
        public Builder inline(long send, long recv) {
            this.inlineSend = send;
            this.inlineRecv = recv;
            return this;
        }

        /** RDMA segments a header may describe (sizes the header buffer). */
        public Builder maxRdmaSegs(int n) {
            this.maxRdmaSegs = n;
            return this;
        }

        /** SGEs per Send, at least 3 (header, send buffer, one page). */
        public Builder maxSendSge(int n) {
            this.maxSendSge = n;
            return this;
        }

        /** The send-context ring's release and space hooks (see {@link SendCtxRing}). */
        public Builder sendCtxHooks(Consumer<SendCtx> release, Runnable space) {
            this.onRelease = release;
            this.onSpace = space;
            return this;
        }

        /**
         * Creates the buffers and the requests.
         *
         * @throws RdmaException {@link Errno#EINVAL} for limits out of range; {@link Errno#ENOMEM} when
         *                       the pool cannot supply the requests' buffers (nothing is kept)
         */
        public RpcBuffer build() {
            if (pd == null || pool == null || maxRequests < 4 || maxRequests > 16384 || inlineSend < 1 || inlineRecv < 1
                    || maxRdmaSegs < 1 || maxSendSge < 3) {
                throw new RdmaException(Errno.EINVAL, "RpcBuffer: maxRequests " + maxRequests + " must be in [4, 16384], "
                        + "inline sizes and maxRdmaSegs positive, maxSendSge at least 3, a PD and a pool given");
            }
            return new RpcBuffer(this);
        }
    }
}
