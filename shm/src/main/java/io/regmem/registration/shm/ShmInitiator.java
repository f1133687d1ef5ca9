package io.regmem.registration.shm;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

import io.regmem.registration.Opcode;
import io.regmem.registration.WcStatus;
import io.regmem.registration.spi.MrContext;
import io.regmem.registration.spi.PostedWr;
import io.regmem.registration.spi.QpContext;
import io.regmem.registration.spi.Segments;
import java.lang.foreign.MemorySegment;

/**
 * A QP's send side on the lane (its execution lock held throughout): it starts its requests in
 * posting order into its request ring and completes them, in order, with the target's answers: its
 * answer records (a READ's bytes, an atomic's value, an error) and its finished word (WRITEs and SENDs).
 *
 * <p>Starting a request checks its local entries in a grace-period section ({@code LOC_PROT_ERR}
 * otherwise: it then halts the QP, nothing after it starts, and it completes with that status when its
 * turn comes). A WRITE's or SEND's bytes go inline in the request up to the device's inline threshold (at
 * most what one record of the ring holds); above it, when the target said it can copy out of this process,
 * the request names the entries and the target pulls them ({@code process_vm_readv}); otherwise they are
 * streamed through the ring in records. A READ's bytes and an atomic's value come back in the target's
 * answer ring and are placed into the entries resolved at start, in this side's section; a READ above the
 * inline threshold, where this side can copy out of the target, asks for a grant instead and copies the
 * granted range out of the target itself ({@code process_vm_readv}, in the same section rule), then checks
 * that the grant was not withdrawn meanwhile. The target never writes into this process. A local request
 * (REG_MR, LOCAL_INV, BIND_MW) runs when it is the oldest, so the requests after it see its effect. A
 * request that has no answer within the device's answer timeout completes RETRY_EXC_ERR (the target may
 * have executed it).
 */
final class ShmInitiator {
    private final ShmQp qp;
    private final QpContext ctx;
    /** Started requests, oldest first. */
    private final Started in;
    /** The most pulled bytes unanswered at once: later ones wait to start, so a deregistration waits for these only. */
    static final long PULL_WINDOW = 1L << 20;
    /** The next posted request to start. */
    private long next;
    /** A request that failed before it started (nothing after it starts), or -1; its status. */
    private long haltSeq = -1;
    private WcStatus haltStatus;
    /** The request whose bytes are being streamed, or -1; its place in the FIFO, offset and entries. */
    private long streamSeq = -1;
    private int streamSlot;
    private long streamOffset;
    private final Segments streamSrc = new Segments();
    /** The stream failed locally: an ABORT record is still to be written. */
    private boolean abortPending;
    /** Looks for a timed-out request ({@link #timedOut}); the clock is read every 64th. */
    private int looks;
    private final MemorySegment value = MemorySegment.ofArray(new long[1]);
    /** The sequence of the last request started, or -1. */
    private long lastStarted = -1;
    /** The target's finished word as last read: the last of this side's requests it finished + 1. */
    private long peerFinished;
    /** The last grant copied out and not yet said in the copied word, or -1. */
    private long copiedOwed = -1;

    ShmInitiator(ShmQp qp) {
        this.qp = qp;
        this.ctx = qp.ctx;
        this.in = new Started(Math.max(1, ctx.maxSendWr()));
    }

    /** True while a request is started and not yet answered, or one waits to start. */
    boolean busy() {
        return in.count > 0 || next < ctx.sendTail() || haltSeq >= 0;
    }

    /** True if a started request placing an answer resolved an entry through {@code region}. */
    boolean answersInto(MrContext region) {
        return in.answersInto(region);
    }

    /** Marks the answers still to come into {@code region} as refused: those requests fail, nothing is placed. */
    void abandonAnswersInto(MrContext region) {
        in.abandonAnswersInto(region);
    }

    /** Forgets everything started (the QP is in the error state: the verbs layer flushes the queue). */
    void reset() {
        in.count = 0;
        in.pulling = 0;
        in.signaledOut = 0;
        in.head = 0;
        next = ctx.sendTail();
        haltSeq = -1;
        streamSeq = -1;
        abortPending = false;
    }

