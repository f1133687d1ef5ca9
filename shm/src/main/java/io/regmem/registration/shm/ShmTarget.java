package io.regmem.registration.shm;

import io.regmem.core.internal.Libc;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

import io.regmem.registration.Access;
import io.regmem.registration.Opcode;
import io.regmem.registration.WcStatus;
import io.regmem.registration.spi.Atomics;
import io.regmem.registration.spi.MrContext;
import io.regmem.registration.spi.PostedWr;
import io.regmem.registration.spi.QpContext;
import io.regmem.registration.spi.Segments;
import java.lang.foreign.MemorySegment;

/**
 * A QP's target side on the lane (its execution lock held throughout): it takes the peer's requests
 * from the peer's request ring, in order, checks each exactly as the soft provider does (key, range,
 * rights, liveness, a receive where one is consumed) in its own grace-period section, moves the bytes
 * itself and answers: a WRITE's or SEND's success in its finished word ({@link Lane#finished}), once per
 * round, anything else in its answer ring; a large READ the initiator asked to copy itself, with a
 * grant of the checked range ({@link Grants}). Every field of a request is read once from the shared
 * memory and checked before use; a request that breaks the wire's rules ends the connection.
 *
 * <p>Bytes move between the ring and the checked range (inline and streamed requests, READ answers),
 * or from the initiator's memory straight into the checked range with {@code process_vm_readv}
 * (pulled requests), in pieces of at most {@link Segments#PIECE} bytes, each in its own section: a
 * deregistration here waits for at most one piece of this side's own copying, never for the peer.
 * This side's registered memory is never mapped into the peer. A NAKed protection or request error
 * (REM_ACCESS_ERR, REM_OP_ERR, REM_INV_REQ_ERR) moves this QP to the error state too, as on soft.
 */
final class ShmTarget {
    private static final int IDLE = 0;
    private static final int STREAM_IN = 1;
    private static final int READ_OUT = 2;
    private static final int SKIP = 3;
    /** How often a request held for a receive is announced to its initiator ({@link Wire#RNR_WAIT}). */
    private static final long RNR_NOTIFY_NANOS = 10_000_000L;

    private final ShmQp qp;
    private final QpContext ctx;
    private final Segments dst = new Segments();
    private final Segments src = new Segments();
    private final Segments scratch = new Segments();
    /** READs answered with a grant, not yet copied out by the initiator. */
    final Grants grants = new Grants();
    private final MemorySegment found = MemorySegment.ofArray(new long[1]);
    private int state = IDLE;
    /** The request in progress (a stream coming in, a READ going out, a stream skipped). */
    private long cSeq;
    private Opcode cOp;
    private long cTotal;
    private long cDone;
    private int cImm;
    private boolean cSolicited;
    private boolean cFailed;
    private MrContext cInvalidate;
    /** The last request taken: the next must come after it. */
    private long lastSeq = -1;
    /** The request held for a receive, until when, and when it was last announced. */
    private long rnrSeq = -1;
    private long rnrUntil;
    private long rnrSent;
    /**
     * Set once a request failed: its initiator's QP is in the error state, and nothing it sent after
     * that request executes here (as a responder drops what follows a NAK), pipelined or not.
     */
    private boolean refused;
    /** The most requests served in one call, so that a flood of them does not hold up the QP's own work. */
    private static final int BATCH = 16;
    /** A fast-reg MR a SEND_WITH_INV invalidated: made invalid once out of the section. */
    private MrContext invalidateAfter;
    /** The last request finished without an answer record (a WRITE's, a SEND's), or -1; said in the finished word yet? */
    private long finished = -1;
    private boolean finishedOwed;

    ShmTarget(ShmQp qp) {
        this.qp = qp;
        this.ctx = qp.ctx;
    }

    /** True if a request is in progress (a stream coming in, a READ going out). */
    boolean busy() {
        return state != IDLE || rnrSeq >= 0;
    }

    /**
     * Forgets the requests under way (the QP is in the error state). Its grants stay out until copied:
     * the memory they name does not change owner because of the error ({@link Grants}).
     */
    void reset() {
        state = IDLE;
        rnrSeq = -1;
        dst.clear();
        src.clear();
    }

