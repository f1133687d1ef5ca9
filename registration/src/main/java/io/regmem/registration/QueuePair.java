package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;

/**
 * A reliable-connected queue pair, created and destroyed through its {@link CmId}
 * ({@code rdma_create_qp} / {@code rdma_destroy_qp}). It holds one reference on its PD and on each
 * of its CQs for its whole life.
 *
 * <p><b>Posting.</b> {@link #postSend} and {@link #postRecv} copy a chain of reusable
 * {@link WorkRequest}s into the queue: the whole chain or nothing (a bad request or a full queue
 * throws naming the index of the first bad request). Requests execute in order when the device is
 * progressed (every {@link CompletionQueue#poll} does) and complete on the QP's CQs; unsignaled
 * successful sends complete silently, still in order.
 *
 * <p><b>Errors.</b> The first failed request completes with its error status and moves the QP to
 * {@link State#ERROR}; every later or outstanding request then completes with
 * {@link WcStatus#WR_FLUSH_ERR}. {@link #drain()} does that on purpose.
 */
public final class QueuePair extends RdmaResource {
    /** The states a QP moves through ({@code enum ib_qp_state}). */
    public enum State {
        /** Created, not yet connected. */
        INIT,
        /** Ready to receive. */
        RTR,
        /** Ready to send. */
        RTS,
        /** An error moved it here: everything outstanding completes with a flush status. */
        ERROR
    }

    private final CmId cmId;
    private final ProtectionDomain pd;
    private final CompletionQueue sendCq;
    private final CompletionQueue recvCq;
    private final int maxSendWr;
    private final int maxRecvWr;
    private final int maxSendSge;
    private final int maxRecvSge;
    private final boolean signalAll;
    private final int maxRdmaCtxs;
    private volatile State state = State.INIT;
    private MrPool rdmaMrs;
    private MrPool sigMrs;
    final WorkQueue sq;
    final WorkQueue rq;
    /** The QP's executor as a reader of {@link Fabric#GRACE}: its copies are what deregistration waits for. */
    final GracePeriod.Reader reader = Fabric.GRACE.newReader();
    /** The connected peer (soft: a QP in this JVM), or null. Fabric lock. */
    QueuePair peer;
    /** Test hooks, see {@link #injectFailure}. Fabric lock. */
    long postedSends;
    long failAtSend;
    WcStatus failStatus;
    boolean paused;

    QueuePair(CmId cmId, ProtectionDomain pd, QpInitAttributes attrs, int maxSendWr) {
        super(pd.device, "QueuePair", null);
        this.cmId = cmId;
        this.pd = pd;
        this.sendCq = attrs.sendCq();
        this.recvCq = attrs.recvCq();
        this.maxSendWr = maxSendWr;
        this.maxRecvWr = attrs.maxRecvWr();
        this.maxSendSge = attrs.maxSendSge();
        this.maxRecvSge = attrs.maxRecvSge();
        this.signalAll = attrs.signalAll();
        this.maxRdmaCtxs = attrs.maxRdmaCtxs();
        this.sq = new WorkQueue(maxSendWr, maxSendSge);
        this.rq = new WorkQueue(maxRecvWr, maxRecvSge);
    }

    /** Creates the rw MR pools: c fast-reg MRs, plus c signature MRs with integrity. */
    void createMrPools(int ctxs, boolean integrity) {
        int pages = io.regmem.registration.rw.RdmaRw.frPageListLen(device, integrity);
        rdmaMrs = new MrPool(this, pd, ctxs, pages, false);
        try {
            sigMrs = new MrPool(this, pd, integrity ? ctxs : 0, pages, true);
        } catch (RuntimeException e) {
            rdmaMrs.destroy();
            throw e;
        }
    }

    void destroyMrPools() {
        rdmaMrs.destroy();
        sigMrs.destroy();
    }

    /** The fast-reg MRs for rw contexts ({@code qp->rdma_mrs}): {@link QpInitAttributes#maxRdmaCtxs(int)} of them. */
    public MrPool rdmaMrs() {
        return rdmaMrs;
    }

    /** The signature MRs for integrity rw contexts ({@code qp->sig_mrs}); empty without integrity. */
    public MrPool sigMrs() {
        return sigMrs;
    }

