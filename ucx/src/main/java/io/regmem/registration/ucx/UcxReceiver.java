package io.regmem.registration.ucx;

import static java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED;

import io.regmem.registration.Access;
import io.regmem.registration.Opcode;
import io.regmem.registration.WcStatus;
import io.regmem.registration.spi.Atomics;
import io.regmem.registration.spi.QpContext;
import io.regmem.registration.spi.Segments;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * The receiving side of a UCX QP: messages the AM callback put into the {@link UcxInbox} are placed
 * into posted receives (or, for WRITE_WITH_IMM, into the target range under its rkey, then a receive
 * is consumed) under the QP's execution lock, each answered with an acknowledgement carrying the
 * sender's completion status. The rules are the soft provider's: no receive posted is
 * RNR_RETRY_EXC_ERR once the sender's RNR retries ran out (until then the message waits in the
 * inbox for a receive), a receive too short is LOC_LEN_ERR here and REM_INV_REQ_ERR at the sender, a
 * bad target range is REM_ACCESS_ERR, a SEND_WITH_INV naming no MR of this PD is REM_INV_REQ_ERR.
 *
 * <p>As a verbs responder discards what follows a request it NAKed: once a message was refused,
 * every later one of the connection is answered WR_FLUSH_ERR and not executed, however many the
 * sender pipelined behind it (its QP is in the error state by then and flushes them). A QP that is
 * not ready to receive (the error state, or stopped) executes nothing and answers every message
 * with RETRY_EXC_ERR, what a requester's NIC reports when its responder is in that state, so the
 * requester never waits on it.
 */
final class UcxReceiver {
    final UcxInbox inbox = new UcxInbox();
    private final UcxQp qp;
    private final QpContext ctx;
    private final UcxInbox.Message m = new UcxInbox.Message();
    private final Segments src = new Segments();
    private final Segments dst = new Segments();
    /** The ring of answers going out (acknowledgements, READ answers). */
    final UcxReplies replies;
    /** The sequence number of the first message refused, or -1: it and everything after are not executed. */
    private long refusedFrom = -1;

    // ---- the rendezvous WRITE under way (at most one: the messages after it wait behind it) ----
    /** Its UCX request (the receive of its bytes into {@link #rndvStage}), or 0. */
    private long rndvRequest;
    /** Set while it is under way (read by the QP's pollers). */
    private volatile boolean rndvBusy;
    /** Its message: sequence number, target range and key. */
    private long rndvSeq;
    private long rndvAddress;
    private long rndvLength;
    private int rndvKey;
    /** The bounce buffer its bytes arrive in (copied into the checked range from there). */
    private MemorySegment rndvStage;
    /** Receive parameters (contiguous, into a bounce buffer). */
    private final MemorySegment recvParams;

    UcxReceiver(UcxQp qp, Arena arena) {
        this.qp = qp;
        this.ctx = qp.ctx;
        this.replies = new UcxReplies(qp, arena);
        this.recvParams = UcpRequestParam.allocate(arena);
    }

    /** True while a rendezvous WRITE's bytes are on their way in (any thread): a poll must finish it. */
    boolean rendezvousBusy() {
        return rndvBusy;
    }

    /** Executes what arrived (execution lock held). */
    void deliver() {
        if (!rendezvousDone()) {
            return; // the messages after a rendezvous transfer wait until its bytes have moved
        }
        while (inbox.peek(m)) {
            if (!ctx.isReady()) {
                refuseAll(); // nothing executes at a QP in the error state; the sender hears so at once
                return;
            }
            if (!replies.slotFree()) {
                return; // its answer's slot still holds a reply going out: it waits (never for the peer here)
            }
            if (waitsForReceive()) {
                return; // no receive posted yet: it (and everything behind it) waits for one
            }
            inbox.pop();
            execute(true);
            if (rndvRequest != 0) {
                return;
            }
        }
    }

    /**
     * Executes the message in {@link #m} and answers it (execution lock held). {@code kept}: its data
     * is UCX's persistent data, released here; else it lives only as long as the AM callback that
     * runs this.
     */
    private void execute(boolean kept) {
        Opcode op = UcxAm.OPCODES[m.opcode];
        if (refusedFrom >= 0 && m.seq > refusedFrom) { // behind a refused message: discarded, as verbs' responder does
            answerUnexecuted(WcStatus.WR_FLUSH_ERR, kept);
            return;
        }
        if (op == Opcode.RDMA_READ) {
            read();
            return;
        }
        if (op.isAtomic()) {
            atomic(op);
            if (kept) {
                release(m.data);
            }
            return;
        }
        if (m.rndv) {
            writeByRendezvous(kept); // answered now (refused, or done at once) or when its bytes are in
            return;
        }
        WcStatus senderStatus = op == Opcode.RDMA_WRITE ? write() : UcxPlacement.place(m, qp, src, dst);
        if (kept) {
            release(m.data);
        }
        if (senderStatus != WcStatus.SUCCESS && refusedFrom < 0) {
            refusedFrom = m.seq;
        }
        replies.send(replies.claim(), m.seq, senderStatus, UcxAm.TYPE_ACK, 0);
    }

