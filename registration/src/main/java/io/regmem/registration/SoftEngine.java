package io.regmem.registration;

import java.lang.foreign.MemorySegment;

/**
 * The soft provider's data path: it executes queued work requests exactly as a NIC would check
 * them, and moves bytes with {@link MemorySegment#copy} through the registered segments
 * themselves, so every access is bounds- and lifetime-checked by the JDK and nothing can touch
 * memory whose scope has ended. Everything here runs under {@link Fabric#LOCK}.
 *
 * <p>Order of checks for one request (all before any byte moves, so a failed request leaves the
 * target untouched): local SGE keys (resolve, same PD, range inside, LOCAL_WRITE where written:
 * else {@link WcStatus#LOC_PROT_ERR}); the peer (gone: {@link WcStatus#RETRY_EXC_ERR}); the remote key
 * (resolve, the peer QP's PD, range inside, the right granted: else {@link WcStatus#REM_ACCESS_ERR});
 * a receive at the peer where one is consumed (none: {@link WcStatus#RNR_RETRY_EXC_ERR}) and its
 * buffers (too small: {@link WcStatus#REM_INV_REQ_ERR} / {@link WcStatus#LOC_LEN_ERR}).
 */
final class SoftEngine {
    private static final Pieces SRC = new Pieces();
    private static final Pieces DST = new Pieces();

    private SoftEngine() {
    }

    /** Progresses every QP of every open device. */
    static void progressAll() {
        for (RdmaDevice d : Fabric.devices()) {
            for (QueuePair qp : d.queuePairs()) {
                progress(qp);
            }
        }
    }

    /** Executes (or, in the error state, flushes) everything the QP has queued. */
    static void progress(QueuePair qp) {
        Wqe w;
        while ((w = qp.sq.peek()) != null) {
            if (qp.state() == QueuePair.State.ERROR) {
                complete(qp, qp.sendCq(), w, WcStatus.WR_FLUSH_ERR, w.opcode, 0, true);
                qp.sq.pop();
                continue;
            }
            if (qp.state() != QueuePair.State.RTS || qp.paused) {
                break;
            }
            WcStatus status = w.injected != null ? w.injected : execute(qp, w);
            qp.sq.pop();
            long bytes = status == WcStatus.SUCCESS ? w.totalLength() : 0;
            complete(qp, qp.sendCq(), w, status, w.opcode, bytes, status != WcStatus.SUCCESS || w.signaled);
            if (status != WcStatus.SUCCESS) {
                toError(qp);
                if (status == WcStatus.REM_ACCESS_ERR || status == WcStatus.REM_OP_ERR
                        || status == WcStatus.REM_INV_REQ_ERR) {
                    QueuePair peer = qp.peer;
                    if (peer != null) {
                        toError(peer); // a NAKed protection or request error breaks the connection at both ends
                    }
                }
            }
        }
        if (qp.state() == QueuePair.State.ERROR) {
            while ((w = qp.rq.peek()) != null) {
                complete(qp, qp.recvCq(), w, WcStatus.WR_FLUSH_ERR, Opcode.RECV, 0, true);
                qp.rq.pop();
            }
        }
    }

    static void toError(QueuePair qp) {
        qp.state(QueuePair.State.ERROR);
    }

    private static void complete(QueuePair qp, CompletionQueue cq, Wqe w, WcStatus status, Opcode op, long bytes,
                                 boolean generate) {
        if (!generate) {
            return;
        }
        WorkCompletion wc = cq.reserve();
        if (wc == null) {
            toError(qp); // CQ overrun: the completion is lost and the QP can no longer be trusted
            return;
        }
        wc.wrId = w.wrId;
        wc.status = status;
        wc.opcode = op;
        wc.byteLen = bytes;
        wc.qp = qp;
        cq.commit();
    }

    private static WcStatus execute(QueuePair qp, Wqe w) {
        return switch (w.opcode) {
            case REG_MR, REG_MR_INTEGRITY -> regMr(qp, w);
            case LOCAL_INV -> localInv(qp, w);
            case RDMA_WRITE, RDMA_WRITE_WITH_IMM -> write(qp, w);
            case RDMA_READ, RDMA_READ_WITH_INV -> read(qp, w);
            case SEND, SEND_WITH_INV -> send(qp, w);
            default -> WcStatus.GENERAL_ERR;
        };
    }