    /**
     * Posts a chain of send work requests ({@code ib_post_send}). The QP must be connected (RTS) or
     * in the error state (then everything is flushed).
     *
     * @param first the first request of the chain
     * @throws RdmaException {@link Errno#EINVAL} naming the bad request's index (too many SGEs, a
     *                       zero-length or wrapping SGE, over 2 GiB, an opcode not for the send queue,
     *                       a QP not yet connected); {@link Errno#EOPNOTSUPP} for RDMA_READ_WITH_INV on a
     *                       non-iWARP device; {@link Errno#ENOMEM} when the chain does not fit the queue;
     *                       {@link Errno#EBADF} if the QP was destroyed. Nothing of the chain is posted then.
     */
    public void postSend(WorkRequest first) {
        Fabric.LOCK.lock();
        try {
            checkAlive("postSend");
            if (state != State.RTS && state != State.ERROR) {
                throw new RdmaException(Errno.EINVAL, this + ": postSend in state " + state + " (bad WR index 0): "
                        + "connect first");
            }
            int n = 0;
            for (WorkRequest wr = first; wr != null; wr = wr.next()) {
                validateSend(wr, n);
                if (n == sq.room()) {
                    throw new RdmaException(Errno.ENOMEM, this + ": send queue full (maxSendWr " + maxSendWr
                            + ", " + sq.size() + " outstanding: a slot is freed when its completion is polled): "
                            + "bad WR index " + n);
                }
                n++;
            }
            int i = 0;
            for (WorkRequest wr = first; wr != null; wr = wr.next()) {
                Wqe w = sq.pushSlot(i++);
                w.copyFrom(wr, signalAll);
                if (failStatus != null && ++postedSends == failAtSend) {
                    w.injected = failStatus;
                    failStatus = null;
                }
            }
            sq.commitPush(n);
        } finally {
            Fabric.LOCK.unlock();
        }
    }

    private void validateSend(WorkRequest wr, int index) {
        Opcode op = wr.opcode();
        if (!op.isSend()) {
            throw new RdmaException(Errno.EINVAL, this + ": " + op + " cannot be posted to a send queue: bad WR index " + index);
        }
        if (op == Opcode.RDMA_READ_WITH_INV && !device.attributes().iWarp()) {
            throw new RdmaException(Errno.EOPNOTSUPP, this + ": RDMA_READ_WITH_INV needs an iWARP device: bad WR index " + index);
        }
        if ((op == Opcode.REG_MR || op == Opcode.REG_MR_INTEGRITY) && wr.regMr() == null) {
            throw new RdmaException(Errno.EINVAL, this + ": REG_MR without an MR: bad WR index " + index);
        }
        boolean read = op == Opcode.RDMA_READ || op == Opcode.RDMA_READ_WITH_INV;
        int limit = read ? maxReadSge() : maxSendSge;
        validateSges(wr, index, limit, read ? "maxReadSge" : "maxSendSge");
        if (wr.numSge() > 0 && Long.compareUnsigned(wr.remoteAddress() + wr.totalLength(), wr.remoteAddress()) < 0) {
            throw new RdmaException(Errno.EINVAL, this + ": remote range wraps the address space: bad WR index " + index);
        }
    }

    private void validateSges(WorkRequest wr, int index, int limit, String what) {
        if (wr.numSge() > limit) {
            throw new RdmaException(Errno.EINVAL, this + ": " + wr.numSge() + " SGEs exceed " + what + " " + limit
                    + ": bad WR index " + index);
        }
        long total = 0;
        for (int i = 0; i < wr.numSge(); i++) {
            long a = wr.sgeAddress(i);
            long l = wr.sgeLength(i);
            if (l <= 0 || Long.compareUnsigned(a + l, a) < 0) {
                throw new RdmaException(Errno.EINVAL, this + ": SGE " + i + " (0x" + Long.toHexString(a) + ", " + l
                        + ") is empty or wraps: bad WR index " + index);
            }
            total += l;
        }
        if (total > MAX_MESSAGE) {
            throw new RdmaException(Errno.EINVAL, this + ": " + total + " bytes exceed the 2 GiB message limit: bad WR index "
                    + index);
        }
    }

    /** The largest message: 2^31 bytes, InfiniBand's limit. */
    public static final long MAX_MESSAGE = 1L << 31;

    /**
     * Posts a chain of receive work requests ({@code ib_post_recv}); allowed in every state but
     * destroyed (in the error state they are flushed).
     *
     * @throws RdmaException as {@link #postSend}, with the receive queue's limits
     */
    public void postRecv(WorkRequest first) {
        Fabric.LOCK.lock();
        try {
            checkAlive("postRecv");
            int n = 0;
            for (WorkRequest wr = first; wr != null; wr = wr.next()) {
                validateSges(wr, n, maxRecvSge, "maxRecvSge");
                if (n == rq.room()) {
                    throw new RdmaException(Errno.ENOMEM, this + ": receive queue full (maxRecvWr " + maxRecvWr
                            + ", " + rq.size() + " outstanding: a slot is freed when its completion is polled): "
                            + "bad WR index " + n);
                }
                n++;
            }
            int i = 0;
            for (WorkRequest wr = first; wr != null; wr = wr.next()) {
                rq.pushSlot(i++).copyFrom(wr, true);
            }
            rq.commitPush(n);
        } finally {
            Fabric.LOCK.unlock();
        }
    }

