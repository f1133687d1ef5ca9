package io.regmem.registration.ucx;


import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.spi.GracePeriod;
import io.regmem.registration.spi.Guard;
import io.regmem.registration.spi.ProviderQp;
import io.regmem.registration.spi.QpContext;
import io.regmem.registration.link.Link;
import io.regmem.registration.shm.SameHostLane;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A UCX queue pair, sending on its channel's endpoint to the peer's worker ({@link UcxEndpoint},
 * shared with the channel's other QPs to that worker; messages name their QPs). A QP connected
 * inside this JVM uses its device's main worker; one connected to another process uses the
 * device's channel to that process ({@link UcxChannel}), set before it connects. A posted request is
 * started when its doorbell rings ({@link #sendPosted}), by its {@link UcxSender}: local entries are
 * checked through the verbs layer's key tables inside a grace-period section; RDMA requests check the
 * remote range against the exporter's envelope (bounds, rights). A request is an active message
 * ({@link UcxAm}) that the target executes against its own key tables and acknowledges (a READ's
 * acknowledgement carries the bytes, placed when it is reaped into the local entries it resolved
 * when it started), or, on a device that trusts its peers, UCX puts and gets. Its send side is
 * {@link UcxSends}, its receiving side {@link UcxReceiver}.
 *
 * <p>Order: WRITEs pipeline; a READ, SEND, SEND_WITH_INV or WRITE_WITH_IMM starts only once every
 * earlier request completed (so that it sees, or lands after, everything before it whatever lanes
 * UCX uses), and requests start in posting order, within the connection's window ({@link UcxAm#WINDOW_MESSAGES}).
 * Requests complete in order ({@link #reap}). A request that fails
 * before it starts halts the QP: nothing after it starts, and the error state flushes it.
 *
 * <p>Locks: the post lock, then the execution lock (starting holds both, so a request never starts
 * after a flush), then the device's worker lock; never the other way round.
 */
final class UcxQp implements ProviderQp {

    final UcxDevice device;
    final QpContext ctx;
    /** This QP's number on its device: where the peer's messages and acknowledgements are addressed. */
    final int number;
    final GracePeriod.Reader reader;
    /** The QP's RNR retry count (carried in its messages: the target holds one that finds no receive). */
    final int rnrRetry;
    private final Arena arena = Arena.ofShared();
    private final UcxReceiver receiver;
    /** Request parameters of an eager active message (the receiver keeps whole messages). */
    final MemorySegment amParams;
    /** Bounce buffers of rendezvous transfers (the sender's WRITEs, READs' answers, the receiver's WRITEs). */
    final UcxStaging staging = new UcxStaging(arena);
    /**
     * Set once a UCX request that may still use this QP's own memory (a header, a bounce buffer, a
     * reply buffer) was left to the worker: the QP's memory then lives until the device closes.
     */
    volatile boolean leftToWorker;
    private final UcxKeyTable keys = new UcxKeyTable();
    final UcxSender sender;
    /** The send queue's requests while UCX carries them: started, answered, reaped in order. */
    final UcxSends sends;
    /** The channel's endpoint to the peer's worker (shared with its other QPs to that worker), once connected. */
    private UcxEndpoint ep;
    /**
     * The channel whose worker carries this QP's messages: the device's main one until a connection
     * to another process gives it one of its own ({@link #useChannel}, before {@link #connect}).
     */
    volatile UcxChannel channel;
    /** The channel was taken for this QP (given back at its destruction). */
    private boolean ownsChannel;

    /** Its endpoint, or null before it connected (for its package's tests). */
    UcxEndpoint endpointObject() {
        return ep;
    }
    private volatile int peerNumber = -1;
    /**
     * The random token this QP's peer must put in every message to it (sent in the handshake), and
     * the one the peer gave for messages to it.
     */
    final long localToken = Link.token();
    private volatile long peerToken;
    /** The peer QP when it is in this JVM (in-process connections), else null: a poll progresses it too. */
    volatile UcxQp localPeer;
    /** Set once the QP is destroyed: an in-process peer's poll leaves it alone. */
    volatile boolean destroyed;
    /** Which thread polls this QP's own CQs, and how often (hints for its in-process peer's polls). */
    final UcxPollers pollers = new UcxPollers();
    /** The peer's {@link UcxPollers#polls()} when this QP's poll last looked, and how many looks found it unchanged. */
    long peerPollsSeen = -1;
    int peerQuiet;

    /**
     * The QP's same-host lane, once it connected over one ({@link #useLane}): its data path runs
     * there (posts, progress, completions), and nothing of UCX carries its requests.
     */
    volatile SameHostLane.Qp lane;

    /** Messages and answers the AM callback delivered to this QP (worker lock held to write; diagnostics). */
    long messagesIn;
    long answersIn;
    /** Why the peer broke the protocol (it sent beyond its window), or null: then its connection ends. */
    volatile String violated;

    @Override
    public String diagnostics() {
        SameHostLane.Qp l = lane;
        if (l != null) {
            return "ucx over the same-host lane: " + l.diagnostics();
        }
        StringBuilder b = new StringBuilder("ucx: peer QP ").append(peerNumber).append(", on the ").append(channel);
        UcxEndpoint e = ep;
        if (e == null) {
            b.append(", not connected");
        } else {
            b.append(e.handle == 0 ? ", endpoint closed" : ", endpoint open").append(e.toSelf ? " (to its own worker)" : "")
                    .append(e.messagesBecause == null ? ", WRITE/READ one-sided" : ", WRITE/READ as checked messages");
        }
        sends.describe(b);
        b.append("; messages in ").append(messagesIn).append(", answers in ").append(answersIn)
                .append(", answers out ").append(receiver.replies.answersOut).append(" (not sent ").append(receiver.replies.answersNotSent)
                .append("), inbox ").append(receiver.inbox.size()).append("; ").append(device.messages.droppedDescription());
        return b.toString();
    }

    UcxQp(UcxDevice device, QpContext ctx, int number) {
        this.device = device;
        this.channel = device.main;
        this.ctx = ctx;
        this.rnrRetry = ctx.rnrRetry();
        this.number = number;
        this.reader = device.grace.newReader();
        this.amParams = UcpRequestParam.amSend(arena, UcpLayout.AM_SEND_FLAG_EAGER);
        this.sender = new UcxSender(this, keys, arena);
        this.sends = new UcxSends(this, arena);
        this.receiver = new UcxReceiver(this, arena);
        ctx.attach(this);
    }

    /**
     * Connects to the peer QP {@code peer} of the worker at {@code peerWorker}, whose messages carry
     * {@code token}; then the QP is ready.
     */
    void connect(byte[] peerWorker, int peer, long token) {
        ep = channel.endpoints.endpointTo(peerWorker);
        peerNumber = peer;
        peerToken = token;
        ctx.ready();
    }

    /**
     * Moves this QP, not yet connected, to the device's channel to the peer process {@code key}
     * names ({@link UcxDevice#acquireChannel}); it is given back when the QP is destroyed. Returns
     * the channel's worker address, for the peer. A QP that has a channel already keeps it.
     *
     * @throws RdmaException {@link Errno#ENODEV} if the device or the QP is gone
     */
    synchronized byte[] useChannel(Object key) {
        if (destroyed) {
            throw new RdmaException(Errno.ENODEV, ctx.name() + ": the QP was destroyed");
        }
        UcxChannel c = channel;
        if (!ownsChannel || c.retired || !key.equals(c.key)) {
            useMainChannel();
            channel = device.acquireChannel(key);
            ownsChannel = true;
        }
        return channel.address.clone();
    }

    /** Moves this QP, not yet connected, back to the device's main channel (a connection inside this JVM). */
    synchronized void useMainChannel() {
        if (ownsChannel) {
            UcxChannel c = channel;
            channel = device.main;
            ownsChannel = false;
            device.releaseChannel(c);
        }
    }

    /**
     * Gives this QP, not yet connected, a lane QP of {@code engine}, for a connection over the
     * same-host lane; {@code onBroken} ends the connection's life line if the peer breaks the lane's
     * rules. The QP keeps any channel it took until the lane is connected ({@link #laneConnected}).
     *
     * @throws RdmaException {@link Errno#ENODEV} if the QP is gone
     */
    SameHostLane.Qp useLane(SameHostLane engine, Runnable onBroken) {
        synchronized (this) {
            if (destroyed) {
                throw new RdmaException(Errno.ENODEV, ctx.name() + ": the QP was destroyed");
            }
            SameHostLane.Qp l = lane;
            if (l == null) {
                l = engine.newQp(ctx, new UcxLaneKeys(keys));
                lane = l;
            }
            l.onBroken(onBroken);
            return l;
        }
    }

    /** The QP is connected over its lane: it leaves the channel it took for a connection over UCX. */
    void laneConnected() {
        useMainChannel();
    }

    /**
     * The lane could not be set up: the QP, not yet connected, forgets its lane QP (destroyed) and
     * keeps its channel, for the connection over UCX.
     */
    void leaveLane() {
        SameHostLane.Qp l;
        synchronized (this) {
            if (destroyed) {
                return; // (its destroy took the lane QP with it)
            }
            l = lane;
            lane = null;
        }
        if (l != null) {
            l.destroy();
        }
    }

    /** The token messages to the peer carry. */
    long peerToken() {
        return peerToken;
    }

    /** True if this QP's endpoint leads to its own device's worker (a loopback pair of one device). */
    boolean toSelf() {
        UcxEndpoint e = ep;
        return e == null || e.toSelf;
    }

    /** This QP for its package's tests ({@code qp.unwrap(UcxQp.class)}; the class is not public). */
    @Override
    public <T> T unwrap(Class<T> type) {
        return type == UcxQp.class ? type.cast(this) : null;
    }

    /** True if a transfer of {@code length} bytes goes by rendezvous on this QP's connection. */
    boolean rendezvous(long length) {
        UcxEndpoint e = ep;
        return length >= device.rndvThreshold && (e == null || !e.eagerOnly);
    }

    /** True if this QP's WRITEs and READs go as NIC-checked puts and gets ({@link UcxTransports}). */
    boolean nicOneSided() {
        UcxEndpoint e = ep;
        return e != null && e.messagesBecause == null;
    }

    /** The endpoint's handle, or 0 if there is none (not connected, or closed with its peer). Worker lock held. */
    long endpoint() {
        UcxEndpoint e = ep;
        return e == null ? 0 : e.handle;
    }

    int peerNumber() {
        return peerNumber;
    }

    /** The messages that arrived for this QP (the AM callback adds to them). */
    UcxInbox inbox() {
        return receiver.inbox;
    }

    /**
     * Starts the announced requests, in order, as far as the ordering rules allow (the rest start
     * from {@link #reap}). Under the execution lock too, after the post lock.
     */
    @Override
    public void sendPosted(long firstSeq, int count) {
        SameHostLane.Qp l = lane;
        if (l != null) {
            l.sendPosted(firstSeq, count);
            return;
        }
        ctx.lock().lock();
        try {
            sends.startMore();
        } finally {
            ctx.lock().unlock();
        }
    }

    /** The receiver's verdict on message {@code seq} (from the AM callback, worker lock held). */
    void acked(long seq, int status) {
        sends.acked(seq, status);
    }

    /** The answer to READ {@code seq} ({@link UcxSends#readResponse}); false if the data is not kept. */
    boolean readResponse(long seq, int status, long data, long length, boolean rndv) {
        return sends.readResponse(seq, status, data, length, rndv);
    }

    /** Completes the requests that are done, in order ({@link UcxSends#reap}; execution lock held). */
    void reap() {
        sends.reap();
    }

    /** True while a started request will still place its answer into memory resolved through {@code region}. */
    boolean answersInto(Guard region) {
        return sends.answersInto(region);
    }

    /** True while a started request's UCX requests may still use its local memory (execution lock held). */
    boolean usesLocalMemory() {
        return sends.usesLocalMemory();
    }

    /** True if a poll must run this QP's sending side ({@link UcxSends#sendWork}). */
    boolean sendWork() {
        return sends.sendWork();
    }

    /** True if requests were started and not yet reaped (any thread). */
    boolean busy() {
        return sends.busy();
    }

    /** Releases data UCX kept for an active-message callback (0: none). */
    void release(long data) {
        if (data == 0) {
            return;
        }
        device.lockWorker();
        try {
            channel.worker.releaseData(data);
        } finally {
            device.workerLock.unlock();
        }
    }

    /**
     * Executes a message inside the AM callback that brought it (worker lock held), when nothing
     * stands in its way: the QP's execution lock free, the QP ready, nothing waiting before it in the
     * inbox. False if it must wait in the inbox for the QP's next delivery.
     */
    boolean executeNow(long data, long length, long seq, int opcode, int imm, int invalidate, long remoteAddress, int rkey,
            int flags, boolean rndv) {
        ReentrantLock l = ctx.lock();
        if (!l.tryLock()) { // (tried only: the worker lock is held, and the order is execution lock first)
            return false;
        }
        try {
            return !destroyed && ctx.isReady() && receiver.inbox.isEmptyHeld()
                    && receiver.executeNow(data, length, seq, opcode, imm, invalidate, remoteAddress, rkey, flags, rndv);
        } finally {
            l.unlock();
        }
    }

    /**
     * The peer broke the protocol (AM callback, worker lock held): its connection ends. The QP moves
     * to the error state at its next poll, which drops what it kept; said once, in the log.
     */
    void violate(String why) {
        if (violated == null) {
            violated = why;
            System.getLogger("io.regmem.registration.ucx").log(System.Logger.Level.WARNING, "regmem ucx: " + ctx.name()
                    + ": the peer broke the protocol, its connection ends: " + why);
        }
    }

    /** Places what arrived into the posted receives (execution lock held). */
    void deliver() {
        if (violated != null && !ctx.isError()) {
            ctx.toError();
            receiver.dropAll(); // what it kept goes at once, unanswered
        }
        if (ctx.isError()) {
            receiver.refuseAll(); // answered, unexecuted: their senders do not wait on this QP
            sends.drain();
            ctx.flush();
            return;
        }
        receiver.deliver();
    }

    /** True if a poll must run this QP's receiving side: messages waiting, or the error state to flush. */
    boolean receiveWork() {
        return !receiver.inbox.isEmpty() || receiver.rendezvousBusy() || !ctx.isReady() || violated != null;
    }


    @Override
    public void recvPosted(long firstSeq, int count) {
        SameHostLane.Qp l = lane;
        if (l != null) {
            l.recvPosted(firstSeq, count);
        }
        // Over UCX, receives wait for messages; the receive CQ's poll places them.
    }

    @Override
    public void stop() {
        receiver.refuseAll();
        receiver.dropAll();
        sends.drain();
    }

    @Override
    public int importRemoteKey(MemorySegment exported) {
        return keys.importKey(exported, ctx.name());
    }

    /** The inline slots: closed with the worker if a request left to it may still read them, else now. */
    @Override
    public void releaseMemory(Arena memory) {
        if (leftToWorker) {
            device.closeLater(channel, memory);
        } else {
            memory.close();
        }
    }

    /** A peer in this JVM connected over a same-host lane: what it left in the lane is taken first (SameHostLane). */
    @Override
    public boolean peerDisconnected() {
        SameHostLane.Qp l = lane;
        return l != null && l.peerDisconnected();
    }

    @Override
    public void destroy() {
        receiver.dropAll();
        sends.drain(); // may progress the in-process peer: its link is cut after
        SameHostLane.Qp l;
        synchronized (this) {
            destroyed = true; // (under this QP's monitor: a connection under way takes no channel or lane after it)
            l = lane;
        }
        if (l != null) {
            l.destroy(); // the peer's QP errs
        }
        try {
            device.lockWorker();
            try {
                keys.destroyRemoteKeys(device.ucp);
            } finally {
                device.workerLock.unlock();
            }
        } catch (RdmaException closed) {
            // the device is closing: its worker took the keys with it
        }
        UcxQp peer = localPeer;
        localPeer = null;
        if (peer != null && peer.localPeer == this) {
            peer.localPeer = null;
            peer.ctx.toError(); // the peer loses its connection
        }
        reader.close();
        device.removeQp(this);
        UcxChannel c = channel;
        if (leftToWorker) {
            device.closeLater(c, arena); // UCX may still use some of it: freed once the worker is gone
        } else {
            arena.close();
        }
        boolean owned;
        synchronized (this) {
            owned = ownsChannel;
            ownsChannel = false;
        }
        if (owned) {
            device.releaseChannel(c); // the last QP of a channel destroys its worker
        }
    }
}