    // ---- memory operations -----------------------------------------------------------------------

    private static WcStatus regMr(QueuePair qp, Wqe w) {
        MemoryRegion mr = w.regMr;
        if (mr.isDestroyed() || !mr.isFastReg() || mr.pd() != qp.pd() || (w.regKey >>> 8) != (mr.lkey() >>> 8)) {
            return WcStatus.LOC_PROT_ERR;
        }
        int access = w.regAccess;
        if ((access & ~0xFF) != 0 || ((Access.has(access, Access.REMOTE_WRITE) || Access.has(access, Access.REMOTE_ATOMIC))
                && !Access.has(access, Access.LOCAL_WRITE))) {
            return WcStatus.LOC_PROT_ERR;
        }
        DmaTable dma = qp.device.dma;
        for (int i = 0; i < mr.pageCount(); i++) {
            DmaMapping m = dma.find(mr.rawPage(i), 1);
            if (m == null) {
                return WcStatus.LOC_PROT_ERR;
            }
            mr.pageMemory(i, m.segment(), mr.rawPage(i) - m.address());
        }
        // A page's bytes must lie inside the mapping that holds its first byte, up to the page end
        // or the region's end: checked per access against the segment's bounds.
        if ((w.opcode == Opcode.REG_MR_INTEGRITY) != mr.isIntegrity()) {
            return WcStatus.LOC_PROT_ERR; // integrity MRs register with REG_MR_INTEGRITY, others with REG_MR
        }
        mr.key(w.regKey);
        mr.activate(access);
        if (mr.integrity != null) {
            mr.integrity.registered();
        }
        return WcStatus.SUCCESS;
    }

    private static WcStatus localInv(QueuePair qp, Wqe w) {
        MemoryRegion mr = qp.device.keys.current(w.invalidateRkey);
        if (mr == null || !mr.isFastReg() || mr.pd() != qp.pd()) {
            return WcStatus.LOC_PROT_ERR;
        }
        mr.invalidate();
        return WcStatus.SUCCESS;
    }

    private static WcStatus write(QueuePair qp, Wqe w) {
        if (!gatherLocal(qp, w, SRC, false)) {
            return WcStatus.LOC_PROT_ERR;
        }
        QueuePair peer = qp.peer;
        if (peer == null || peer.isDestroyed() || peer.state() == QueuePair.State.ERROR) {
            return WcStatus.RETRY_EXC_ERR;
        }
        long total = w.totalLength();
        if (!resolveRemote(peer, w.remoteAddress, total, w.rkey, Access.REMOTE_WRITE, DST)) {
            return WcStatus.REM_ACCESS_ERR;
        }
        Wqe recv = null;
        if (w.opcode == Opcode.RDMA_WRITE_WITH_IMM) {
            recv = peer.rq.peek();
            if (recv == null) {
                return WcStatus.RNR_RETRY_EXC_ERR;
            }
        }
        if (!copy(SRC, DST)) {
            return WcStatus.REM_ACCESS_ERR;
        }
        if (recv != null) {
            peer.rq.pop();
            WorkCompletion wc = peerCompletion(peer, recv, WcStatus.SUCCESS, Opcode.RECV_RDMA_WITH_IMM, total);
            if (wc != null) {
                wc.withImm = true;
                wc.immData = w.immData;
                peer.recvCq().commit();
            }
        }
        return WcStatus.SUCCESS;
    }

    private static WcStatus read(QueuePair qp, Wqe w) {
        if (!gatherLocal(qp, w, DST, true)) {
            return WcStatus.LOC_PROT_ERR;
        }
        QueuePair peer = qp.peer;
        if (peer == null || peer.isDestroyed() || peer.state() == QueuePair.State.ERROR) {
            return WcStatus.RETRY_EXC_ERR;
        }
        if (!resolveRemote(peer, w.remoteAddress, w.totalLength(), w.rkey, Access.REMOTE_READ, SRC)) {
            Integrity.clearPending();
            return WcStatus.REM_ACCESS_ERR;
        }
        if (!copy(SRC, DST) || !Integrity.finishInbound()) {
            return WcStatus.LOC_PROT_ERR;
        }
        if (w.opcode == Opcode.RDMA_READ_WITH_INV) {
            MemoryRegion sink = qp.device.keys.current(w.lkey[0]);
            if (sink != null && sink.isFastReg()) {
                sink.invalidate();
            }
        }
        return WcStatus.SUCCESS;
    }