    /**
     * Executes a message at once, inside the AM callback that brought it (worker lock held, the QP's
     * execution lock held, nothing waiting in the inbox before it): no inbox, no data kept, no hand-off
     * to another thread. False, having done nothing, for what cannot run there: a SEND_WITH_INV (its
     * invalidation waits for a grace period, which must not be waited for under the worker lock) or
     * a message whose reply slot is still being sent (waiting for it needs the worker's progress,
     * which a callback must not call).
     */
    boolean executeNow(long data, long length, long seq, int opcode, int imm, int invalidate, long remoteAddress, int rkey,
            int flags, boolean rndv) {
        if (opcode == Opcode.SEND_WITH_INV.ordinal() || rndvRequest != 0 || !replies.nextSlotFree()) {
            return false;
        }
        m.flags = flags;
        m.rndv = rndv;
        m.data = data;
        m.length = length;
        m.seq = seq;
        m.opcode = opcode;
        m.imm = imm;
        m.invalidate = invalidate;
        m.remoteAddress = remoteAddress;
        m.rkey = rkey;
        if (waitsForReceive()) {
            return false; // no receive posted yet, and its sender retries: it waits in the inbox
        }
        execute(false);
        return true;
    }

    /** The message whose RNR wait runs ({@link #waitsForReceive}), and until when. */
    private long rnrSeq = -1;
    private long rnrUntil;

    /**
     * True if the message in {@link #m} consumes a receive, none is posted, and its sender's RNR
     * retries have not run out (execution lock held): it stays in the inbox, as a NIC's requester
     * retries it, until a receive is posted (rnr_retry 7: for ever) or that many of this QP's RNR
     * timers passed since it first found none; then it fails RNR_RETRY_EXC_ERR. A WRITE_WITH_IMM's
     * range is checked first (a bad one fails at once, as on soft).
     */
    private boolean waitsForReceive() {
        if (m.rnr() == 0 || (refusedFrom >= 0 && m.seq > refusedFrom)) {
            return false;
        }
        // The kind and range before the receive: with an SRQ, nextRecv takes one for this QP, so only a
        // message that will consume it may ask.
        Opcode op = UcxAm.OPCODES[m.opcode];
        if (op == Opcode.RDMA_WRITE_WITH_IMM) {
            dst.clear();
            qp.reader.enter();
            try {
                if (!ctx.memory().resolveRemote(m.remoteAddress, m.length, m.rkey, Access.REMOTE_WRITE, dst)) {
                    return false;
                }
            } finally {
                qp.reader.exit();
                dst.clear();
            }
        } else if (op != Opcode.SEND && op != Opcode.SEND_WITH_IMM && op != Opcode.SEND_WITH_INV) {
            return false;
        }
        if (ctx.nextRecv() != null) {
            return false;
        }
        if (m.rnr() == 7) {
            return true;
        }
        long now = System.nanoTime();
        if (m.seq != rnrSeq) {
            rnrSeq = m.seq;
            rnrUntil = now + m.rnr() * ctx.minRnrTimerNanos();
        }
        return now - rnrUntil < 0;
    }

    /** Answers the message in {@link #m} (popped) with {@code status} without executing it, and releases kept data. */
    private void answerUnexecuted(WcStatus status, boolean kept) {
        if (kept) {
            release(m.data);
        }
        boolean read = UcxAm.OPCODES[m.opcode] == Opcode.RDMA_READ;
        replies.send(replies.claim(), m.seq, status, read ? UcxAm.TYPE_READ_RESPONSE : UcxAm.TYPE_ACK, 0);
    }

    /**
     * The QP cannot receive (the error state, or it stops): every message waiting is answered
     * RETRY_EXC_ERR, unexecuted, and released (execution lock held).
     */
    void refuseAll() {
        while (inbox.peek(m) && replies.slotFree()) {
            inbox.pop();
            answerUnexecuted(WcStatus.RETRY_EXC_ERR, true);
        }
    }

