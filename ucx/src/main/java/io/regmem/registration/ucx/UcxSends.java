package io.regmem.registration.ucx;

import io.regmem.registration.Opcode;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.WcStatus;
import io.regmem.registration.spi.Guard;
import io.regmem.registration.spi.PostedWr;
import io.regmem.registration.spi.QpContext;
import io.regmem.registration.spi.Segments;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * A {@link UcxQp}'s send queue while UCX carries it: one {@link UcxOp} per queue slot, started in
 * order when the doorbell rings (a READ behind READs and a WRITE at once, anything else once what it
 * depends on completed, all within the connection's window), answered by the target (an
 * acknowledgement, a READ's or atomic's answer, placed into the entries it resolved at start), and
 * reaped in order into completions; ended (drained) when the QP stops. Execution lock held for all
 * but the AM callback's {@link #acked} and {@link #readResponse} (worker lock) and the cheap reads
 * {@link #sendWork} and {@link #busy}.
 */
final class UcxSends {
    private final UcxQp qp;
    private final QpContext ctx;
    private final UcxDevice device;
    private final UcxOp[] ops;
    private final int mask;
    private final Segments responseBytes = new Segments();
    /** Receive parameters of a READ's rendezvous answer (into a bounce buffer). */
    private final MemorySegment respRecvParams;
    /** One past the newest request started (a sequence number; execution lock; any thread reads it). */
    private volatile long started;
    private static final VarHandle STARTED;

    static {
        try {
            STARTED = MethodHandles.lookup().findVarHandle(UcxSends.class, "started", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** One past the newest request reaped (execution lock). */
    private long reaped;
    /** The sequence number of the last request started that is not a READ, or -1. */
    private long lastNonRead = -1;
    /** A request failed before it started: nothing after it starts (execution lock). */
    private boolean halted;
    /** The endpoint flush this QP's one-sided WRITEs share (execution lock). */
    private final UcxWriteFlush writeFlush;
    /** Bytes of the requests started and not yet reaped (the window's, {@link UcxAm#WINDOW_BYTES}). */
    private long windowBytes;

    UcxSends(UcxQp qp, Arena arena) {
        this.qp = qp;
        this.ctx = qp.ctx;
        this.device = qp.device;
        this.writeFlush = new UcxWriteFlush(device);
        int depth = Integer.highestOneBit(Math.max(1, ctx.maxSendWr() - 1)) << 1;
        this.ops = new UcxOp[depth];
        MemorySegment headers = arena.allocate((UcxAm.HEADER + UcxAm.ATOMIC_OPERANDS) * depth, 8);
        for (int i = 0; i < depth; i++) {
            ops[i] = new UcxOp();
            ops[i].header = headers.asSlice(i * UcxAm.HEADER, UcxAm.HEADER);
            ops[i].operands = headers.asSlice(UcxAm.HEADER * depth + i * UcxAm.ATOMIC_OPERANDS, UcxAm.ATOMIC_OPERANDS);
        }
        this.mask = depth - 1;
        this.respRecvParams = UcpRequestParam.allocate(arena);
    }

    /** Adds the state of the requests under way to a diagnostic description. */
    void describe(StringBuilder b) {
        long s = started;
        long r = reaped;
        b.append("; requests started ").append(s).append(", reaped ").append(r);
        if (r < s) {
            UcxOp op = ops[(int) r & mask];
            b.append("; the oldest (#").append(r).append(") has ").append(op.n).append(" UCX request(s) not seen done, ")
                    .append(!op.awaitAck ? "no answer awaited" : op.ack == UcxOp.ACK_PENDING ? "its answer not in"
                            : "answered " + op.ack);
        }
    }

    /** Starts queued requests in order until one must wait for the ones before it (execution lock held). */
    void startMore() {
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
            early = qp.sender.start(w, op);
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
            // them into the entries it resolved at start); the READ is done once the receive is.
            op.respRndv = true;
            if (status == WcStatus.SUCCESS.ordinal() && length == op.bytes) {
                MemorySegment b = qp.staging.take(length);
                op.stage = b;
                op.add(qp.channel.worker.receiveData(data, b.address(), length, respRecvParams.address()));
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
            if (!op.done(device, false) || (op.needsFlush && !writeFlush.covers(w.seq(), op, qp, started))) {
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
                    qp.leftToWorker = true;
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
                qp.staging.give(op.stage); // its UCX requests are done
                op.stage = null;
            }
            op.answerHeld = false; // placed, or it never will be: a deregistration waits no longer
            windowBytes -= w.opcode().isAtomic() ? 8 : w.totalLength();
            ctx.completeSend(status, status == WcStatus.SUCCESS ? op.bytes : 0);
            if (status != WcStatus.SUCCESS) {
                if (status == WcStatus.REM_ACCESS_ERR || status == WcStatus.REM_OP_ERR || status == WcStatus.REM_INV_REQ_ERR) {
                    UcxQp peer = qp.localPeer;
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
        boolean rnrWait = qp.rnrRetry > 0 && consumesReceive(w.opcode());
        if (rnrWait && qp.rnrRetry == 7) {
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
        // The target may hold a request that consumes a receive for up to qp.rnrRetry of its RNR timers
        // (at most 491.52 ms each) before it answers.
        long allowance = rnrWait ? qp.rnrRetry * QpInitAttributes.minRnrTimerNanos(31) : 0;
        return now - stalledSince > device.answerTimeoutNanos + allowance;
    }

    private static boolean consumesReceive(Opcode op) {
        return op == Opcode.SEND || op == Opcode.SEND_WITH_IMM || op == Opcode.SEND_WITH_INV || op == Opcode.RDMA_WRITE_WITH_IMM;
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

    /**
     * A deregistration stops waiting for the answers into {@code region} (execution lock held): the
     * requests that would place one there will not; they complete LOC_PROT_ERR when answered.
     */
    void abandonAnswersInto(Guard region) {
        for (long seq = reaped; seq < started; seq++) {
            UcxOp op = ops[(int) seq & mask];
            if (op.answerHeld && op.answerTo.resolvedThrough(region)) {
                op.answerHeld = false;
            }
        }
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
            qp.reader.enter();
            try {
                if (!op.answerHeld || !op.answerTo.answerable()) {
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
                qp.reader.exit();
            }
        } finally {
            qp.release(data);
        }
    }

    /**
     * Ends every started request (execution lock held): progresses the worker (and an in-process
     * peer's) until each of its UCX requests is done, at most {@link #ABANDON_NANOS}; a request
     * still running then is left to the worker. The endpoint stays: it is the device's, shared with
     * its other QPs to the same peer. Late answers are dropped.
     */
    void drain() {
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
                    qp.leftToWorker = true; // its header (and bounce buffer) stay until the device closes
                    done = false;
                    break;
                }
                device.progress();
                UcxCq.progressPeer(qp);
            }
            qp.release(op.respData); // (a late answer is dropped: readResponse keeps nothing for it)
            op.respData = 0;
            op.answerHeld = false;
            if (op.stage != null && done) {
                qp.staging.give(op.stage);
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

    /** True if requests were started and not yet reaped (any thread). */
    boolean busy() {
        return started > reaped;
    }
}