    private static WcStatus send(QueuePair qp, Wqe w) {
        if (!gatherLocal(qp, w, SRC, false)) {
            return WcStatus.LOC_PROT_ERR;
        }
        QueuePair peer = qp.peer;
        if (peer == null || peer.isDestroyed() || peer.state() == QueuePair.State.ERROR) {
            return WcStatus.RETRY_EXC_ERR;
        }
        Wqe recv = peer.rq.peek();
        if (recv == null) {
            return WcStatus.RNR_RETRY_EXC_ERR;
        }
        long total = w.totalLength();
        if (!gatherLocal(peer, recv, DST, true)) {
            peer.rq.pop();
            peerCompletionCommit(peer, recv, WcStatus.LOC_PROT_ERR, Opcode.RECV, 0);
            toError(peer);
            return WcStatus.REM_OP_ERR;
        }
        if (DST.total() < total) {
            peer.rq.pop();
            peerCompletionCommit(peer, recv, WcStatus.LOC_LEN_ERR, Opcode.RECV, 0);
            toError(peer);
            return WcStatus.REM_INV_REQ_ERR;
        }
        MemoryRegion invalidated = null;
        if (w.opcode == Opcode.SEND_WITH_INV) {
            invalidated = peer.device.keys.current(w.invalidateRkey);
            if (invalidated == null || !invalidated.isFastReg() || invalidated.pd() != peer.pd()) {
                return WcStatus.REM_INV_REQ_ERR;
            }
        }
        DST.truncate(total);
        if (!copy(SRC, DST)) {
            return WcStatus.REM_OP_ERR;
        }
        peer.rq.pop();
        if (invalidated != null) {
            invalidated.invalidate();
        }
        WorkCompletion wc = peerCompletion(peer, recv, WcStatus.SUCCESS, Opcode.RECV, total);
        if (wc != null) {
            if (invalidated != null) {
                wc.withInv = true;
                wc.invalidatedRkey = w.invalidateRkey;
            }
            peer.recvCq().commit();
        }
        return WcStatus.SUCCESS;
    }

    private static WorkCompletion peerCompletion(QueuePair peer, Wqe recv, WcStatus status, Opcode op, long bytes) {
        WorkCompletion wc = peer.recvCq().reserve();
        if (wc == null) {
            toError(peer);
            return null;
        }
        wc.wrId = recv.wrId;
        wc.status = status;
        wc.opcode = op;
        wc.byteLen = bytes;
        wc.qp = peer;
        return wc;
    }

    private static void peerCompletionCommit(QueuePair peer, Wqe recv, WcStatus status, Opcode op, long bytes) {
        if (peerCompletion(peer, recv, status, op, bytes) != null) {
            peer.recvCq().commit();
        }
    }

    // ---- address resolution ----------------------------------------------------------------------

    /** Resolves a WQE's local SGEs into pieces; false on any protection failure. */
    private static boolean gatherLocal(QueuePair qp, Wqe w, Pieces out, boolean write) {
        out.clear();
        Integrity.clearPending();
        int dmaKey = qp.device.keys.dmaKey();
        for (int i = 0; i < w.numSge; i++) {
            long addr = w.address[i];
            long len = w.length[i];
            int lkey = w.lkey[i];
            if (lkey == dmaKey) {
                DmaMapping m = qp.device.dma.find(addr, len);
                if (m == null) {
                    return false;
                }
                out.add(m.segment(), addr - m.address(), len);
                continue;
            }
            MemoryRegion mr = qp.device.keys.lookup(lkey, false);
            if (mr == null || mr.isWindow() || mr.pd() != qp.pd() || (write && !Access.has(mr.access(), Access.LOCAL_WRITE))) {
                return false;
            }
            if (mr.integrity != null ? w.numSge != 1 || !mr.integrity.gather(addr, len, write, out)
                    : !regionPieces(mr, addr, len, out)) {
                return false;
            }
        }
        return true;
    }