    // ---- starting ----

    /** Starts what may start now; the work done. */
    int start(Lane lane) {
        int work = 0;
        if (streamSeq >= 0) {
            work += stream(lane);
            if (streamSeq >= 0) {
                lane.myRequests.publish();
                return work;
            }
        }
        while (next < ctx.sendTail() && haltSeq < 0 && ctx.isReady()) {
            PostedWr w = ctx.sendAt(next);
            Opcode o = w.opcode();
            if (!Wire.remote(o)) {
                if (in.count > 0 || ctx.nextSend() != w) {
                    break; // a local request runs when it is the oldest
                }
                next++;
                work++;
                qp.runLocal(w);
                continue;
            }
            if (in.count == in.seq.length) {
                break;
            }
            WcStatus s = startOne(lane, w, o);
            if (s == null) {
                break; // the ring is full: at a later progress
            }
            work++;
            if (s != WcStatus.SUCCESS) {
                haltSeq = next;
                haltStatus = s;
                next++;
                break;
            }
            next++;
            if (streamSeq >= 0) {
                work += stream(lane);
                if (streamSeq >= 0) {
                    break;
                }
            }
        }
        lane.myRequests.publish();
        completeHalted();
        return work;
    }

    /** Writes request {@code w}'s record; null if the ring has no room now (nothing changed). */
    private WcStatus startOne(Lane lane, PostedWr w, Opcode o) {
        boolean sink = Wire.isRead(o) || Wire.isAtomic(o);
        int slot = (in.head + in.count) % in.seq.length;
        Segments segs = in.sinks[slot]; // kept until the answer for a sink, or for a source the target pulls
        qp.reader.enter();
        try {
            segs.clear();
            if (!qp.memory.gatherLocal(w, segs, sink)) {
                return WcStatus.LOC_PROT_ERR;
            }
            boolean rdma = o == Opcode.RDMA_WRITE || o == Opcode.RDMA_WRITE_WITH_IMM || sink;
            long key = rdma ? qp.keys.targetKey(w) : Integer.toUnsignedLong(w.rkey());
            if (key < 0) { // a key this side cannot name to the target: nothing is sent
                return WcStatus.REM_ACCESS_ERR;
            }
            long bytes = Wire.isAtomic(o) ? 8 : w.totalLength();
            int mode = Wire.MODE_INLINE;
            int length = Wire.REQ_HEADER;
            if (Wire.isRead(o) && bytes > qp.device.inlineThreshold && lane.pulls && Copies.pullable(segs)) {
                mode = Wire.MODE_PULL; // a grant, please: this side copies the bytes out of the target
            } else if (Wire.carriesData(o)) {
                if (bytes <= Math.min(qp.device.inlineThreshold, lane.myRequests.maxPayload - Wire.REQ_HEADER)) {
                    length += (int) bytes;
                } else if (lane.peerPulls() && Copies.pullable(segs)) {
                    if (in.pulling > 0 && in.pulling + bytes > PULL_WINDOW) {
                        return null; // waits for the pulls under way (their sources stay in use until answered)
                    }
                    mode = Wire.MODE_PULL;
                    length += Wire.ENTRY * segs.count();
                } else {
                    mode = Wire.MODE_STREAM;
                }
            }
            Ring ring = lane.myRequests;
            long at = ring.claim(Wire.REQ, length);
            if (at < 0) {
                return null;
            }
            MemorySegment r = ring.segment();
            r.set(JAVA_LONG, at + Wire.R_SEQ, w.seq());
            r.set(JAVA_BYTE, at + Wire.R_OPCODE, (byte) o.ordinal());
            r.set(JAVA_BYTE, at + Wire.R_MODE, (byte) mode);
            r.set(JAVA_SHORT, at + Wire.R_FLAGS, (short) ((ctx.rnrRetry() & Wire.FLAG_RNR_MASK)
                    | (w.solicited() ? Wire.FLAG_SOLICITED : 0)));
            r.set(JAVA_INT, at + Wire.R_IMM, o == Opcode.SEND_WITH_INV ? qp.keys.invalidateKey(w.invalidateRkey()) : w.immData());
            r.set(JAVA_LONG, at + Wire.R_RADDR, w.remoteAddress());
            r.set(JAVA_INT, at + Wire.R_RKEY, (int) key);
            boolean names = mode == Wire.MODE_PULL && !sink; // a WRITE's or SEND's entries, for the target to pull
            r.set(JAVA_INT, at + Wire.R_ENTRIES, names ? segs.count() : 0);
            r.set(JAVA_LONG, at + Wire.R_TOTAL, bytes);
            r.set(JAVA_LONG, at + Wire.R_CMP, w.compareAdd());
            r.set(JAVA_LONG, at + Wire.R_SWAP, w.swap());
            if (mode == Wire.MODE_INLINE && Wire.carriesData(o)
                    && !Copies.fromPieces(segs, 0, r, at + Wire.REQ_HEADER, bytes)) {
                ring.cancel(at);
                return WcStatus.LOC_PROT_ERR; // its memory ended under the copy (freed without deregistration)
            }
            if (names) {
                long e = at + Wire.REQ_HEADER;
                for (int k = 0; k < segs.count(); k++, e += Wire.ENTRY) {
                    r.set(JAVA_LONG, e, segs.segment(k).address() + segs.offset(k));
                    r.set(JAVA_LONG, e + 8, segs.length(k));
                }
            }
            in.seq[slot] = w.seq();
            lastStarted = w.seq();
            in.op[slot] = o;
            in.pulled[slot] = mode == Wire.MODE_PULL;
            in.signaled[slot] = w.signaled();
            if (in.signaled[slot]) {
                in.signaledOut++;
            }
            if (in.pulled[slot] && !sink) {
                in.pulling += bytes;
            }
            in.total[slot] = bytes;
            in.since[slot] = 0; // (its wait counts from a later look: timedOut)
            in.placed[slot] = 0;
            in.failed[slot] = false;
            in.count++;
            if (mode == Wire.MODE_STREAM) {
                streamSeq = w.seq();
                streamSlot = slot;
                streamOffset = 0;
                streamSrc.clear();
                streamSrc.addAll(segs);
            }
            if (!sink && mode != Wire.MODE_PULL) {
                segs.clear(); // copied inline, or streamed from its own copy: nothing waits on it
            }
            return WcStatus.SUCCESS;
        } finally {
            qp.reader.exit();
        }
    }