    /** Serves the peer's requests; the work done. */
    int serve(Lane lane) {
        Ring in = lane.peerRequests;
        Ring out = lane.myAnswers;
        MemorySegment m = in.segment();
        int work = 0;
        try {
            grants.release(lane);
            for (int served = 0; ctx.isReady() && !refused && served < BATCH; served++) {
                if (state == READ_OUT) {
                    work += readOut(out);
                    if (state == READ_OUT) {
                        break;
                    }
                    continue;
                }
                if (!in.next()) {
                    break;
                }
                int type = in.type;
                if (type == Wire.REQ) {
                    if (state != IDLE) {
                        throw qp.violation("a request inside the stream of request " + cSeq);
                    }
                    if (!out.fits(Wire.ACK_SIZE) || !request(lane, in, out)) {
                        break; // no room to answer, or held for a receive: at a later progress
                    }
                } else if (type == Wire.DATA) {
                    if ((state != STREAM_IN && state != SKIP) || cDone + in.length > cTotal) {
                        throw qp.violation("streamed bytes where none are due");
                    }
                    boolean last = cDone + in.length == cTotal;
                    if (last && state == STREAM_IN && !out.fits(Wire.ACK_SIZE)) {
                        break;
                    }
                    if (state == STREAM_IN && !cFailed) {
                        qp.reader.enter();
                        try {
                            cFailed = !dst.stillValid() || !Copies.intoPieces(m, in.payload, dst, cDone, in.length);
                        } finally {
                            qp.reader.exit();
                        }
                    }
                    cDone += in.length;
                    in.consume();
                    in.release(); // the initiator may stream the next piece into this one's room
                    work++;
                    if (last) {
                        if (state == STREAM_IN) {
                            state = IDLE;
                            answer(out, cSeq, cOp, placed(), 0);
                        } else {
                            state = IDLE; // the end of a stream refused at its request
                        }
                    }
                    continue;
                } else if (type == Wire.ABORT) {
                    if ((state != STREAM_IN && state != SKIP) || in.length != 8 || m.get(JAVA_LONG, in.payload) != cSeq) {
                        throw qp.violation("an abort where no stream is under way");
                    }
                    if (state == STREAM_IN) {
                        if (!out.fits(Wire.ACK_SIZE)) {
                            break;
                        }
                        answer(out, cSeq, cOp, WcStatus.WR_FLUSH_ERR, 0); // its initiator fails it itself
                    }
                    state = IDLE;
                } else {
                    throw qp.violation("a request record of type " + type);
                }
                in.consume();
                work++;
            }
        } finally {
            in.release();
            out.publish();
            if (finishedOwed) { // once per round: the batch served
                finishedOwed = false;
                lane.finished(finished);
            }
        }
        MrContext inv = invalidateAfter;
        if (inv != null) {
            invalidateAfter = null;
            qp.memory.invalidate(inv); // after the data is placed, outside the section: wait out the readers
            qp.device.grace.synchronize();
        }
        return work;
    }