    private static boolean resolveRemote(QueuePair peer, long addr, long len, int rkey, Access right, Pieces out) {
        out.clear();
        MemoryRegion mr = peer.device.keys.lookup(rkey, true);
        if (mr == null || mr.pd() != peer.pd() || !Access.has(mr.access(), right)) {
            return false;
        }
        long a = Access.has(mr.access(), Access.ZERO_BASED) ? mr.address() + addr : addr;
        return regionPieces(mr, a, len, out);
    }

    /** Adds the pieces of {@code [addr, addr + len)} inside a region; false if outside or unreachable. */
    private static boolean regionPieces(MemoryRegion mr, long addr, long len, Pieces out) {
        long off = addr - mr.address();
        if (off < 0 || len < 0 || off > mr.length() - len) {
            return false;
        }
        if (!mr.isFastReg()) {
            MemorySegment seg = mr.segment();
            if (!seg.scope().isAlive()) {
                return false;
            }
            out.add(seg, off, len);
            return true;
        }
        return pagePieces(mr, 0, mr.address(), off, len, out);
    }

    /**
     * The pieces of {@code [off, off + len)} of a fast-reg MR's mapping that starts at page
     * {@code firstPage} with address {@code base} (integrity MRs keep data and protection mappings
     * in one page list). False if a page is unresolved, dead, or too short.
     */
    static boolean pagePieces(MemoryRegion mr, int firstPage, long base, long off, long len, Pieces out) {
        long page = mr.pageSize();
        long inPage = (base & (page - 1)) + off; // offset from the start of the first page
        while (len > 0) {
            int p = firstPage + (int) (inPage / page);
            if (p >= mr.pageCount()) {
                return false;
            }
            long po = inPage % page;
            long n = Math.min(len, page - po);
            MemorySegment seg = mr.pageSegment(p);
            long segOff = mr.pageOffset(p) + po;
            if (seg == null || !seg.scope().isAlive() || segOff + n > seg.byteSize()) {
                return false;
            }
            out.add(seg, segOff, n);
            inPage += n;
            len -= n;
        }
        return true;
    }

    /** Copies the source pieces over the destination pieces in order; false if an access failed. */
    static boolean copy(Pieces src, Pieces dst) {
        int i = 0;
        int j = 0;
        long si = 0;
        long dj = 0;
        try {
            while (i < src.n && j < dst.n) {
                long n = Math.min(src.len[i] - si, dst.len[j] - dj);
                MemorySegment.copy(src.seg[i], src.off[i] + si, dst.seg[j], dst.off[j] + dj, n);
                si += n;
                dj += n;
                if (si == src.len[i]) {
                    i++;
                    si = 0;
                }
                if (dj == dst.len[j]) {
                    j++;
                    dj = 0;
                }
            }
            return true;
        } catch (IllegalStateException | IndexOutOfBoundsException | WrongThreadException e) {
            return false; // a scope closed under us, or memory confined to another thread
        }
    }

    /** A reusable list of (segment, offset, length) pieces. */
    static final class Pieces {
        MemorySegment[] seg = new MemorySegment[16];
        long[] off = new long[16];
        long[] len = new long[16];
        int n;

        void clear() {
            n = 0;
        }

        void add(MemorySegment s, long o, long l) {
            if (n == seg.length) {
                seg = java.util.Arrays.copyOf(seg, n * 2);
                off = java.util.Arrays.copyOf(off, n * 2);
                len = java.util.Arrays.copyOf(len, n * 2);
            }
            seg[n] = s;
            off[n] = o;
            len[n] = l;
            n++;
        }

        long total() {
            long t = 0;
            for (int k = 0; k < n; k++) {
                t += len[k];
            }
            return t;
        }

        /** Keeps only the first {@code bytes} bytes. */
        void truncate(long bytes) {
            long t = 0;
            for (int k = 0; k < n; k++) {
                if (t + len[k] >= bytes) {
                    len[k] = bytes - t;
                    n = k + 1;
                    return;
                }
                t += len[k];
            }
        }
    }
}