    /** Streams the bytes of the request in progress while the ring has room; the records written. */
    private int stream(Lane lane) {
        Ring ring = lane.myRequests;
        int work = 0;
        long bytes = in.total[streamSlot];
        while (streamOffset < bytes || abortPending) {
            if (abortPending) {
                long at = ring.claim(Wire.ABORT, 8);
                if (at < 0) {
                    return work;
                }
                ring.segment().set(JAVA_LONG, at, streamSeq);
                abortPending = false;
                in.failed[streamSlot] = true;
                streamSeq = -1;
                return work + 1;
            }
            int n = (int) Math.min(Math.min(ring.maxPayload, Wire.STREAM_PIECE), bytes - streamOffset);
            long at = ring.claim(Wire.DATA, n);
            if (at < 0) {
                return work;
            }
            qp.reader.enter();
            try {
                if (!streamSrc.stillValid() || !Copies.fromPieces(streamSrc, streamOffset, ring.segment(), at, n)) {
                    ring.cancel(at);
                    abortPending = true;
                    continue;
                }
            } finally {
                qp.reader.exit();
            }
            streamOffset += n;
            work++;
            ring.publish(); // each piece at once: the target copies it in while this side fills the next
        }
        streamSeq = -1;
        return work;
    }

    /** Completes the halted request once it is the oldest (everything before it completed). */
    private void completeHalted() {
        if (haltSeq >= 0 && in.count == 0 && ctx.isReady()) { // (in the error state the flush completes it)
            PostedWr h = ctx.nextSend();
            if (h != null && h.seq() == haltSeq) {
                haltSeq = -1;
                ShmQp peer = qp.localPeer;
                if (haltStatus == WcStatus.REM_ACCESS_ERR && peer != null) {
                    // a key this side could not name (its own in-JVM connections' rule, as the provider
                    // whose QP this is): the error breaks both ends, once everything before it completed
                    peer.ctx.toError();
                }
                ctx.completeSend(haltStatus, 0);
            }
        }
    }