    /**
     * Moves the QP to the error state and flushes everything outstanding on both queues
     * ({@code ib_drain_qp}): when this returns, every request posted has completed, the flushed
     * ones with {@link WcStatus#WR_FLUSH_ERR}, and nothing of this QP touches memory any more. The
     * completions wait on the CQs; polling them frees the queue slots.
     */
    public void drain() {
        Fabric.LOCK.lock();
        try {
            checkAlive("drain");
            state = State.ERROR;
            SoftEngine.progress(this);
        } finally {
            Fabric.LOCK.unlock();
        }
    }

    /**
     * Send WRs occupying the send queue: posted and not yet retired. As in verbs, a request keeps
     * its slot until its completion is polled; an unsignaled request that succeeded, until a later
     * completion of this send queue is polled (so signal one in a while); a request whose completion
     * was lost to a full CQ is retired at once. {@link #postSend} accepts at most
     * {@link #maxSendWr()} {@code - outstandingSends()} more, so a CQ at least as deep as the queues
     * that complete on it never overruns.
     */
    public int outstandingSends() {
        Fabric.LOCK.lock();
        try {
            return sq.size();
        } finally {
            Fabric.LOCK.unlock();
        }
    }

    /**
     * Receive WRs occupying the receive queue: posted and not yet retired, that is, not yet consumed
     * (or flushed) with their completion polled. {@link #postRecv} accepts at most
     * {@link #maxRecvWr()} {@code - outstandingRecvs()} more.
     */
    public int outstandingRecvs() {
        Fabric.LOCK.lock();
        try {
            return rq.size();
        } finally {
            Fabric.LOCK.unlock();
        }
    }

    // ---- fault injection (honoured by the soft provider; for tests) ------------------------------

    /**
     * Makes the {@code nth} send WR posted from now on (1 = the next) fail with {@code status}, as a
     * NIC error would: it completes with that status and the QP moves to the error state.
     */
    public void injectFailure(int nth, WcStatus status) {
        Fabric.LOCK.lock();
        try {
            failAtSend = postedSends + nth;
            failStatus = java.util.Objects.requireNonNull(status, "status");
        } finally {
            Fabric.LOCK.unlock();
        }
    }

    /** Moves the QP to the error state now, as a fatal NIC or link error would. */
    public void breakQp() {
        Fabric.LOCK.lock();
        try {
            state = State.ERROR;
        } finally {
            Fabric.LOCK.unlock();
        }
    }

    /** While paused, posted sends wait: completions are delayed until {@code pause(false)}. */
    public void pause(boolean pause) {
        Fabric.LOCK.lock();
        try {
            paused = pause;
        } finally {
            Fabric.LOCK.unlock();
        }
    }

    /** A completion of request {@code seq} was polled: free its slot (fabric lock). */
    void retire(boolean recv, long seq) {
        WorkQueue q = recv ? rq : sq;
        q.retire(seq);
        if (state == State.ERROR) {
            q.settle();
        }
    }

    /** The CM ID this QP is attached to. */
    public CmId cmId() {
        return cmId;
    }

    /** The QP's protection domain. */
    public ProtectionDomain pd() {
        return pd;
    }

    /** The send completion queue. */
    public CompletionQueue sendCq() {
        return sendCq;
    }

    /** The receive completion queue. */
    public CompletionQueue recvCq() {
        return recvCq;
    }

    /** Outstanding send WRs, including the room reserved for rw contexts. */
    public int maxSendWr() {
        return maxSendWr;
    }

    /** Outstanding receive WRs. */
    public int maxRecvWr() {
        return maxRecvWr;
    }

    /** SGEs per send WR (the rw write limit). */
    public int maxSendSge() {
        return maxSendSge;
    }

    /** SGEs per receive WR. */
    public int maxRecvSge() {
        return maxRecvSge;
    }

    /** SGEs per RDMA READ WR: min(maxSendSge, device maxSgeRd), the rw read limit. */
    public int maxReadSge() {
        return Math.min(maxSendSge, device.attributes().maxSgeRd());
    }

    /** True if every send completes with a CQE. */
    public boolean signalAll() {
        return signalAll;
    }

    /** rw contexts reserved for. */
    public int maxRdmaCtxs() {
        return maxRdmaCtxs;
    }

    /** The QP's state. */
    public State state() {
        return state;
    }

    void state(State s) {
        this.state = s;
    }
}