    /** An RDMA WRITE into this side's memory, checked against its keys: the sender's status. */
    private WcStatus write() {
        if (m.length == 0) {
            return WcStatus.SUCCESS;
        }
        src.clear();
        dst.clear();
        src.add(Ucp.NATIVE, m.data, m.length);
        qp.reader.enter();
        try {
            if (ctx.memory().resolveRemote(m.remoteAddress, m.length, m.rkey, Access.REMOTE_WRITE, dst)
                    && Segments.copy(qp.reader, src, dst) == Segments.COPIED) {
                return WcStatus.SUCCESS;
            }
        } finally {
            qp.reader.exit();
            src.clear();
            dst.clear();
        }
        ctx.toError(); // a NAKed protection error breaks the connection at both ends
        return WcStatus.REM_ACCESS_ERR;
    }

    /**
     * An RDMA READ of this side's memory, checked against its keys: the bytes are copied, inside the
     * grace-period section, into the reply slot's own buffer (so nothing reads the registered
     * memory after the section), which UCX sends back with the status.
     */
    private void read() {
        if (m.length > UcxReplies.SLOT_BUFFER_MAX && replies.beyondWindow(m.length)) {
            qp.violate("a READ of " + m.length + " bytes while " + replies.bytesUnderWay() + " bytes of answers are under way "
                    + "(at most " + UcxAm.WINDOW_BYTES + " unless alone)");
            ctx.toError(); // unanswered: the connection ends
            return;
        }
        int slot = replies.claim();
        long bytes = 0;
        WcStatus status = WcStatus.SUCCESS;
        if (m.length > 0) {
            dst.clear();
            src.clear();
            qp.reader.enter();
            try {
                if (ctx.memory().resolveRemote(m.remoteAddress, m.length, m.rkey, Access.REMOTE_READ, src)) {
                    MemorySegment b;
                    b = replies.buffer(slot, m.length);
                    dst.add(b, 0, m.length);
                    bytes = m.length;
                    if (Segments.copy(qp.reader, src, dst) != Segments.COPIED) {
                        status = WcStatus.REM_ACCESS_ERR;
                    }
                } else {
                    status = WcStatus.REM_ACCESS_ERR;
                }
            } finally {
                qp.reader.exit();
                src.clear();
            }
            dst.clear();
        }
        if (status != WcStatus.SUCCESS) {
            bytes = 0;
            ctx.toError();
            if (refusedFrom < 0) {
                refusedFrom = m.seq;
            }
        }
        replies.send(slot, m.seq, status, UcxAm.TYPE_READ_RESPONSE, bytes);
    }

    /**
     * An atomic on this side's memory ({@link Atomics}: checked against its keys, executed as one
     * hardware atomic inside the grace-period section); the value found goes back as a READ's answer.
     */
    private void atomic(Opcode op) {
        int slot = replies.claim();
        WcStatus status;
        if (m.length != UcxAm.ATOMIC_OPERANDS || m.data == 0) {
            status = WcStatus.REM_INV_REQ_ERR;
        } else {
            long compareAdd = Ucp.NATIVE.get(JAVA_LONG_UNALIGNED, m.data);
            long swap = Ucp.NATIVE.get(JAVA_LONG_UNALIGNED, m.data + 8);
            MemorySegment b = replies.buffer(slot, 8);
            qp.reader.enter();
            try {
                status = Atomics.execute(ctx.memory(), op, m.remoteAddress, m.rkey, compareAdd, swap, src, b);
            } finally {
                qp.reader.exit();
            }
        }
        if (status != WcStatus.SUCCESS) {
            ctx.toError();
            if (refusedFrom < 0) {
                refusedFrom = m.seq;
            }
        }
        replies.send(slot, m.seq, status, UcxAm.TYPE_READ_RESPONSE, status == WcStatus.SUCCESS ? 8 : 0);
    }

    /**
     * An RDMA WRITE by rendezvous: its header came first, its bytes are still at the sender. The
     * target range is checked against this side's keys inside a grace-period section, as an eager
     * WRITE's; a refused WRITE moves no byte: its descriptor is dropped (released here if
     * {@code kept}, else by the callback's return) and REM_ACCESS_ERR goes back at once. An accepted
     * one has UCX receive the bytes into a bounce buffer of the QP's; once they are in, they are
     * copied into the range, checked again then inside a section (what a deregistration waits for:
     * never for the peer, whose transfer touches only the bounce buffer). Execution lock held.
     */
    private void writeByRendezvous(boolean kept) {
        boolean accepted;
        dst.clear();
        qp.reader.enter();
        try {
            accepted = m.length > 0 && ctx.memory().resolveRemote(m.remoteAddress, m.length, m.rkey, Access.REMOTE_WRITE, dst);
        } finally {
            qp.reader.exit();
            dst.clear();
        }
        if (!accepted) {
            if (kept) {
                release(m.data);
            }
            if (refusedFrom < 0) {
                refusedFrom = m.seq;
            }
            ctx.toError(); // a NAKed protection error breaks the connection at both ends
            replies.send(replies.claim(), m.seq, WcStatus.REM_ACCESS_ERR, UcxAm.TYPE_ACK, 0);
            return;
        }
        MemorySegment b = qp.staging.take(m.length);
        boolean took = qp.device.lockWorkerUnlessHeld();
        try {
            rndvRequest = qp.channel.worker.receiveData(m.data, b.address(), m.length, recvParams.address());
        } finally {
            if (took) {
                qp.device.workerLock.unlock();
            }
        }
        rndvStage = b; // UCX owns the descriptor now, whatever it returned
        rndvSeq = m.seq;
        rndvAddress = m.remoteAddress;
        rndvLength = m.length;
        rndvKey = m.rkey;
        rndvBusy = true;
        if (rndvRequest == 0) {
            rndvRequest = -1; // (done at once: finished below)
        }
        rendezvousDone();
    }