    // ---- answers ----

    /**
     * Takes the target's answers: its answer records, each of which also says that the requests before
     * it finished, then its finished word for the WRITEs and SENDs after them; the work done.
     */
    int answers(Lane lane) {
        Ring r = lane.peerAnswers;
        MemorySegment m = r.segment();
        int work = 0;
        while (ctx.isReady() && r.next()) {
            if (r.type == Wire.RDATA) {
                work += finishedBefore(Long.MAX_VALUE);
                int s = in.head;
                if (in.count == 0 || !Wire.isRead(in.op[s]) || in.placed[s] + r.length > in.total[s]) {
                    throw qp.violation("READ bytes where none are due");
                }
                if (!in.failed[s]) {
                    qp.reader.enter();
                    try {
                        if (!in.sinks[s].answerable() || !Copies.intoPieces(m, r.payload, in.sinks[s], in.placed[s], r.length)) {
                            in.failed[s] = true; // its memory went away: the READ fails, LOC_PROT_ERR
                        }
                    } finally {
                        qp.reader.exit();
                    }
                }
                in.placed[s] += r.length;
                r.consume();
                r.release(); // the target may write the next piece into this one's room while this side goes on
                work++;
                continue;
            } else if (r.type == Wire.RGRANT) {
                work += finishedBefore(Long.MAX_VALUE);
                WcStatus v = GrantedRead.take(qp, lane, in, r);
                copiedOwed = in.seq[in.head];
                complete(v, 0);
                work++;
                continue;
            } else if (r.type == Wire.ACK) {
                if (r.length != Wire.ACK_SIZE) {
                    throw qp.violation("an answer of " + r.length + " bytes");
                }
                long ackSeq = m.get(JAVA_LONG, r.payload + Wire.A_SEQ);
                int status = m.get(JAVA_INT, r.payload + Wire.A_STATUS);
                long found = m.get(JAVA_LONG, r.payload + Wire.A_VALUE);
                // Checked before it finishes anything: a request started and not yet answered, a known status.
                boolean possible = in.count > 0 && ackSeq >= in.seq[in.head] && ackSeq <= lastStarted && status >= 0
                        && status < Wire.STATUSES.length;
                if (possible) {
                    work += finishedBefore(ackSeq);
                }
                if (!possible || in.count == 0 || ackSeq != in.seq[in.head]) {
                    throw qp.violation("an answer to request " + ackSeq + " with status " + status + " where "
                            + (in.count == 0 ? "none is due" : "request " + in.seq[in.head] + "'s is due"));
                }
                r.consume();
                work++;
                complete(Wire.STATUSES[status], found);
                continue;
            } else if (r.type == Wire.RNR_WAIT) {
                long held = r.length == 8 ? m.get(JAVA_LONG, r.payload) : -1;
                if (in.count > 0 && held > in.seq[in.head] && held <= lastStarted) {
                    work += finishedBefore(held);
                }
                if (in.count > 0) {
                    in.since[in.head] = System.nanoTime(); // the target holds it for a receive: not lost
                }
            } else {
                throw qp.violation("an answer record of type " + r.type);
            }
            r.consume();
            work++;
        }
        r.release();
        if (copiedOwed >= 0) {
            lane.copied(copiedOwed); // the target may let go of the memory, and run what it held behind the grant
            copiedOwed = -1;
        }
        if (in.count > 0 && !Wire.answered(in.op[in.head]) && ctx.isReady()) {
            work += takeFinished(lane);
        }
        completeHalted();
        return work;
    }

    /**
     * True if nothing waits to start or stream and the target's finished word has not moved while a
     * WRITE or SEND is the oldest request under way (racy, without the lock: {@link ShmQp#quiet()}).
     */
    boolean quiet(Lane lane) {
        return next == ctx.sendTail() && streamSeq < 0 && haltSeq < 0 && !abortPending
                && (in.count == 0 || Wire.answered(in.op[in.head]) || lane.peerFinished() == peerFinished);
    }

