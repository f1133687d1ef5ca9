package io.regmem.registration.ucx;


import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.Opcode;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.WcStatus;
import io.regmem.registration.spi.GracePeriod;
import io.regmem.registration.spi.Guard;
import io.regmem.registration.spi.MrContext;
import io.regmem.registration.spi.PostedWr;
import io.regmem.registration.spi.ProviderQp;
import io.regmem.registration.spi.QpContext;
import io.regmem.registration.spi.Segments;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
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
 * acknowledgement carries the bytes, placed into the local entries, resolved again, when it is
 * reaped), or, on a device that trusts its peers, UCX puts and gets.
 *
 * <p>Order: WRITEs pipeline; a READ, SEND, SEND_WITH_INV or WRITE_WITH_IMM starts only once every
 * earlier request completed (so that it sees, or lands after, everything before it whatever lanes
 * UCX uses), and requests start in posting order. Requests complete in order ({@link #reap}). A request that fails
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
    private final Segments local = new Segments();
    private final Segments responseBytes = new Segments();
    private final UcxOp[] ops;
    private final int mask;
    /** Request parameters of an eager active message (the receiver keeps whole messages). */
    final MemorySegment amParams;
    /** Receive parameters of a READ's rendezvous answer (into a bounce buffer). */
    private final MemorySegment respRecvParams;
    /** Bounce buffers of rendezvous transfers (the sender's WRITEs, READs' answers, the receiver's WRITEs). */
    final UcxStaging staging = new UcxStaging(arena);
    /**
     * Set once a UCX request that may still use this QP's own memory (a header, a bounce buffer, a
     * reply buffer) was left to the worker: the QP's memory then lives until the device closes.
     */
    volatile boolean leftToWorker;
    private final UcxKeyTable keys = new UcxKeyTable();
    final UcxSender sender;
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
    final long localToken = UcxLink.token();
    private volatile long peerToken;
    /** The peer QP when it is in this JVM (in-process connections), else null: a poll progresses it too. */
    volatile UcxQp localPeer;
    /** Set once the QP is destroyed: an in-process peer's poll leaves it alone. */
    volatile boolean destroyed;
    /** One past the newest request started (a sequence number; execution lock; any thread reads it). */
    private volatile long started;
    private static final VarHandle STARTED;

    static {
        try {
            STARTED = MethodHandles.lookup().findVarHandle(UcxQp.class, "started", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }
    /**
     * The thread that last polled one of this QP's own CQs, and how many such polls ran: hints
     * (opaque, no fence on the poll path) read by its in-process peer's polls, which leave this QP
     * to a thread of its own (see {@link UcxCq#progressPeer}).
     */
    @SuppressWarnings("unused") // through LAST_POLLER
    private Thread lastPoller;
    @SuppressWarnings("unused") // through POLLS
    private long polls;
    private static final VarHandle LAST_POLLER;
    private static final VarHandle POLLS;

    static {
        try {
            MethodHandles.Lookup l = MethodHandles.lookup();
            LAST_POLLER = l.findVarHandle(UcxQp.class, "lastPoller", Thread.class);
            POLLS = l.findVarHandle(UcxQp.class, "polls", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** Messages and answers the AM callback delivered to this QP (worker lock held to write; diagnostics). */
    long messagesIn;
    long answersIn;
    /** Why the peer broke the protocol (it sent beyond its window), or null: then its connection ends. */
    volatile String violated;
    /** Bytes of the requests started and not yet reaped (the window's, {@link UcxAm#WINDOW_BYTES}). */
    private long windowBytes;

    @Override
    public String diagnostics() {
        StringBuilder b = new StringBuilder("ucx: peer QP ").append(peerNumber).append(", on the ").append(channel);
        UcxEndpoint e = ep;
        if (e == null) {
            b.append(", not connected");
        } else {
            b.append(e.handle == 0 ? ", endpoint closed" : ", endpoint open").append(e.toSelf ? " (to its own worker)" : "")
                    .append(e.messagesBecause == null ? ", WRITE/READ one-sided" : ", WRITE/READ as checked messages");
        }
        long s = started;
        long r = reaped;
        b.append("; requests started ").append(s).append(", reaped ").append(r);
        if (r < s) {
            UcxOp op = ops[(int) r & mask];
            b.append("; the oldest (#").append(r).append(") has ").append(op.n).append(" UCX request(s) not seen done, ")
                    .append(!op.awaitAck ? "no answer awaited" : op.ack == UcxOp.ACK_PENDING ? "its answer not in"
                            : "answered " + op.ack);
        }
        b.append("; messages in ").append(messagesIn).append(", answers in ").append(answersIn)
                .append(", answers out ").append(receiver.replies.answersOut).append(" (not sent ").append(receiver.replies.answersNotSent)
                .append("), inbox ").append(receiver.inbox.size()).append("; ").append(device.droppedDescription());
        return b.toString();
    }

    /** A poll of one of this QP's CQs, on {@code t}, runs it now. */
    void polledBy(Thread t) {
        if (LAST_POLLER.getOpaque(this) != t) { // a reference store has a GC barrier: only when it changes
            LAST_POLLER.setOpaque(this, t);
        }
        POLLS.setOpaque(this, (long) POLLS.getOpaque(this) + 1);
    }

    /** The thread that last polled one of this QP's own CQs, or null. */
    Thread lastPoller() {
        return (Thread) LAST_POLLER.getOpaque(this);
    }

    /** How many polls of this QP's own CQs ran it. */
    long polls() {
        return (long) POLLS.getOpaque(this);
    }

    /** The peer's {@link #polls()} when this QP's poll last looked, and how many looks found it unchanged. */
    long peerPollsSeen = -1;
    int peerQuiet;

    /** One past the newest request reaped (execution lock). */
    private long reaped;
    /** The sequence number of the last request started that is not a READ, or -1. */
    private long lastNonRead = -1;
    /** A request failed before it started: nothing after it starts (execution lock). */
    private boolean halted;
    /** The endpoint flush this QP's one-sided WRITEs share (execution lock). */
    private final UcxWriteFlush writeFlush;

    UcxQp(UcxDevice device, QpContext ctx, int number) {
        this.device = device;
        this.channel = device.main;
        this.writeFlush = new UcxWriteFlush(device);
        this.ctx = ctx;
        this.rnrRetry = ctx.rnrRetry();
        this.number = number;
        this.reader = device.grace.newReader();
        int depth = Integer.highestOneBit(Math.max(1, ctx.maxSendWr() - 1)) << 1;
        this.ops = new UcxOp[depth];
        MemorySegment headers = arena.allocate((UcxAm.HEADER + UcxAm.ATOMIC_OPERANDS) * depth, 8);
        for (int i = 0; i < depth; i++) {
            ops[i] = new UcxOp();
            ops[i].header = headers.asSlice(i * UcxAm.HEADER, UcxAm.HEADER);
            ops[i].operands = headers.asSlice(UcxAm.HEADER * depth + i * UcxAm.ATOMIC_OPERANDS, UcxAm.ATOMIC_OPERANDS);
        }
        this.mask = depth - 1;
        this.amParams = UcpRequestParam.amSend(arena, UcpLayout.AM_SEND_FLAG_EAGER);
        this.respRecvParams = UcpRequestParam.allocate(arena);
        this.sender = new UcxSender(this, keys, arena);
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
        ctx.lock().lock();
        try {
            startMore();
        } finally {
            ctx.lock().unlock();
        }
    }

    /** Starts queued requests in order until one must wait for the ones before it (execution lock held). */
    private void startMore() {
        long tail = ctx.sendTail();
        PostedWr oldest = ctx.nextSend();
        long head = oldest == null ? tail : oldest.seq();
        if (started < head) { // requests that never started were flushed (the error state)
            started = head;
            reaped = Math.max(reaped, head);
        }
        while (started < tail) {
            PostedWr w = ctx.sendAt(started);
            Opcode op = w.opcode();
            // A READ waits only for the earlier requests that are not READs (it must see what they
            // wrote; UCX orders neither a get after a put nor messages after gets): READs behind
            // READs run together. Other requests but WRITEs wait for everything before them.
            boolean waits = op == Opcode.RDMA_READ ? reaped <= lastNonRead
                    : op != Opcode.RDMA_WRITE && reaped < w.seq();
            if (waits && !halted && ctx.isReady()) {
                return; // waits for the earlier requests it depends on to complete
            }
            long bytes = op.isAtomic() ? 8 : w.totalLength();
            if (started > reaped && (started - reaped >= UcxAm.WINDOW_MESSAGES || windowBytes + bytes > UcxAm.WINDOW_BYTES)
                    && !halted && ctx.isReady()) {
                return; // the connection's window is full: it waits for answers (the target holds no more)
            }
            if (op != Opcode.RDMA_READ) {
                lastNonRead = w.seq();
            }
            if (!start(w)) {
                return;
            }
            windowBytes += bytes;
        }
    }

    /** Starts one request; false if it was not started (the QP stopped). Both locks held. */
    private boolean start(PostedWr w) {
        UcxOp op = ops[(int) w.seq() & mask];
        op.reset();
        if (halted || !ctx.isReady()) {
            op.failed = UcxOp.ERR_NOT_STARTED; // flushed once the error state is seen
            return false;
        }
        // Counted as started before its keys are checked: a quiesce that waited for the check's
        // grace-period section to end then sees the request (busy()) until it is reaped. A release
        // store: the section's entry, a volatile store, comes after it.
        STARTED.setRelease(this, w.seq() + 1);
        WcStatus early;
        try {
            early = sender.start(w, op);
        } catch (RuntimeException e) {
            // Not started after all (the device closed under it): it stays queued, the QP moves to the
            // error state and flushes it; neither the post nor a poll throws for a transport's failure.
            STARTED.setRelease(this, w.seq());
            halted = true;
            ctx.toError();
            return false;
        }
        if (early != null) {
            op.failed = early.ordinal();
            halted = true;
        }
        return true;
    }

    /** The receiver's verdict on message {@code seq} (from the AM callback, worker lock held). */
    void acked(long seq, int status) {
        if (seq >= 0 && status >= 0 && status < UcxAm.STATUSES.length) {
            UcxOp op = ops[(int) seq & mask];
            if (op.awaitAck && op.seq == seq) {
                op.ack = status;
            }
        }
    }

    /**
     * The answer to READ {@code seq} (from the AM callback, worker lock held): its status and, on
     * success, the bytes, kept until the reap places them. False if the data is not kept (no READ
     * waits for it any more).
     */
    boolean readResponse(long seq, int status, long data, long length, boolean rndv) {
        if (seq < 0 || status < 0 || status >= UcxAm.STATUSES.length) {
            return false;
        }
        UcxOp op = ops[(int) seq & mask];
        if (!op.awaitAck || op.seq != seq || op.ack != UcxOp.ACK_PENDING) {
            return false; // (a rendezvous answer nobody waits for: its descriptor is dropped, its sender's send completes)
        }
        op.respLength = length;
        if (rndv && data != 0) {
            // The bytes are still at the target: received now into a bounce buffer (the reap places
            // them into the entries, resolved again then); the READ is done once the receive is.
            op.respRndv = true;
            if (status == WcStatus.SUCCESS.ordinal() && length == op.bytes) {
                MemorySegment b = staging.take(length);
                op.stage = b;
                op.add(channel.worker.receiveData(data, b.address(), length, respRecvParams.address()));
            } // (else the descriptor is dropped: the reap fails the READ)
            op.ack = status; // publishes the above
            return false;
        }
        op.respData = data;
        op.ack = status; // publishes the two above
        return data != 0;
    }

    /**
     * Completes, in order, the requests that are done and starts those that waited for them
     * (execution lock held); in the error state, ends the started ones and flushes the rest.
     */
    void reap() {
        PostedWr w;
        while ((w = ctx.nextSend()) != null && w.seq() < started) {
            UcxOp op = ops[(int) w.seq() & mask];
            if (!op.done(device, false) || (op.needsFlush && !writeFlush.covers(w.seq(), op, this, started))) {
                if (!unanswered(op, w)) {
                    break;
                }
                op.failed = WcStatus.RETRY_EXC_ERR.ordinal(); // the target never answered: as a NIC's retries run out
                device.lockWorker();
                try {
                    op.awaitAck = false; // a late answer is dropped
                } finally {
                    device.workerLock.unlock();
                }
                if (op.n > 0) { // (its UCX requests use only the QP's memory: a rendezvous the peer never pulled)
                    op.abandon(device);
                    leftToWorker = true;
                    op.stage = null; // not given back: the peer may still pull it
                }
            }
            reaped = w.seq() + 1;
            WcStatus status = op.failed >= 0 ? UcxAm.STATUSES[op.failed]
                    : op.ucsStatus != UcpLayout.UCS_OK ? UcxOp.statusOf(op.ucsStatus)
                    : op.awaitAck ? UcxAm.STATUSES[op.ack] : WcStatus.SUCCESS;
            if (op.respData != 0 || (status == WcStatus.SUCCESS && (w.opcode() == Opcode.RDMA_READ || w.opcode().isAtomic())
                    && !op.oneSided)) {
                status = placeReadResponse(w, op, status);
            }
            if (op.stage != null) {
                staging.give(op.stage); // its UCX requests are done
                op.stage = null;
            }
            op.answerHeld = false; // placed, or it never will be: a deregistration waits no longer
            windowBytes -= w.opcode().isAtomic() ? 8 : w.totalLength();
            ctx.completeSend(status, status == WcStatus.SUCCESS ? op.bytes : 0);
            if (status != WcStatus.SUCCESS) {
                if (status == WcStatus.REM_ACCESS_ERR || status == WcStatus.REM_OP_ERR || status == WcStatus.REM_INV_REQ_ERR) {
                    UcxQp peer = localPeer;
                    if (peer != null) {
                        peer.ctx.toError(); // a NAKed protection or request error breaks the connection at both ends
                    }
                }
                break; // the QP is in the error state: everything behind the failure is flushed, whatever its target said
            }
        }
        if (ctx.isError()) {
            drain();
            ctx.flush();
        } else {
            startMore();
        }
    }

    /** The head request whose answer is awaited, the polls that found it so, and when the wait was first timed. */
    private long stalledSeq = -1;
    private int stalledPolls;
    private long stalledSince;

    /**
     * True once the head request {@code seq} has waited longer than the device's answer timeout for
     * its target's answer, all of its UCX requests done or using only the QP's own memory (a
     * rendezvous from a bounce buffer that a stopped peer never pulls), so nothing of UCX's uses the
     * application's memory any more.
     * Cheap on the data path: the clock is read only every 256th poll that finds the same request
     * still waiting, and the wait is timed from the first such read.
     */
    private boolean unanswered(UcxOp op, PostedWr w) {
        long seq = w.seq();
        if (!op.awaitAck || (op.n > 0 && !op.ownMemoryOnly) || op.ack != UcxOp.ACK_PENDING || device.answerTimeoutNanos == 0) {
            return false;
        }
        boolean rnrWait = rnrRetry > 0 && consumesReceive(w.opcode());
        if (rnrWait && rnrRetry == 7) {
            return false; // the target holds it until a receive is posted: as a NIC's RNR retries, for ever
        }
        if (seq != stalledSeq) {
            stalledSeq = seq;
            stalledPolls = 0;
            stalledSince = 0;
            return false;
        }
        if ((++stalledPolls & 255) != 0) {
            return false;
        }
        long now = System.nanoTime();
        if (stalledSince == 0) {
            stalledSince = now;
            return false;
        }
        // The target may hold a request that consumes a receive for up to rnrRetry of its RNR timers
        // (at most 491.52 ms each) before it answers.
        long allowance = rnrWait ? rnrRetry * QpInitAttributes.minRnrTimerNanos(31) : 0;
        return now - stalledSince > device.answerTimeoutNanos + allowance;
    }

    private static boolean consumesReceive(Opcode op) {
        return op == Opcode.SEND || op == Opcode.SEND_WITH_IMM || op == Opcode.SEND_WITH_INV || op == Opcode.RDMA_WRITE_WITH_IMM;
    }

    /**
     * True if an answer may be placed into {@code to}: each piece's region valid or being deregistered
     * (its deregistration waits for the answer), its DMA mapping valid, its memory alive.
     */
    private static boolean reachable(Segments to) {
        for (int k = 0; k < to.count(); k++) {
            Guard r = to.regionGuard(k);
            Guard m = to.mappingGuard(k);
            if ((r != null && !r.isValid() && !(r instanceof MrContext c && c.isDeregistering()))
                    || (m != null && !m.isValid()) || !to.segment(k).scope().isAlive()) {
                return false;
            }
        }
        return true;
    }

    /**
     * True while a started request will still place its answer (a READ's bytes, an atomic's value)
     * into memory that resolved through {@code region} (execution lock held).
     */
    boolean answersInto(Guard region) {
        for (long seq = reaped; seq < started; seq++) {
            UcxOp op = ops[(int) seq & mask];
            if (op.answerHeld && op.answerTo.resolvedThrough(region)) {
                return true;
            }
        }
        return false;
    }

    /** Copies a READ's (or atomic's) response into the local entries it started with (execution lock held); releases it. */
    private WcStatus placeReadResponse(PostedWr w, UcxOp op, WcStatus status) {
        long data = op.respData;
        op.respData = 0;
        try {
            if (status != WcStatus.SUCCESS) {
                return status;
            }
            if (op.respLength != w.totalLength() || (op.respRndv ? op.stage == null : data == 0 && op.respLength > 0)) {
                return WcStatus.REM_OP_ERR;
            }
            if (op.respLength == 0) {
                return WcStatus.SUCCESS;
            }
            // Into the entries resolved when the request started, in one section: a deregistration of
            // their region waits for this (answersInto), an invalidation or revoke does not, and its
            // region then refuses the answer.
            reader.enter();
            try {
                if (!op.answerHeld || !reachable(op.answerTo)) {
                    return WcStatus.LOC_PROT_ERR;
                }
                responseBytes.clear();
                if (op.respRndv) {
                    responseBytes.add(op.stage, 0, op.respLength);
                } else {
                    responseBytes.add(Ucp.NATIVE, data, op.respLength);
                }
                return Segments.copy(null, responseBytes, op.answerTo) == Segments.COPIED ? WcStatus.SUCCESS
                        : WcStatus.LOC_PROT_ERR;
            } finally {
                responseBytes.clear();
                reader.exit();
            }
        } finally {
            release(data);
        }
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
            drain();
            ctx.flush();
            return;
        }
        receiver.deliver();
    }

    /**
     * Ends every started request (execution lock held): progresses the worker (and an in-process
     * peer's) until each of its UCX requests is done, at most {@link #ABANDON_NANOS}; a request
     * still running then is left to the worker. The endpoint stays: it is the device's, shared with
     * its other QPs to the same peer. Late answers are dropped.
     */
    private void drain() {
        if (started <= reaped) {
            return;
        }
        long deadline = System.nanoTime() + ABANDON_NANOS;
        for (long seq = reaped; seq < started; seq++) {
            UcxOp op = ops[(int) seq & mask];
            device.lockWorker();
            try {
                op.awaitAck = false; // under the worker lock: no answer (nor its rendezvous receive) is taken after this
            } finally {
                device.workerLock.unlock();
            }
            boolean done = true;
            while (!op.done(device, true)) {
                if (System.nanoTime() > deadline) {
                    op.abandon(device);
                    leftToWorker = true; // its header (and bounce buffer) stay until the device closes
                    done = false;
                    break;
                }
                device.progress();
                UcxCq.progressPeer(this);
            }
            release(op.respData); // (a late answer is dropped: readResponse keeps nothing for it)
            op.respData = 0;
            op.answerHeld = false;
            if (op.stage != null && done) {
                staging.give(op.stage);
            }
            op.stage = null;
        }
        writeFlush.drain(deadline, started); // a WRITEs' flush under way: ended or left to the worker too
        reaped = Math.max(reaped, started);
        windowBytes = 0;
    }

    /**
     * How long a QP that ends waits for its UCX requests. Without peer error handling (UCX 1.13 has it
     * over TCP only), requests to a peer that went away never end: after this they are left to the
     * worker, which frees them when they end or when it is destroyed.
     */
    private static final long ABANDON_NANOS = 2_000_000_000L;

    /**
     * True while a started request's UCX requests may still read or write its local memory (a send
     * not yet sent, a get not yet landed); one that only waits for its target's answer does not.
     * Execution lock held.
     */
    boolean usesLocalMemory() {
        for (long seq = reaped; seq < started; seq++) {
            UcxOp op = ops[(int) seq & mask];
            if (!op.ownMemoryOnly && !op.done(device, true)) {
                return true;
            }
        }
        return false;
    }

    /**
     * True if a poll must run this QP's sending side: requests started and not reaped, requests
     * posted and not started (they wait for earlier ones), or the error state to flush. A cheap
     * test of the idle case (volatile loads only), so that a poll of an idle QP takes no lock.
     */
    boolean sendWork() {
        return started > reaped || ctx.sendTail() > started || !ctx.isReady();
    }

    /** True if a poll must run this QP's receiving side: messages waiting, or the error state to flush. */
    boolean receiveWork() {
        return !receiver.inbox.isEmpty() || receiver.rendezvousBusy() || !ctx.isReady() || violated != null;
    }


    /** True if requests were started and not yet reaped (any thread). */
    boolean busy() {
        return started > reaped;
    }

    @Override
    public void recvPosted(long firstSeq, int count) {
        // Receives wait for messages; the receive CQ's poll places them.
    }

    @Override
    public void stop() {
        receiver.refuseAll();
        receiver.dropAll();
        drain();
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

    @Override
    public void destroy() {
        receiver.dropAll();
        drain(); // may progress the in-process peer: its link is cut after
        synchronized (this) {
            destroyed = true; // (under this QP's monitor: a connection under way takes no channel after it)
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
