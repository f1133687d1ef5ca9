package io.regmem.registration.soft;

import io.regmem.registration.Access;
import io.regmem.registration.Opcode;
import io.regmem.registration.QpType;
import io.regmem.registration.WcStatus;
import io.regmem.registration.faults.QpFaults;
import io.regmem.registration.spi.Atomics;
import io.regmem.registration.spi.GracePeriod;
import io.regmem.registration.spi.MemoryAccess;
import io.regmem.registration.spi.MrContext;
import io.regmem.registration.spi.PostedWr;
import io.regmem.registration.spi.ProviderQp;
import io.regmem.registration.spi.QpContext;
import io.regmem.registration.spi.Segments;
import java.lang.foreign.MemorySegment;
import java.net.InetAddress;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A soft queue pair and its executor: it executes the queued requests exactly as a NIC would check
 * them and moves bytes with {@code MemorySegment.copy} through the registered segments themselves,
 * so every access is bounds- and lifetime-checked by the JDK and nothing can touch memory whose
 * scope has ended.
 *
 * <h2>Locks</h2>
 * The executor runs under the QP's own lock ({@link QpContext#lock()}); a request that consumes a
 * receive at the peer (SEND, SEND_WITH_INV, RDMA_WRITE_WITH_IMM) also needs the peer's lock, which it
 * only tries: when the peer is busy (executing, posting, waiting out a grace period) the request
 * stays queued for a later progress, so no executor ever waits for another while it holds a lock.
 * RDMA WRITE and READ need no lock of the peer: they touch its memory through its keys, which the
 * grace period protects. Independent connections share no lock.
 *
 * <h2>All or nothing</h2>
 * Every check of a request comes before its first byte moves, so a request that fails a check
 * leaves every target and sink untouched: local SGE keys (else {@link WcStatus#LOC_PROT_ERR}); the
 * peer (gone: {@link WcStatus#RETRY_EXC_ERR}); the remote key (else {@link WcStatus#REM_ACCESS_ERR});
 * a receive at the peer where one is consumed (none: {@link WcStatus#RNR_RETRY_EXC_ERR}) and its
 * buffers (bad: the receive completes with {@link WcStatus#LOC_PROT_ERR} and the sender gets
 * {@link WcStatus#REM_OP_ERR}; too small: {@link WcStatus#LOC_LEN_ERR} and {@link WcStatus#REM_INV_REQ_ERR}).
 *
 * <h2>Deregistration</h2>
 * Checking and copying happen inside a section of the QP's {@link GracePeriod.Reader} (of
 * {@link SoftWire#GRACE}): a thread that deregisters or invalidates memory makes it invalid and then
 * waits for the sections in progress. A request is copied in pieces of at most
 * {@link Segments#PIECE} bytes, one section each, every registration checked again between pieces:
 * a request of up to {@code PIECE} bytes is all or nothing even against a concurrent
 * deregistration; a larger one stops at a piece boundary with an error, as on a NIC.
 */
final class SoftQueuePair implements ProviderQp {
    private static final AtomicLong ORDER = new AtomicLong();
    final QpContext ctx;
    /** The order {@link #link} takes two QPs' locks in (connection setup and teardown only). */
    private final long order = ORDER.incrementAndGet();
    private final SoftDevice device;
    private final MemoryAccess memory;
    /** This QP's executor as a reader of {@link SoftWire#GRACE}. */
    private final GracePeriod.Reader reader = SoftWire.GRACE.newReader();
    private final SoftIntegrity integrity = new SoftIntegrity();
    private final Segments src = new Segments(integrity);
    private final Segments dst = new Segments(integrity);
    /** An atomic's value found at the target, copied into its local SGE from here. */
    private final MemorySegment atomicValue = MemorySegment.ofArray(new long[1]);
    private final Segments atomicSrc = new Segments();
    /** A fast-reg MR that the request invalidates once its data is placed (READ_WITH_INV, SEND_WITH_INV). */
    private MrContext pendingInvalidate;
    /** The connected peer, or null; changed under both QPs' locks. */
    volatile SoftQueuePair peer;
    final SoftQp faults = new SoftQp(this);
    /** The soft half of the QP's send CQ. */
    final SoftCq sendCq;
    /** A UD QP's sends; null for RC. */
    private final SoftDatagrams datagrams;

    SoftQueuePair(SoftDevice device, QpContext ctx) {
        this.device = device;
        this.ctx = ctx;
        this.memory = ctx.memory();
        this.sendCq = SoftContexts.cq(ctx.sendCq());
        this.datagrams = ctx.qpType() == QpType.UD ? new SoftDatagrams(this, reader, device.udOversizeError()) : null;
        ctx.attach(this);
        if (datagrams != null) {
            SoftFabric.add(this);
        }
    }

    ReentrantLock lock() {
        return ctx.lock();
    }

    @Override
    public void sendPosted(long firstSeq, int count) {
        // Executed at the next progress (a poll of a CQ it completes on, or the progress thread).
    }

    @Override
    public void recvPosted(long firstSeq, int count) {
    }

    @Override
    public void stop() {
        // The executor runs under the QP's execution lock, which the caller holds: nothing is in progress.
    }

    @Override
    public int importRemoteKey(MemorySegment exported) {
        return SoftDevice.importKey(exported, ctx.name());
    }

    @Override
    public void attachMulticast(InetAddress gid) {
        SoftFabric.join(gid, this);
    }

    @Override
    public void detachMulticast(InetAddress gid) {
        SoftFabric.leave(gid, this);
    }

    @Override
    public void destroy() {
        if (datagrams != null) {
            SoftFabric.remove(this);
        }
        link(this, null);
        device.removeQp(this);
        reader.close();
    }

    @Override
    public <T> T unwrap(Class<T> type) {
        return type == QpFaults.class ? type.cast(faults) : ProviderQp.super.unwrap(type);
    }

    /**
     * Connects {@code a} to {@code b} (null: disconnects {@code a} from its peer, which moves to the
     * error state), under both QPs' locks.
     */
    static void link(SoftQueuePair a, SoftQueuePair b) {
        SoftQueuePair other = b != null ? b : a.peer;
        if (other == null) {
            return;
        }
        SoftQueuePair first = a.order < other.order ? a : other;
        SoftQueuePair second = first == a ? other : a;
        first.lock().lock();
        second.lock().lock();
        try {
            if (b != null) {
                a.peer = b;
                b.peer = a;
                a.ctx.ready();
                b.ctx.ready();
            } else if (a.peer == other) {
                other.ctx.toError(); // the peer loses its connection
                other.peer = null;
                a.peer = null;
            }
        } finally {
            second.lock().unlock();
            first.lock().unlock();
        }
    }

    /**
     * Tries to take this (the peer's) QP lock while the caller holds another: never waits, so two
     * executors sending to each other cannot deadlock, and nobody waits behind a peer that is
     * executing, posting, or waiting out a grace period. False: the request stays queued and runs at
     * a later progress (of this QP, or of the peer, whose CQ's poll progresses this QP too).
     */
    boolean tryLockAsPeer() {
        ReentrantLock l = lock();
        for (int spin = 0; spin < PEER_SPINS; spin++) {
            if (l.tryLock()) {
                return true;
            }
            Thread.onSpinWait(); // its holder is usually a short post or poll
        }
        return false;
    }

    /** Tries of a busy peer's lock before the request is left for a later progress. */
    private static final int PEER_SPINS = 64;

    // ---- execution ---------------------------------------------------------------------------

    /** Executes (or, in the error state, flushes) everything queued. Any thread that holds no QP lock. */
    void progress() {
        progress(null);
    }

    /**
     * As {@link #progress()} if the QP has work and its lock is free (a duty-cycle round must not wait
     * for a poster): 1 if it ran, 0 if there was nothing to do or its owner holds it.
     */
    int progressIfFree() {
        if (ctx.idle()) {
            return 0;
        }
        ReentrantLock l = lock();
        if (!l.tryLock()) {
            return 0;
        }
        try {
            run();
            return 1;
        } finally {
            l.unlock();
        }
    }

    /**
     * As {@link #progress()}, by a thread that holds {@code held}'s lock (or null): this QP's own lock
     * is then not taken again, or only tried.
     */
    void progress(SoftQueuePair held) {
        if (ctx.idle()) {
            return; // nothing to execute or flush: not even the lock
        }
        if (held == this) {
            run();
            return;
        }
        ReentrantLock l = lock();
        if (held == null) {
            l.lock();
        } else if (!l.tryLock()) {
            return; // its owner is executing or posting it: its work is done there or at the next poll
        }
        try {
            run();
        } finally {
            l.unlock();
        }
    }

    private void run() {
        PostedWr w;
        while ((w = ctx.nextSend()) != null) {
            if (!ctx.isReady() || faults.paused) {
                break;
            }
            long seq = w.seq();
            if (datagrams != null) {
                WcStatus injected = faults.injectedFor(seq);
                WcStatus status = injected != null ? injected : datagrams.send(w);
                if (status == null) {
                    break; // a destination was busy: the rest of it at the next progress
                }
                ctx.completeSend(status, status == WcStatus.SUCCESS ? w.totalLength() : 0);
                continue;
            }
            SoftQueuePair p = null;
            if (consumesReceive(w.opcode())) {
                p = peer;
                if (p != null && !p.tryLockAsPeer()) {
                    break; // the peer is busy: this request waits for the next progress
                }
            }
            WcStatus status;
            try {
                WcStatus injected = faults.injectedFor(seq);
                status = injected != null ? injected : execute(w, p);
                if (status == WcStatus.RNR_RETRY_EXC_ERR && injected == null && retriesRnr(seq, p)) {
                    break; // no receive at the peer yet: retried at the next progress, as a NIC's RNR retry
                }
            } finally {
                if (p != null) {
                    p.lock().unlock();
                }
            }
            ctx.completeSend(status, status == WcStatus.SUCCESS ? w.totalLength() : 0);
            if (status == WcStatus.REM_ACCESS_ERR || status == WcStatus.REM_OP_ERR || status == WcStatus.REM_INV_REQ_ERR) {
                SoftQueuePair other = peer;
                if (other != null) {
                    other.ctx.toError(); // a NAKed protection or request error breaks the connection at both ends
                }
            }
        }
        if (ctx.isError()) {
            ctx.flush();
        }
    }

    /** The request whose RNR retries run, and until when ({@link #retriesRnr}); execution lock. */
    private long rnrSeq = -1;
    private long rnrUntil;

    /**
     * True if request {@code seq}, which found no receive at {@code peer}, is retried (stays queued):
     * under {@code rnrRetry} 7 for ever, under 1 to 6 until that many of the peer's RNR timers have
     * passed since it first found none; 0 fails it at once.
     */
    private boolean retriesRnr(long seq, SoftQueuePair peer) {
        int retry = ctx.rnrRetry();
        if (retry == 0 || peer == null) {
            return false;
        }
        if (retry == 7) {
            return true;
        }
        long now = System.nanoTime();
        if (seq != rnrSeq) {
            rnrSeq = seq;
            rnrUntil = now + retry * peer.ctx.minRnrTimerNanos();
        }
        return now - rnrUntil < 0;
    }

    private static boolean consumesReceive(Opcode op) {
        return op == Opcode.SEND || op == Opcode.SEND_WITH_INV || op == Opcode.SEND_WITH_IMM || op == Opcode.RDMA_WRITE_WITH_IMM;
    }

    private WcStatus execute(PostedWr w, SoftQueuePair locked) {
        if (w.opcode() == Opcode.LOCAL_INV) {
            return localInv(w); // touches no memory: outside a section, so it may wait out the readers
        }
        WcStatus status;
        reader.enter();
        try {
            status = switch (w.opcode()) {
                case REG_MR, REG_MR_INTEGRITY -> memory.fastRegister(w);
                case BIND_MW -> memory.bindWindow(w);
                case RDMA_WRITE, RDMA_WRITE_WITH_IMM -> write(w, locked);
                case RDMA_READ, RDMA_READ_WITH_INV -> read(w);
                case SEND, SEND_WITH_INV, SEND_WITH_IMM -> send(w, locked);
                case ATOMIC_CMP_AND_SWP, ATOMIC_FETCH_AND_ADD -> atomic(w);
                default -> WcStatus.GENERAL_ERR;
            };
        } finally {
            reader.exit();
            src.clear();
            dst.clear();
            integrity.clearPending();
        }
        MrContext invalidate = pendingInvalidate;
        pendingInvalidate = null;
        if (invalidate != null) {
            // After the data is placed (verbs order), outside the section: wait out the other readers.
            memory.invalidate(invalidate);
            SoftWire.GRACE.synchronize();
        }
        return status;
    }

    private WcStatus localInv(PostedWr w) {
        MrContext mr = memory.invalidationTarget(w.invalidateRkey());
        if (mr == null) {
            return WcStatus.LOC_PROT_ERR;
        }
        memory.invalidate(mr);
        SoftWire.GRACE.synchronize();
        return WcStatus.SUCCESS;
    }

    /** The connected peer if it can take requests, else null. */
    private SoftQueuePair livePeer() {
        SoftQueuePair p = peer;
        return p == null || p.ctx.isDestroyed() || p.ctx.isError() ? null : p;
    }

    private WcStatus write(PostedWr w, SoftQueuePair locked) {
        if (!memory.gatherLocal(w, src, false)) {
            return WcStatus.LOC_PROT_ERR;
        }
        SoftQueuePair p = livePeer();
        if (p == null || (w.opcode() == Opcode.RDMA_WRITE_WITH_IMM && p != locked)) {
            return WcStatus.RETRY_EXC_ERR;
        }
        long total = w.totalLength();
        if (!p.memory.resolveRemote(w.remoteAddress(), total, w.rkey(), Access.REMOTE_WRITE, dst)) {
            return WcStatus.REM_ACCESS_ERR;
        }
        boolean imm = w.opcode() == Opcode.RDMA_WRITE_WITH_IMM;
        if (imm && p.ctx.nextRecv() == null) {
            return WcStatus.RNR_RETRY_EXC_ERR;
        }
        int copied = Segments.copy(reader, src, dst);
        if (copied != Segments.COPIED) {
            return copied == Segments.SRC_FAILED ? WcStatus.LOC_PROT_ERR : WcStatus.REM_ACCESS_ERR;
        }
        if (imm) {
            p.ctx.completeRecv(WcStatus.SUCCESS, Opcode.RECV_RDMA_WITH_IMM, total, true, w.immData(), false, 0, w.solicited());
        }
        return WcStatus.SUCCESS;
    }

    private WcStatus atomic(PostedWr w) {
        if (!memory.gatherLocal(w, dst, true)) {
            return WcStatus.LOC_PROT_ERR;
        }
        SoftQueuePair p = livePeer();
        if (p == null) {
            return WcStatus.RETRY_EXC_ERR;
        }
        WcStatus s = Atomics.execute(p.memory, w.opcode(), w.remoteAddress(), w.rkey(), w.compareAdd(), w.swap(), src,
                atomicValue);
        if (s != WcStatus.SUCCESS) {
            return s;
        }
        atomicSrc.clear();
        atomicSrc.add(atomicValue, 0, 8);
        int copied = Segments.copy(reader, atomicSrc, dst);
        atomicSrc.clear();
        return copied == Segments.COPIED ? WcStatus.SUCCESS : WcStatus.LOC_PROT_ERR;
    }

    private WcStatus read(PostedWr w) {
        if (!memory.gatherLocal(w, dst, true)) {
            return WcStatus.LOC_PROT_ERR;
        }
        SoftQueuePair p = livePeer();
        if (p == null) {
            return WcStatus.RETRY_EXC_ERR;
        }
        if (!p.memory.resolveRemote(w.remoteAddress(), w.totalLength(), w.rkey(), Access.REMOTE_READ, src)) {
            return WcStatus.REM_ACCESS_ERR;
        }
        int copied = Segments.copy(reader, src, dst);
        if (copied != Segments.COPIED) {
            return copied == Segments.SRC_FAILED ? WcStatus.REM_ACCESS_ERR : WcStatus.LOC_PROT_ERR;
        }
        if (!integrity.finishInbound()) {
            return WcStatus.LOC_PROT_ERR;
        }
        if (w.opcode() == Opcode.RDMA_READ_WITH_INV) {
            pendingInvalidate = memory.invalidationTarget(w.sgeLkey(0));
        }
        return WcStatus.SUCCESS;
    }

    private WcStatus send(PostedWr w, SoftQueuePair locked) {
        if (!memory.gatherLocal(w, src, false)) {
            return WcStatus.LOC_PROT_ERR;
        }
        SoftQueuePair p = livePeer();
        if (p == null || p != locked) {
            return WcStatus.RETRY_EXC_ERR;
        }
        PostedWr recv = p.ctx.nextRecv();
        if (recv == null) {
            return WcStatus.RNR_RETRY_EXC_ERR;
        }
        long total = w.totalLength();
        if (!p.memory.gatherLocal(recv, dst, true)) {
            return failReceive(p, WcStatus.LOC_PROT_ERR, WcStatus.REM_OP_ERR);
        }
        if (dst.total() < total) {
            return failReceive(p, WcStatus.LOC_LEN_ERR, WcStatus.REM_INV_REQ_ERR);
        }
        MrContext invalidated = null;
        if (w.opcode() == Opcode.SEND_WITH_INV) {
            invalidated = p.memory.invalidationTarget(w.invalidateRkey());
            if (invalidated == null) {
                return WcStatus.REM_INV_REQ_ERR;
            }
        }
        dst.truncate(total);
        int copied = Segments.copy(reader, src, dst);
        if (copied == Segments.SRC_FAILED) {
            return WcStatus.LOC_PROT_ERR; // the message never completes: the receive stays posted
        }
        if (copied == Segments.DST_FAILED) {
            return failReceive(p, WcStatus.LOC_PROT_ERR, WcStatus.REM_OP_ERR);
        }
        pendingInvalidate = invalidated;
        boolean imm = w.opcode() == Opcode.SEND_WITH_IMM;
        p.ctx.completeRecv(WcStatus.SUCCESS, Opcode.RECV, total, imm, imm ? w.immData() : 0, invalidated != null,
                w.invalidateRkey(), w.solicited());
        return WcStatus.SUCCESS;
    }

    /** The receive at the peer fails with {@code recvStatus} (the peer breaks); the sender gets {@code senderStatus}. */
    private static WcStatus failReceive(SoftQueuePair p, WcStatus recvStatus, WcStatus senderStatus) {
        p.ctx.completeRecv(recvStatus, Opcode.RECV, 0, false, 0, false, 0);
        return senderStatus;
    }
}
