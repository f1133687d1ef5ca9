package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.spi.ProviderQp;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetAddress;
import java.util.HashSet;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A queue pair, created and destroyed through its {@link CmId} ({@code rdma_create_qp} /
 * {@code rdma_destroy_qp}): reliable connected ({@link QpType#RC}) on a {@link PortSpace#TCP} ID,
 * unreliable datagram ({@link QpType#UD}) on a {@link PortSpace#UDP} one. It holds one reference on
 * its PD and on each of its CQs for its whole life.
 *
 * <p><b>Unreliable datagrams.</b> A UD QP is ready to send once created (as rdma_cm moves it to RTS
 * on a bound ID). Each send names its destination ({@link WorkRequest#ud}); only SEND and
 * SEND_WITH_IMM; every receive's buffer starts with the 40-byte GRH area. A datagram that finds no
 * receive, too small a one, or another Q_Key is dropped and counted
 * ({@link DeviceCounters#datagramsDropped(DatagramDrop)}); one larger than the path MTU is never
 * sent and its send still completes successfully (IBA C10-93.1.1; the device option
 * {@code udOversizeError=true} makes it a {@link WcStatus#LOC_LEN_ERR} completion instead). A UD QP
 * never enters the error state because of its peers. {@link #attachMulticast} joins it to a group.
 *
 * <p><b>Posting.</b> {@link #postSend} and {@link #postRecv} copy a chain of reusable
 * {@link WorkRequest}s into the queue: the whole chain or nothing (a bad request or a full queue
 * throws naming the index of the first bad request). Requests execute in order when the device is
 * progressed (every {@link CompletionQueue#poll} of a CQ they complete on does, or the provider's own
 * progress) and complete on the QP's CQs; unsignaled successful sends complete silently, still in order.
 *
 * <p><b>Threads.</b> Every QP has a lock of its own: posting to it, and the provider's executing it,
 * take that lock (and, for a request that consumes a receive at the peer, the peer's), so
 * independent connections progress in parallel.
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
    private final QpType type;
    private final int qpNum;
    private final int qkey;
    private final boolean blockSelfMulticastLoopback;
    private final CompletionQueue sendCq;
    private final CompletionQueue recvCq;
    private final int maxSendWr;
    private final int maxRecvWr;
    private final int maxSendSge;
    private final int maxRecvSge;
    private final boolean signalAll;
    private final int maxRdmaCtxs;
    private final int rnrRetry;
    private final int minRnrTimer;
    private final int maxInlineData;
    /** The shared receive queue the receives come from, or null: then the QP's own receive queue. */
    final SharedReceiveQueue srq;
    /** With an SRQ: this QP's hold on it; else null. */
    final SrqHold srqHold;
    /** The send queue's inline slots ({@code maxInlineData} bytes each), or null without inline data. */
    private final Arena inlineArena;
    private volatile State state = State.INIT;
    /** The multicast groups it is attached to ({@link Multicast}; device lock). */
    final Set<InetAddress> groups = new HashSet<>();
    /** The rw contexts' MR pools ({@link CmQps} makes and unmakes them). */
    MrPool rdmaMrs;
    MrPool sigMrs;
    final WorkQueue sq;
    final WorkQueue rq;
    /** The execution lock: taking requests off the queues and completing them ({@code QpContext.lock()}). */
    final ReentrantLock lock = new ReentrantLock();
    /**
     * The post lock: appending to the queues. Posters and executors meet only at each queue's tail
     * (published with a release store) and its retired count, so a post never waits for an executor
     * that is copying or waiting out a grace period.
     */
    final ReentrantLock postLock = new ReentrantLock();
    /** What the provider sees of this QP. */
    final QpCore context = new QpCore(this);
    /** The provider's half (set once, at creation). */
    ProviderQp provider;

    QueuePair(CmId cmId, ProtectionDomain pd, QpInitAttributes attrs, int maxSendWr, int qpNum) {
        super(pd.device, "QueuePair", null);
        this.cmId = cmId;
        this.pd = pd;
        this.type = cmId.portSpace() == PortSpace.UDP ? QpType.UD : QpType.RC;
        this.qpNum = qpNum;
        this.qkey = attrs.qkey();
        this.blockSelfMulticastLoopback = attrs.blockSelfMulticastLoopback();
        this.sendCq = attrs.sendCq();
        this.recvCq = attrs.recvCq();
        this.maxSendWr = maxSendWr;
        this.maxRecvWr = attrs.maxRecvWr();
        this.maxSendSge = attrs.maxSendSge();
        this.maxRecvSge = attrs.maxRecvSge();
        this.signalAll = attrs.signalAll();
        this.maxRdmaCtxs = attrs.maxRdmaCtxs();
        this.rnrRetry = attrs.rnrRetry();
        this.minRnrTimer = attrs.minRnrTimer();
        this.maxInlineData = attrs.maxInlineData();
        this.srq = attrs.srq();
        this.srqHold = srq == null ? null : new SrqHold(srq, this);
        this.inlineArena = maxInlineData > 0 ? Arena.ofShared() : null;
        MemorySegment inlineArea = inlineArena == null ? null
                : inlineArena.allocate((long) WorkQueue.slots(maxSendWr) * maxInlineData, 64);
        this.sq = new WorkQueue(maxSendWr, maxSendSge, inlineArea, maxInlineData);
        this.rq = srq == null ? new WorkQueue(maxRecvWr, maxRecvSge) : new WorkQueue(1, 1);
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
        QpPosts.send(this, first, false);
    }

    /** {@link #tryPostSend} and {@link #tryPostRecv}: the QP is not connected yet (before RTS); nothing was posted. */
    public static final int NOT_CONNECTED = -1;
    /**
     * {@link #tryPostSend} and {@link #tryPostRecv}: the chain does not fit the queue now; nothing was
     * posted. A slot comes free when its completion is polled.
     */
    public static final int BACK_PRESSURED = -2;

    /**
     * {@link #postSend} that returns back-pressure instead of throwing for it, as Aeron's
     * {@code offer} does: the number of requests posted (the whole chain), or
     * {@link #BACK_PRESSURED} when the chain does not fit the send queue now, or
     * {@link #NOT_CONNECTED} before the QP is connected (a {@code connect()} still under way);
     * nothing of the chain is posted then. Allocates nothing.
     *
     * @throws RdmaException as {@link #postSend} for everything else (a bad request, a destroyed QP)
     */
    public int tryPostSend(WorkRequest first) {
        return QpPosts.send(this, first, true);
    }

    /**
     * {@link #postRecv} that returns {@link #BACK_PRESSURED} when the chain does not fit the receive
     * queue now (nothing posted), else the number of requests posted. Allocates nothing.
     *
     * @throws RdmaException as {@link #postRecv} for everything else
     */
    public int tryPostRecv(WorkRequest first) {
        return QpPosts.recv(this, first, true);
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
        QpPosts.recv(this, first, false);
    }

    /**
     * Moves the QP to the error state and flushes everything outstanding on both queues
     * ({@code ib_drain_qp}): when this returns, every request posted has completed, the flushed
     * ones with {@link WcStatus#WR_FLUSH_ERR}, and nothing of this QP touches memory any more. The
     * completions wait on the CQs; polling them frees the queue slots.
     */
    public void drain() {
        lock.lock();
        try {
            checkAlive("drain");
            stopAndFlush();
        } finally {
            lock.unlock();
        }
    }

    /** Error state, the provider stopped, both queues flushed (lock held). */
    void stopAndFlush() {
        toError("drained");
        provider.stop();
        context.flush();
    }

    /**
     * What this QP's provider can tell about its transport, one line for a log or a failure message
     * (for UCX: the peer, what was sent and acknowledged, what the oldest request waits for, messages
     * dropped); its form is not part of the API and may change. Any thread; never throws.
     */
    public String diagnostics() {
        ProviderQp p = provider;
        if (p == null) {
            return "";
        }
        try {
            return p.diagnostics();
        } catch (RuntimeException e) {
            return "(diagnostics failed: " + e + ")";
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
        return sq.size();
    }

    /**
     * Receive WRs occupying the receive queue: posted and not yet retired, that is, not yet consumed
     * (or flushed) with their completion polled. {@link #postRecv} accepts at most
     * {@link #maxRecvWr()} {@code - outstandingRecvs()} more.
     */
    public int outstandingRecvs() {
        return rq.size();
    }

    /**
     * Imports a peer's exported remote key ({@link MemoryRegion#exportRemoteKey()}) for this QP's
     * work requests: the result goes into {@link WorkRequest#remote(long, int)}. On soft the exported form is
     * the rkey itself and this returns it; a transport whose keys are larger (UCX's packed keys)
     * unpacks it once here and returns a handle. Imported keys live as long as the QP; import each
     * key once per registration, not per request.
     *
     * @throws RdmaException {@link Errno#EINVAL} for bytes the provider cannot read; {@link Errno#EBADF}
     *                       if the QP was destroyed
     */
    public int importRemoteKey(byte[] exported) {
        Objects.requireNonNull(exported, "exported");
        return importRemoteKey(MemorySegment.ofArray(exported.clone()));
    }

    /**
     * {@link #importRemoteKey(byte[])} from the bytes of {@code exported} (all of them), without
     * allocating on soft: for a key that arrived inside a message.
     */
    public int importRemoteKey(MemorySegment exported) {
        Objects.requireNonNull(exported, "exported");
        postLock.lock();
        try {
            checkAlive("importRemoteKey");
            return provider.importRemoteKey(exported);
        } finally {
            postLock.unlock();
        }
    }

    /**
     * A provider-specific capability of this QP, or null when its provider has none of that type:
     * {@code qp.unwrap(io.regmem.registration.faults.QpFaults.class)} gives the soft provider's fault
     * injection.
     *
     * @throws RdmaException {@link Errno#EINVAL} if {@code type} is null
     */
    public <T> T unwrap(Class<T> type) {
        if (type == null) {
            throw new RdmaException(Errno.EINVAL, this + ": unwrap needs a type, got null");
        }
        return provider.unwrap(type);
    }

    /** A completion of request {@code seq} was polled: free its slot (the CQ's poll lock held). */
    void retire(boolean recv, long seq) {
        if (recv && srq != null) {
            srq.retire((int) seq);
            return;
        }
        WorkQueue q = recv ? rq : sq;
        q.retire(seq);
        if (state == State.ERROR) {
            q.settle();
        }
    }

    /** The QP's type: {@link QpType#UD} on a {@link PortSpace#UDP} ID, else {@link QpType#RC}. */
    public QpType qpType() {
        return type;
    }

    /**
     * The QP's number ({@code qp_num}): 24 bits, unique among the live QPs of this JVM; a datagram's
     * sender names it as the destination ({@link WorkRequest#ud}) and a receiver reads it as
     * {@link WorkCompletion#srcQp()}.
     */
    public int qpNum() {
        return qpNum;
    }

    /** A UD QP's Q_Key ({@link QpInitAttributes#qkey(int)}). */
    public int qkey() {
        return qkey;
    }

    /** True if this UD QP does not receive its own multicast sends ({@link QpInitAttributes#blockSelfMulticastLoopback}). */
    public boolean blocksSelfMulticastLoopback() {
        return blockSelfMulticastLoopback;
    }

    /**
     * Attaches this UD QP to the multicast group {@code gid} ({@code ibv_attach_mcast}): from now on
     * it receives one copy of every datagram sent to the group. Attaching twice changes nothing (one
     * copy still). {@link CmId#joinMulticast} does this for a join's QP.
     *
     * @throws RdmaException {@link Errno#EINVAL} for an RC QP or an address that is not multicast;
     *                       {@link Errno#EOPNOTSUPP} on a device without multicast
     *                       ({@link DeviceAttributes#maxMcastGroups()} 0); {@link Errno#ENOMEM} beyond
     *                       the device's {@code maxMcastGroups} or a group's {@code maxMcastQpAttach};
     *                       {@link Errno#EBADF} if the QP was destroyed
     */
    public void attachMulticast(InetAddress gid) {
        Multicast.attach(this, gid);
    }

    /**
     * Detaches this QP from the group {@code gid} ({@code ibv_detach_mcast}): datagrams the group
     * gets from now on are not delivered here. Destroying the QP detaches it from every group.
     *
     * @throws RdmaException {@link Errno#EINVAL} if it is not attached to {@code gid};
     *                       {@link Errno#EBADF} if the QP was destroyed
     */
    public void detachMulticast(InetAddress gid) {
        Multicast.detach(this, gid);
    }

    /** The CM ID this QP is attached to. */
    public CmId cmId() {
        return cmId;
    }

    /** The shared receive queue this QP's receives come from ({@link QpInitAttributes#srq}), or null. */
    public SharedReceiveQueue srq() {
        return srq;
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

    /** How often a request that finds no receive at the peer is retried ({@link QpInitAttributes#rnrRetry(int)}). */
    public int rnrRetry() {
        return rnrRetry;
    }

    /**
     * The QP's attributes now ({@code ibv_query_qp}): state, capacities and retry settings. A QP
     * in the error state stays there (neither provider moves one back through RESET to RTS):
     * destroy it and connect a new one on a new CM ID.
     *
     * @throws RdmaException {@link Errno#EBADF} if the QP was destroyed
     */
    public QpAttributes query() {
        checkAlive("query");
        return new QpAttributes(state, maxSendWr, maxRecvWr, maxSendSge, maxRecvSge, maxInlineData, rnrRetry, minRnrTimer,
                signalAll, outstandingSends(), outstandingRecvs());
    }

    /** Bytes a send request may carry inline ({@link QpInitAttributes#maxInlineData(int)}). */
    public int maxInlineData() {
        return maxInlineData;
    }

    /** Gives the inline slots back once the provider destroyed the QP (it closes them when nothing of its uses them). */
    void releaseInlineArea() {
        if (inlineArena != null) {
            provider.releaseMemory(inlineArena);
        }
    }

    /** The RNR timer code this QP's receive side gives its peer ({@link QpInitAttributes#minRnrTimer(int)}). */
    public int minRnrTimer() {
        return minRnrTimer;
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

    /** Moves to RTS (the connection is established). */
    void ready() {
        this.state = State.RTS;
    }

    /** Moves to the error state, recording why (a JFR event) when it was not there already. */
    void toError(String cause) {
        State was = this.state;
        this.state = State.ERROR;
        if (was != State.ERROR) {
            RegistrationEvents.QpError event = new RegistrationEvents.QpError();
            if (event.shouldCommit()) {
                event.qp = toString();
                event.from = was.name();
                event.cause = cause;
                event.commit();
            }
        }
    }

    /** The provider's half (for the soft provider's tests and the verbs layer). */
    ProviderQp provider() {
        return provider;
    }
}
