package io.regmem.registration.rpc;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.QueuePair;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * One end of an RPC-over-RDMA connection ({@code struct rpcrdma_xprt} with its endpoint): a connected
 * queue pair, the {@link RpcBuffer} pools, the receive posting with credits, the Send path through
 * the send-context ring, the completion handlers, the FRWR MR pool, and the flush at disconnect.
 *
 * <p>Work-request ids carry generations: a Send's is its send context's ({@link SendCtx#wrId()}), a
 * receive's is the rep's number and posting generation with the top bit set. A completion whose
 * generation is not the current one is stale (duplicated or for an earlier user of the slot): it is
 * counted and dropped, never applied.
 *
 * <p>Threads: one sender at a time (it holds the {@link SendLock}); completions are handled by whoever
 * calls {@link #poll}, one thread at a time (the poll role: a second thread finding it taken leaves
 * at once, as a CQ has one handler); {@link #postRecvs} lets one poster in at a time. A buffer, send
 * context or MR the device may still touch goes back to its pool only after its completion or flush.
 * {@link #flushDisconnect} takes the poll role before it drains, so a poller thread is never inside
 * a completion handler while the flush unmaps and destroys what the handler may be using: the flush
 * waits for the poller's batch to end (a grace period), then handles the flushed completions itself.
 * Do not wait for completions while holding the send lock (the flush takes the poll role, then the
 * send lock).
 */
public final class RpcTransport {
    /** Receives beyond the credits asked for, posted in the same batch. */
    public static final int RECV_BATCH = 7;
    private static final long RECV_TAG = 1L << 63;
    /**
     * Work-request ids with this bit set belong to the user's own work on the queue pair (RDMA READ
     * and WRITE of chunks through rw contexts): their completions go to {@link Handler#rwCompleted}.
     */
    public static final long USER_TAG = 1L << 62;

    /** What the transport tells its user. */
    public interface Handler {
        /** A reply (or, on the server, a call) arrived in {@code rep}: {@code bytes} long. The handler owns the rep. */
        void received(Rep rep, long bytes);

        /**
         * Nothing can touch {@code req}'s buffers any more: its reply was handled ({@link
         * RpcTransport#replyDone}), or, for a message with no reply, its Send's completion (or flush)
         * released it. The RPC may complete (put the request back).
         */
        default void completed(Req req) {
        }

        /** A completion of the user's own work (id with {@link #USER_TAG}, here without it). */
        default void rwCompleted(long id, WcStatus status) {
        }

        /** The connection failed (a completion with an error); called once. */
        default void disconnected(WcStatus cause) {
        }

        /**
         * {@code req}'s RPC can never complete: the connection was flushed ({@link
         * RpcTransport#flushDisconnect}) before its reply (or, for a message with no reply, its Send's
         * completion) arrived. Nothing can touch its buffers any more; its MRs were destroyed with the
         * transport's. Called once per such request, after the flushed completions were handled. By
         * default the request is handed to {@link #completed}; override to tell the two apart (put the
         * request back, and fail the RPC).
         */
        default void aborted(Req req) {
            completed(req);
        }
    }

    private final QueuePair qp;
    private final CompletionQueue cq;
    private final RpcBuffer buffer;
    private final SendLock sendLock;
    private final Handler handler;
    private final int maxRequests;
    private final RepChain chain;
    private final WorkCompletion[] wcs = new WorkCompletion[32];
    private final AtomicInteger receiving = new AtomicInteger();
    private final AtomicInteger receiveCount = new AtomicInteger();
    private final AtomicBoolean disconnected = new AtomicBoolean();
    private final PollRole pollRole;
    private volatile boolean connected = true;
    private long staleCompletions;
    private long flushed;
    private final FrwrMrs mrs;
    /** The Send path (the send lock held). */
    private final RpcSender sender;
    /** The receive pool shared with other connections, or null: this transport posts its own. */
    private final SharedReceives shared;
    /** Where received reps come from: the shared pool's buffer, or {@link #buffer}. */
    private final RpcBuffer replies;

    /**
     * @param qp      a connected queue pair whose send and receive completions both go to {@code cq}
     * @param buffer  the transport's pools (its requests are set up here: header buffers mapped)
     * @param mrPages pages per FRWR MR
     * @param maxRdmaSegs MRs made per refresh
     * @throws RdmaException {@link Errno#EIO} if a header buffer cannot be mapped (the connection fails)
     */
    public RpcTransport(QueuePair qp, CompletionQueue cq, RpcBuffer buffer, SendLock sendLock, Handler handler,
                        int mrPages, int maxRdmaSegs) {
        this(qp, cq, buffer, null, sendLock, handler, mrPages, maxRdmaSegs);
    }

    /**
     * A transport whose receives come from {@code shared}, a pool serving many connections: the QP
     * must have been created with {@code QpInitAttributes.srq(shared.srq())}. {@link #postRecvs} tops
     * the shared queue up; a received rep is of {@code shared.buffer()} (give it back there).
     *
     * @param shared the shared receives, or null for receives of this transport's own
     * @throws RdmaException {@link Errno#EINVAL} if the QP does not take its receives from
     *                       {@code shared}'s SRQ (nothing is set up); as the other constructor
     */
    public RpcTransport(QueuePair qp, CompletionQueue cq, RpcBuffer buffer, SharedReceives shared, SendLock sendLock,
                        Handler handler, int mrPages, int maxRdmaSegs) {
        if (shared != null && qp.srq() != shared.srq()) {
            throw new RdmaException(Errno.EINVAL, "RpcTransport: " + qp + " takes its receives from "
                    + (qp.srq() == null ? "its own queue" : qp.srq()) + ", not " + shared
                    + "; create it with QpInitAttributes.srq(shared.srq())");
        }
        if (shared != null && buffer == shared.buffer()) {
            throw new RdmaException(Errno.EINVAL, "RpcTransport: " + buffer + " is the shared receives' buffer; give the "
                    + "transport a buffer of its own for its requests");
        }
        this.shared = shared;
        this.replies = shared == null ? buffer : shared.buffer();
        this.qp = qp;
        this.cq = cq;
        this.buffer = buffer;
        this.sendLock = sendLock;
        this.handler = handler;
        this.maxRequests = buffer.maxRequests();
        this.mrs = new FrwrMrs(buffer, mrPages, maxRdmaSegs);
        this.pollRole = buffer.pollRole();
        this.chain = new RepChain(buffer, maxRequests + RECV_BATCH + 1, qp::postRecv);
        this.sender = new RpcSender(this, qp, buffer, sendLock);
        for (int i = 0; i < wcs.length; i++) {
            wcs[i] = new WorkCompletion();
        }
        buffer.onSendReleased(sc -> {
            if (sc.holdsRef && sc.owner() instanceof Req req) {
                release(req);
            }
        });
        List<Req> taken = new ArrayList<>();
        try {
            for (Req r = buffer.get(); r != null; r = buffer.get()) {
                taken.add(r);
                if (!buffer.setupReq(r)) {
                    throw new RdmaException(Errno.EIO, this + ": cannot map " + r + "'s header buffer; connection failed");
                }
            }
        } finally {
            taken.forEach(buffer::put);
        }
    }

    // ---- receives --------------------------------------------------------------------------------

    /**
     * Makes sure at least {@code needed + 1} receives are posted ({@code rpcrdma_post_recvs}): if
     * fewer than {@code needed} are, posts {@code needed - posted + 7} more in one chain. With shared
     * receives, tops the shared queue up to its depth instead ({@link SharedReceives#replenish()}). One poster at
     * a time: a caller finding another inside leaves at once. Replies that cannot be mapped, or that a
     * failed post did not take, go back to the free stack.
     *
     * @param needed credits (clamped to [1, maxRequests])
     * @return receives posted by this call
     */
    public int postRecvs(int needed) {
        if (shared != null) {
            return connected ? shared.replenish() : 0;
        }
        int want = Math.max(1, Math.min(needed, maxRequests));
        if (!connected || receiveCount.get() > want) {
            return 0;
        }
        if (receiving.incrementAndGet() != 1) {
            receiving.decrementAndGet();
            return 0;
        }
        try {
            int n = chain.post(want - receiveCount.get() + RECV_BATCH);
            receiveCount.addAndGet(n);
            return n;
        } finally {
            receiving.decrementAndGet();
        }
    }

    // ---- sends -----------------------------------------------------------------------------------

    /**
     * Sends {@code req}'s header ({@code headerBytes}) and, if {@code sendBytes > 0}, its send buffer
     * in one Send, with the caller's sendLock held. The send buffer is mapped on first use. A
     * Send of at most the QP's {@code maxInlineData} bytes (header and send buffer together) goes
     * inline: copied at post, no key resolved.
     *
     * @param expectReply a call (the RPC completes at {@link #replyDone}: the reply proves the Send was
     *                    received) or a message with no reply (it completes when its signaled Send's
     *                    completion releases it): see {@link Handler#completed}
     * @return false when the send-context ring is full (wait for its space hook, then retry)
     * @throws RdmaException {@link Errno#EPERM} without the send lock; {@link Errno#EIO} if the send
     *                       buffer cannot be mapped or the QP refuses the post (the slot is given back)
     */
    public boolean send(Req req, long headerBytes, long sendBytes, boolean expectReply) {
        return send(req, headerBytes, sendBytes, expectReply, null);
    }

    /**
     * {@link #send(Req, long, long, boolean)} with work requests posted in front of the Send in the
     * same chain, typically the REG_MRs of the call's chunks ({@code frwr_map} + {@code frwr_send}):
     * the Send cannot overtake them, so the peer never sees a key before it is valid. The chain's
     * WRs are unsignaled and count against the signaling budget.
     *
     * @param before the first of the WRs to post first (their {@code next} links them), or null
     */
    public boolean send(Req req, long headerBytes, long sendBytes, boolean expectReply, WorkRequest before) {
        return sender.send(req, headerBytes, sendBytes, expectReply, before);
    }

    /**
     * The reply to {@code req} was handled: the RPC completes ({@link Handler#completed}).
     *
     * @throws RdmaException {@link Errno#EINVAL} for a request that waits for no reply (not sent as a
     *                       call, done already, or ended by {@link #flushDisconnect}): nothing changes
     */
    public void replyDone(Req req) {
        if (req == null || !release(req)) {
            throw new RdmaException(Errno.EINVAL, this + ": replyDone(" + req + "): the request waits for no reply "
                    + "(replyDone twice, never sent as a call, or ended by a flush)");
        }
    }

    /** Drops one reference of {@code req}; the last one completes the RPC. False if it held none. */
    private boolean release(Req req) {
        int r;
        do {
            r = req.refs.get();
            if (r <= 0) {
                return false;
            }
        } while (!req.refs.compareAndSet(r, r - 1));
        if (r == 1) {
            handler.completed(req);
        }
        return true;
    }

    // ---- completions -----------------------------------------------------------------------------

    /**
     * Handles what the completion queue holds ({@code rpcrdma_wc_send}, {@code rpcrdma_wc_receive}):
     * Send completions sweep the ring; receive completions go to the handler (or, flushed or failed,
     * back to the free stack). An error completion disconnects the transport once. One thread at a
     * time: a caller finding another thread polling returns 0 at once.
     *
     * @return completions handled (0 also when another thread holds the poll role)
     * @throws RdmaException {@link Errno#EBUSY} when called from inside one of this transport's handlers
     */
    public int poll() {
        if (!pollRole.tryTake()) {
            return 0; // another thread is handling completions: it will handle these too
        }
        try {
            return pollHeld();
        } finally {
            pollRole.release();
        }
    }

    /** Drains the CQ; the caller holds the poll role. */
    private int pollHeld() {
        int total = 0;
        int n;
        while ((n = cq.poll(wcs)) > 0) {
            for (int i = 0; i < n; i++) {
                WorkCompletion wc = wcs[i];
                handle(wc.wrId(), wc.status(), wc.byteLen());
            }
            total += n;
        }
        return total;
    }

    /** One completion (package-private so tests can replay a duplicated or stale one). */
    void handle(long wrId, WcStatus status, long byteLen) {
        if ((wrId & RECV_TAG) != 0) {
            wcReceive(wrId, status, byteLen);
        } else if ((wrId & USER_TAG) != 0) {
            if (status != WcStatus.SUCCESS) {
                flushed += status == WcStatus.WR_FLUSH_ERR ? 1 : 0;
                fail(status);
            }
            handler.rwCompleted(wrId & ~USER_TAG, status);
        } else {
            wcSend(wrId, status);
        }
    }

    private void wcSend(long wrId, WcStatus status) {
        // Swept whatever the status: a flushed Send's slot is released too.
        if (!buffer.ring().complete(wrId)) {
            return; // stale or duplicated (the ring counts it): it says nothing about the connection
        }
        if (status != WcStatus.SUCCESS) {
            flushed += status == WcStatus.WR_FLUSH_ERR ? 1 : 0;
            fail(status);
        }
    }

    private void wcReceive(long wrId, WcStatus status, long byteLen) {
        long id = wrId & ~RECV_TAG;
        Rep rep = replies.rep((int) id);
        if (rep == null || !namesPosting(wrId, rep) || !rep.isPosted()) {
            staleCompletions++;
            return;
        }
        if (shared != null) {
            shared.completed();
        } else {
            receiveCount.decrementAndGet();
        }
        if (status != WcStatus.SUCCESS) {
            flushed += status == WcStatus.WR_FLUSH_ERR ? 1 : 0;
            replies.repPut(rep);
            fail(status);
            return;
        }
        rep.byteLen = byteLen;
        rep.buffer.syncForCpu(byteLen);
        rep.move(Rep.POSTED, Rep.ATTACHED); // the handler owns it now: a late duplicate of this completion is stale
        handler.received(rep, byteLen);
    }

    /** The work-request id of a rep's current posting: the tag, the posting generation (31 bits), the rep's number. */
    static long recvWrId(Rep rep) {
        return RECV_TAG | ((long) rep.generation << 32) | rep.id;
    }

    /** Whether a receive completion's id names {@code rep}'s current posting. */
    static boolean namesPosting(long wrId, Rep rep) {
        return (int) ((wrId & ~RECV_TAG) >>> 32) == rep.generation;
    }

    private void fail(WcStatus cause) {
        connected = false;
        if (disconnected.compareAndSet(false, true) && cause != WcStatus.WR_FLUSH_ERR) {
            handler.disconnected(cause);
        }
    }

    // ---- FRWR MRs ------------------------------------------------------------------------------

    /**
     * An MR for registering a chunk ({@code rpcrdma_mr_get}): the request's own cache first, then the
     * shared list; when both are empty a refresh is made (while connected) and null returned (EAGAIN:
     * the caller retries).
     */
    public MemoryRegion mrGet(Req req) {
        return mrs.get(req, connected);
    }

    /**
     * Gives an MR back to the request's cache (after its LOCAL_INV completed, or it was never posted).
     * An MR the transport already destroyed ({@link #flushDisconnect}) is dropped.
     *
     * @throws RdmaException {@link Errno#EINVAL} for a null request or MR, or an MR this transport
     *                       did not make: nothing changes
     */
    public void mrPut(Req req, MemoryRegion mr) {
        mrs.put(req, mr);
    }

    /** Makes up to {@code maxRdmaSegs} more MRs ({@code rpcrdma_mrs_refresh}); a no-op unless connected. */
    public void mrsRefresh() {
        mrs.refresh(connected);
    }

    /**
     * Destroys every MR ({@code rpcrdma_mrs_destroy}), those in requests' caches too (their state
     * after a disconnect is unknown, so they are not reused).
     */
    public void mrsDestroy() {
        mrs.destroy();
    }

    // ---- disconnect ------------------------------------------------------------------------------

    /**
     * Tears the connection's state down ({@code rpcrdma_xprt_disconnect} and its flush): drains the
     * queue pair so every posted receive and Send completes (flushed), handles those completions
     * (reps back to the free stack, the ring swept), unmaps every regbuf, drops replies attached to
     * requests, destroys the MRs and resets the ring, holding the send lock so that no Send is being
     * prepared meanwhile. Afterwards (invariant 16): no regbuf mapped, no send context outstanding,
     * no MR on any list, nothing posted.
     *
     * <p>If another thread is polling, the flush first waits for its batch to end and keeps it out
     * until the flush is done (that thread's polls return 0 meanwhile), so no handler is running while
     * the flush unmaps buffers and destroys MRs.
     *
     * @throws RdmaException {@link Errno#EBUSY}, having changed nothing, when called from inside one of
     *                       this transport's handlers, or when another thread stayed inside
     *                       {@link #poll} for 10 s
     */
    public void flushDisconnect() {
        pollRole.await(); // no handler is running from here on: what the flush frees, none is using
        try {
            sendLock.lock(); // as the kernel's disconnect: no Send is being prepared meanwhile
            try {
                connected = false;
                disconnected.set(true);
                if (!qp.isDestroyed()) {
                    qp.drain();
                }
                pollHeld();
                buffer.ring().reset();
                buffer.forEachReq(r -> {
                    r.header.unmap();
                    r.send.unmap();
                    r.recv.unmap();
                });
                buffer.forEachRep(rep -> rep.buffer.unmap());
                mrsDestroy();
                abortUnfinished();
            } finally {
                sendLock.unlock();
            }
        } finally {
            pollRole.release();
        }
    }

    /**
     * After the flush: every request still in an RPC (its reference not dropped: no reply came, or
     * no Send completion for a message) is ended once, through {@link Handler#aborted}.
     */
    private void abortUnfinished() {
        List<Req> unfinished = new ArrayList<>();
        buffer.forEachReq(r -> {
            if (r.refs.getAndSet(0) > 0) {
                unfinished.add(r);
            }
        });
        for (Req r : unfinished) {
            handler.aborted(r);
        }
    }

    /** Receives posted and not yet completed (with shared receives: the shared pool's, for every connection). */
    public int receiveCount() {
        return shared != null ? shared.posted() : receiveCount.get();
    }

    /** Completions dropped as stale (duplicated, or for an earlier user of a slot or rep). */
    public long staleCompletions() {
        return staleCompletions + buffer.ring().staleCompletions();
    }

    /** Flushed completions handled. */
    public long flushed() {
        return flushed;
    }

    /** False once disconnected or failed. */
    public boolean isConnected() {
        return connected;
    }

    /** MRs that exist now. */
    public int mrs() {
        return mrs.count();
    }

    /** The pools. */
    public RpcBuffer buffer() {
        return buffer;
    }

    /** The queue pair. */
    public QueuePair qp() {
        return qp;
    }

    @Override
    public String toString() {
        return "RpcTransport[" + qp + "]";
    }
}