    /** True if somebody waits for a completion of a started request (racy, without the lock). */
    boolean waitedFor() {
        return in.signaledOut > 0 || in.pulling > 0;
    }

    /** Completes the requests the target's finished word says it finished; the requests completed. */
    private int takeFinished(Lane lane) {
        long f = lane.peerFinished();
        if (f != peerFinished) {
            if (f < peerFinished || f > lastStarted + 1) {
                throw qp.violation("the target's finished word moved to " + f + " (it was " + peerFinished
                        + ", the last request started is " + lastStarted + ")");
            }
            peerFinished = f;
        }
        return finishedBefore(f);
    }

    /**
     * Completes, successfully, the oldest started requests whose success has no answer record (WRITEs,
     * SENDs) and whose sequence is below {@code end}: the target finished them (it said so in its
     * finished word, or answered a later request). The requests completed.
     */
    private int finishedBefore(long end) {
        int n = 0;
        while (in.count > 0 && in.seq[in.head] < end && !Wire.answered(in.op[in.head]) && ctx.isReady()) {
            complete(WcStatus.SUCCESS, 0);
            n++;
        }
        return n;
    }

    /** Completes the oldest started request with the target's verdict. */
    private void complete(WcStatus verdict, long found) {
        int s = in.head;
        Opcode o = in.op[s];
        WcStatus status = verdict;
        if (status == WcStatus.SUCCESS && Wire.isRead(o) && in.placed[s] != in.total[s]) {
            throw qp.violation("a READ answered with " + in.placed[s] + " of its " + in.total[s] + " bytes");
        }
        if (status == WcStatus.SUCCESS && Wire.isAtomic(o) && !in.failed[s]) {
            value.set(JAVA_LONG, 0, found);
            qp.reader.enter();
            try {
                if (!in.sinks[s].answerable() || !Copies.intoPieces(value, 0, in.sinks[s], 0, 8)) {
                    in.failed[s] = true;
                }
            } finally {
                qp.reader.exit();
            }
        }
        if (in.failed[s] && (status == WcStatus.SUCCESS || streamAborted(s))) {
            status = WcStatus.LOC_PROT_ERR;
        }
        PostedWr w = ctx.nextSend();
        if (w == null || w.seq() != in.seq[s]) {
            throw qp.violation("an answer to request " + in.seq[s] + " that is not the oldest");
        }
        in.head = (in.head + 1) % in.seq.length;
        in.count--;
        if (in.signaled[s]) {
            in.signaledOut--;
        }
        in.sinks[s].clear();
        if (in.pulled[s] && Wire.carriesData(o)) {
            in.pulling -= in.total[s];
        }
        long bytes = status == WcStatus.SUCCESS ? w.totalLength() : 0;
        int invalidate = o == Opcode.RDMA_READ_WITH_INV ? w.sgeLkey(0) : 0;
        ctx.completeSend(status, bytes);
        if (o == Opcode.RDMA_READ_WITH_INV && status == WcStatus.SUCCESS) {
            qp.invalidateLocal(invalidate);
        }
    }

    /** True for a streamed request this side gave up (an ABORT went): whatever the target says, it failed. */
    private boolean streamAborted(int slot) {
        return in.failed[slot] && Wire.carriesData(in.op[slot]);
    }

    /**
     * Fails the oldest started request after {@code timeoutNanos} without its answer (RETRY_EXC_ERR, as a NIC's retries
     * running out), counted from a look at it as the oldest (a post's own round reads no clock); true if it did.
     */
    boolean timedOut(Lane lane, long timeoutNanos) {
        if (in.count == 0 || timeoutNanos <= 0 || (++looks & 63) != 0) { // (the clock: every 64th look)
            return false;
        }
        long now = System.nanoTime();
        if (in.since[in.head] == 0) {
            in.since[in.head] = now; // (its wait starts)
        }
        if (now - in.since[in.head] < timeoutNanos) {
            return false;
        }
        if (!Wire.answered(in.op[in.head]) && takeFinished(lane) > 0) {
            return false; // finished after all: its completion was not looked for
        }
        in.count = 0;
        in.pulling = 0;
        ctx.completeSend(WcStatus.RETRY_EXC_ERR, 0);
        return true;
    }
}