    /**
     * True if no rendezvous WRITE is under way (one that was has finished now: its bytes copied into
     * the range, checked again, and answered with the verdict; RETRY_EXC_ERR if the transport failed).
     * Execution lock held; polls without progressing.
     */
    private boolean rendezvousDone() {
        long r = rndvRequest;
        if (r == 0) {
            return true;
        }
        if (!replies.slotFree()) {
            return false; // (its answer waits for a reply slot)
        }
        int status = UcpLayout.UCS_OK;
        if (r != -1) {
            boolean took = qp.device.lockWorkerUnlessHeld();
            try {
                status = qp.channel.worker.poll(r);
            } finally {
                if (took) {
                    qp.device.workerLock.unlock();
                }
            }
            if (status == UcpLayout.UCS_INPROGRESS) {
                return false;
            }
        }
        rndvRequest = 0;
        WcStatus verdict = WcStatus.RETRY_EXC_ERR;
        if (status == UcpLayout.UCS_OK) {
            src.clear();
            dst.clear();
            src.add(rndvStage, 0, rndvLength);
            qp.reader.enter();
            try {
                verdict = ctx.memory().resolveRemote(rndvAddress, rndvLength, rndvKey, Access.REMOTE_WRITE, dst)
                        && Segments.copy(qp.reader, src, dst) == Segments.COPIED ? WcStatus.SUCCESS : WcStatus.REM_ACCESS_ERR;
            } finally {
                qp.reader.exit();
                src.clear();
                dst.clear();
            }
            if (verdict != WcStatus.SUCCESS) {
                ctx.toError(); // (its key went away while the bytes were on their way: refused, as a NIC's late check)
            }
        } else {
            ctx.toError(); // (the transport failed under it: the peer died, or offered bytes it did not have)
        }
        qp.staging.give(rndvStage);
        rndvStage = null;
        rndvBusy = false;
        if (verdict != WcStatus.SUCCESS && refusedFrom < 0) {
            refusedFrom = rndvSeq;
        }
        replies.send(replies.claim(), rndvSeq, verdict, UcxAm.TYPE_ACK, 0);
        return true;
    }

    /**
     * Ends a rendezvous WRITE still under way (the QP stops): waits for its receive at most until
     * {@code deadline} ({@link System#nanoTime()}); one still running then (UCX 1.13 cannot cancel an
     * active message's receive) is left to the worker with its bounce buffer, and the QP's memory
     * lives until the device closes. Nothing of the application's is touched by it. Execution lock held.
     */
    void cancelRendezvous(long deadline) {
        long r = rndvRequest;
        rndvRequest = 0;
        if (r != 0 && r != -1 && !Ucp.isError(r)) {
            qp.device.lockWorker();
            try {
                while (qp.channel.worker.poll(r) == UcpLayout.UCS_INPROGRESS) {
                    if (System.nanoTime() > deadline) {
                        qp.device.abandon(r);
                        qp.leftToWorker = true;
                        rndvStage = null; // (not given back: UCX may still write it)
                        break;
                    }
                    qp.channel.worker.progress();
                }
            } finally {
                qp.device.workerLock.unlock();
            }
        }
        if (rndvStage != null) {
            qp.staging.give(rndvStage);
            rndvStage = null;
        }
        rndvBusy = false;
    }


    private void release(long data) {
        if (data == 0) {
            return;
        }
        boolean took = qp.device.lockWorkerUnlessHeld();
        try {
            qp.channel.worker.releaseData(data);
        } finally {
            if (took) {
                qp.device.workerLock.unlock();
            }
        }
    }

    /** Releases every message still waiting and every reply still being sent (execution lock held). */
    void dropAll() {
        cancelRendezvous(System.nanoTime() + 2_000_000_000L);
        while (inbox.peek(m)) {
            inbox.pop();
            release(m.data);
        }
        replies.dropAll();
    }
}