    /**
     * Takes one request (its record is consumed by the caller if this returns true).
     *
     * @return false if it is held (for a receive under RNR retry, or behind a grant): the record stays
     */
    private boolean request(Lane lane, Ring in, Ring out) {
        MemorySegment m = in.segment();
        long p = in.payload;
        int length = in.length;
        if (length < Wire.REQ_HEADER) {
            throw qp.violation("a request of " + length + " bytes");
        }
        long seq = m.get(JAVA_LONG, p + Wire.R_SEQ);
        int opcode = m.get(JAVA_BYTE, p + Wire.R_OPCODE) & 0xff;
        int mode = m.get(JAVA_BYTE, p + Wire.R_MODE) & 0xff;
        int flags = m.get(JAVA_SHORT, p + Wire.R_FLAGS) & 0xffff;
        int imm = m.get(JAVA_INT, p + Wire.R_IMM);
        long raddr = m.get(JAVA_LONG, p + Wire.R_RADDR);
        int rkey = m.get(JAVA_INT, p + Wire.R_RKEY);
        int entries = m.get(JAVA_INT, p + Wire.R_ENTRIES);
        long total = m.get(JAVA_LONG, p + Wire.R_TOTAL);
        Opcode op = opcode < Wire.OPCODES.length ? Wire.OPCODES[opcode] : null;
        if (seq <= lastSeq || op == null || !Wire.remote(op) || total < 0 || total > Wire.MAX_MESSAGE
                || (Wire.isAtomic(op) && total != 8) || !Wire.shapeOk(op, mode, length, entries, total)) {
            throw qp.violation("a malformed request (sequence " + seq + " after " + lastSeq + ", opcode " + opcode + ", mode "
                    + mode + ", " + length + " bytes, " + entries + " entries, total " + total + ")");
        }
        if (grants.count() > 0 && !Wire.isRead(op)) {
            return false; // held: nothing that changes memory runs ahead of a READ whose bytes are being copied out
        }
        if (mode == Wire.MODE_PULL && entries > 0) {
            qp.copies.takeEntries(m, p + Wire.REQ_HEADER, entries, total);
        }
        if (op == Opcode.RDMA_WRITE_WITH_IMM) {
            // The key is checked before the receive is looked at, as soft does: a bad key is REM_ACCESS_ERR,
            // never RNR, and takes no receive from a shared receive queue.
            qp.reader.enter();
            try {
                dst.clear();
                if (!qp.memory.resolveRemote(raddr, total, rkey, Access.REMOTE_WRITE, dst)) {
                    lastSeq = seq;
                    rnrSeq = -1;
                    answer(out, seq, op, WcStatus.REM_ACCESS_ERR, 0);
                    return true;
                }
            } finally {
                qp.reader.exit();
                dst.clear();
            }
        }
        if (Wire.consumesReceive(op) && ctx.nextRecv() == null && holdsForReceive(out, seq, flags)) {
            return false;
        }
        lastSeq = seq;
        rnrSeq = -1;
        if (Wire.consumesReceive(op) && ctx.nextRecv() == null) {
            answer(out, seq, op, WcStatus.RNR_RETRY_EXC_ERR, 0);
            if (mode == Wire.MODE_STREAM && total > 0) {
                begin(SKIP, seq, op, total, imm, flags);
            }
            return true;
        }
        WcStatus status;
        long value = 0;
        qp.reader.enter();
        try {
            switch (op) {
                case RDMA_WRITE, RDMA_WRITE_WITH_IMM -> {
                    dst.clear();
                    status = qp.memory.resolveRemote(raddr, total, rkey, Access.REMOTE_WRITE, dst)
                            ? moveIn(lane, m, p, mode, entries, seq, op, total, imm, flags, null) : WcStatus.REM_ACCESS_ERR;
                }
                case SEND, SEND_WITH_INV, SEND_WITH_IMM -> status = send(lane, m, p, mode, entries, seq, op, total, imm, flags);
                case RDMA_READ, RDMA_READ_WITH_INV -> {
                    src.clear();
                    if (qp.memory.resolveRemote(raddr, total, rkey, Access.REMOTE_READ, src)) {
                        status = null; // answered with a grant, or as its bytes go out through the ring
                        if (mode == Wire.MODE_PULL && total > 0 && grants.grant(out, seq, src)) {
                            src.clear();
                        } else {
                            begin(READ_OUT, seq, op, total, imm, flags);
                        }
                    } else {
                        status = WcStatus.REM_ACCESS_ERR;
                    }
                }
                default -> { // the atomics
                    status = Atomics.execute(qp.memory, op, raddr, rkey, m.get(JAVA_LONG, p + Wire.R_CMP),
                            m.get(JAVA_LONG, p + Wire.R_SWAP), scratch, found);
                    value = found.get(JAVA_LONG, 0);
                }
            }
        } finally {
            qp.reader.exit();
        }
        if (status != null) {
            answer(out, seq, op, status, value);
        }
        return true;
    }

    /**
     * True if a request that needs a receive, with none posted, waits for one (its sender's RNR retry
     * count: 7 for ever, 1 to 6 that many of this QP's RNR timers, 0 not at all).
     */
    private boolean holdsForReceive(Ring out, long seq, int flags) {
        int retry = flags & Wire.FLAG_RNR_MASK;
        long now = System.nanoTime();
        if (seq != rnrSeq) {
            rnrSeq = seq;
            rnrUntil = now + retry * ctx.minRnrTimerNanos();
            rnrSent = now;
        }
        if (retry == 0 || (retry < 7 && now - rnrUntil >= 0)) {
            return false;
        }
        if (now - rnrSent > RNR_NOTIFY_NANOS) {
            long at = out.claim(Wire.RNR_WAIT, 8);
            if (at >= 0) {
                out.segment().set(JAVA_LONG, at, seq);
                rnrSent = now;
            }
        }
        return true;
    }

    private void begin(int newState, long seq, Opcode op, long total, int imm, int flags) {
        state = newState;
        cSeq = seq;
        cOp = op;
        cTotal = total;
        cDone = 0;
        cImm = imm;
        cSolicited = (flags & Wire.FLAG_SOLICITED) != 0;
        cFailed = false;
        cInvalidate = null;
    }

    private WcStatus send(Lane lane, MemorySegment m, long p, int mode, int entries, long seq, Opcode op, long total, int imm,
            int flags) {
        PostedWr recv = ctx.nextRecv();
        dst.clear();
        if (!qp.memory.gatherLocal(recv, dst, true)) {
            failReceive(WcStatus.LOC_PROT_ERR);
            return WcStatus.REM_OP_ERR;
        }
        if (dst.total() < total) {
            failReceive(WcStatus.LOC_LEN_ERR);
            return WcStatus.REM_INV_REQ_ERR;
        }
        MrContext inv = null;
        if (op == Opcode.SEND_WITH_INV) {
            inv = qp.memory.invalidationTarget(imm);
            if (inv == null) {
                return WcStatus.REM_INV_REQ_ERR;
            }
        }
        dst.truncate(total);
        return moveIn(lane, m, p, mode, entries, seq, op, total, imm, flags, inv);
    }

    /** Moves a WRITE's or SEND's bytes into {@link #dst} (inline, pulled, or begins the stream); null if streamed. */
    private WcStatus moveIn(Lane lane, MemorySegment m, long p, int mode, int entries, long seq, Opcode op, long total, int imm,
            int flags, MrContext inv) {
        begin(STREAM_IN, seq, op, total, imm, flags);
        cInvalidate = inv;
        if (mode == Wire.MODE_STREAM && total > 0) {
            return null; // the DATA records follow; answered when the last is placed
        }
        state = IDLE;
        if (mode == Wire.MODE_INLINE) {
            cFailed = !Copies.intoPieces(m, p + Wire.REQ_HEADER, dst, 0, total);
        } else if (mode == Wire.MODE_PULL) {
            if (!lane.pulls || !lane.peerRunning()) {
                return WcStatus.REM_OP_ERR; // this side cannot copy out of the initiator (it said so)
            }
            long r = qp.copies.pull(qp.reader, lane.peerPid, entries, dst, total);
            if (r == -Libc.EFAULT) {
                return WcStatus.LOC_PROT_ERR; // the initiator's memory is not there any more
            }
            if (r < 0) {
                lane.pulls = false; // refused (a tracer grant withdrawn, a sandbox): say so, and fail this one
                return WcStatus.REM_OP_ERR;
            }
            cFailed = r == Copies.LOCAL_FAILED;
        }
        return placed();
    }

    /** The request's bytes are all in place (or failed to be): completes its receive; its verdict. */
    private WcStatus placed() {
        Opcode op = cOp;
        if (cFailed) {
            if (op == Opcode.RDMA_WRITE || op == Opcode.RDMA_WRITE_WITH_IMM) {
                return WcStatus.REM_ACCESS_ERR; // this side's memory went away under the copy
            }
            failReceive(WcStatus.LOC_PROT_ERR);
            return WcStatus.REM_OP_ERR;
        }
        if (op == Opcode.RDMA_WRITE_WITH_IMM) {
            ctx.completeRecv(WcStatus.SUCCESS, Opcode.RECV_RDMA_WITH_IMM, cTotal, true, cImm, false, 0, cSolicited);
        } else if (op != Opcode.RDMA_WRITE) {
            boolean withImm = op == Opcode.SEND_WITH_IMM;
            ctx.completeRecv(WcStatus.SUCCESS, Opcode.RECV, cTotal, withImm, withImm ? cImm : 0, cInvalidate != null,
                    cInvalidate != null ? cImm : 0, cSolicited);
            invalidateAfter = cInvalidate;
        }
        return WcStatus.SUCCESS;
    }

    private void failReceive(WcStatus status) {
        ctx.completeRecv(status, Opcode.RECV, 0, false, 0, false, 0);
    }

    /** Sends a READ's bytes while the answer ring has room, then its verdict; the records written. */
    private int readOut(Ring out) {
        int work = 0;
        while (cDone < cTotal && !cFailed) {
            int n = (int) Math.min(Math.min(out.maxPayload, Wire.STREAM_PIECE), cTotal - cDone);
            long at = out.claim(Wire.RDATA, n);
            if (at < 0) {
                return work;
            }
            qp.reader.enter();
            try {
                if (!src.stillValid() || !Copies.fromPieces(src, cDone, out.segment(), at, n)) {
                    out.cancel(at);
                    cFailed = true; // deregistered (or its memory ended) under the READ
                    break;
                }
            } finally {
                qp.reader.exit();
            }
            cDone += n;
            work++;
            out.publish(); // each piece at once: the initiator copies it out while this side fills the next
        }
        if (!out.fits(Wire.ACK_SIZE)) {
            return work;
        }
        state = IDLE;
        src.clear();
        answer(out, cSeq, cOp, cFailed ? WcStatus.REM_ACCESS_ERR : WcStatus.SUCCESS, 0);
        out.publish(); // the initiator copies this READ's bytes out while this side serves the next
        return work + 1;
    }

    /**
     * The QP is in the error state: each request the peer sent is answered RETRY_EXC_ERR, unexecuted,
     * as a NIC's retries run out against a responder that answers nothing (its initiator does not wait
     * for its answer timeout); streamed bytes and aborts are dropped. The work done.
     */
    int refuseAll(Lane lane) {
        Ring in = lane.peerRequests;
        Ring out = lane.myAnswers;
        int work = 0;
        try {
            grants.release(lane);
            for (int n = 0; n < BATCH && in.next(); n++) {
                if (in.type == Wire.REQ) {
                    if (in.length < Wire.REQ_HEADER) {
                        throw qp.violation("a request of " + in.length + " bytes");
                    }
                    if (!out.fits(Wire.ACK_SIZE)) {
                        break;
                    }
                    answer(out, in.segment().get(JAVA_LONG, in.payload + Wire.R_SEQ), null, WcStatus.RETRY_EXC_ERR, 0);
                }
                in.consume();
                work++;
            }
        } finally {
            in.release();
            out.publish();
        }
        return work;
    }

    /**
     * The verdict on request {@code seq} of {@code op}: a WRITE's or SEND's success goes in the finished
     * word at the end of this round; anything else is an answer record (room for it was checked). A
     * NAKed error breaks this QP too.
     */
    private void answer(Ring out, long seq, Opcode op, WcStatus status, long value) {
        if (status == WcStatus.SUCCESS && !Wire.answered(op)) {
            finished = seq;
            finishedOwed = true;
            return;
        }
        long at = out.claim(Wire.ACK, Wire.ACK_SIZE);
        MemorySegment a = out.segment();
        a.set(JAVA_LONG, at + Wire.A_SEQ, seq);
        a.set(JAVA_INT, at + Wire.A_STATUS, status.ordinal());
        a.set(JAVA_INT, at + Wire.A_STATUS + 4, 0);
        a.set(JAVA_LONG, at + Wire.A_VALUE, value);
        if (status != WcStatus.SUCCESS) {
            refused = true;
        }
        if (status == WcStatus.REM_ACCESS_ERR || status == WcStatus.REM_OP_ERR || status == WcStatus.REM_INV_REQ_ERR) {
            out.publish();
            ctx.toError();
        }
    }
}
