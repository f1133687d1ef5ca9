package io.regmem.registration;

import java.lang.foreign.MemorySegment;

/**
 * The soft provider's data path: it executes queued work requests exactly as a NIC would check
 * them, and moves bytes with {@link MemorySegment#copy} through the registered segments
 * themselves, so every access is bounds- and lifetime-checked by the JDK and nothing can touch
 * memory whose scope has ended. Everything here runs under {@link Fabric#LOCK}.
 *
 * <h2>All or nothing</h2>
 * Every check of a request comes before its first byte moves, so a request that fails a check
 * leaves every target and sink untouched: local SGE keys (resolve, same PD, range inside, LOCAL_WRITE
 * where written, memory alive: else {@link WcStatus#LOC_PROT_ERR}); the peer (gone:
 * {@link WcStatus#RETRY_EXC_ERR}); the remote key (resolve, the peer QP's PD, range inside, the right
 * granted, memory alive: else {@link WcStatus#REM_ACCESS_ERR}); a receive at the peer where one is
 * consumed (none: {@link WcStatus#RNR_RETRY_EXC_ERR}) and its buffers (bad: the receive completes
 * with {@link WcStatus#LOC_PROT_ERR} and the sender gets {@link WcStatus#REM_OP_ERR}; too small:
 * {@link WcStatus#LOC_LEN_ERR} and {@link WcStatus#REM_INV_REQ_ERR}).
 *
 * <h2>Deregistration</h2>
 * Checking and copying happen inside a section of the QP's {@link GracePeriod.Reader} (see
 * {@link Fabric#GRACE}): a thread that deregisters or invalidates memory makes it invalid and then
 * waits for the sections in progress, so once its call returns no copy uses the memory. A request
 * is copied in pieces of at most {@link Pieces#PIECE} bytes, one section each; between two pieces every
 * registration the request uses is checked again, so a deregistration waits for one piece at most.
 * A request of up to {@code PIECE} bytes is therefore all or nothing even against a concurrent
 * deregistration; a larger one whose memory is deregistered while it is being copied stops at a
 * piece boundary and completes with an error (local memory: {@link WcStatus#LOC_PROT_ERR}, remote:
 * {@link WcStatus#REM_ACCESS_ERR}), the pieces before that stay moved, as on a NIC.
 */
final class SoftEngine {
    private static final Pieces SRC = new Pieces();
    private static final Pieces DST = new Pieces();
    private static final Pieces PROBE = new Pieces();

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
            long seq = qp.sq.headSeq();
            if (qp.state() == QueuePair.State.ERROR) {
                qp.sq.pop();
                complete(qp, qp.sendCq(), w, seq, false, WcStatus.WR_FLUSH_ERR, w.opcode, 0, true);
                continue;
            }
            if (qp.state() != QueuePair.State.RTS || qp.paused) {
                break;
            }
            WcStatus status = w.injected != null ? w.injected : execute(qp, w);
            qp.sq.pop();
            long bytes = status == WcStatus.SUCCESS ? w.totalLength() : 0;
            complete(qp, qp.sendCq(), w, seq, false, status, w.opcode, bytes, status != WcStatus.SUCCESS || w.signaled);
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
                long seq = qp.rq.headSeq();
                qp.rq.pop();
                complete(qp, qp.recvCq(), w, seq, true, WcStatus.WR_FLUSH_ERR, Opcode.RECV, 0, true);
            }
            qp.sq.settle();
            qp.rq.settle();
        }
    }

    static void toError(QueuePair qp) {
        qp.state(QueuePair.State.ERROR);
    }

    /**
     * Queues the completion of an executed request (already popped), or retires its slot at once
     * when it produces none because the CQ is full (an overrun: the QP can no longer be trusted).
     */
    private static void complete(QueuePair qp, CompletionQueue cq, Wqe w, long seq, boolean recv, WcStatus status,
                                 Opcode op, long bytes, boolean generate) {
        if (!generate) {
            return; // an unsignaled success: its slot is retired with the next polled completion
        }
        WorkCompletion wc = reserve(qp, cq, seq, recv);
        if (wc == null) {
            return;
        }
        wc.wrId = w.wrId;
        wc.status = status;
        wc.opcode = op;
        wc.byteLen = bytes;
        cq.commit();
    }

    /** The CQ entry for a completion of {@code qp}'s request {@code seq}; null after an overrun (slot retired, QP in error). */
    private static WorkCompletion reserve(QueuePair qp, CompletionQueue cq, long seq, boolean recv) {
        WorkQueue q = recv ? qp.rq : qp.sq;
        q.produced(seq);
        WorkCompletion wc = cq.reserve();
        if (wc == null) {
            toError(qp);
            q.retire(seq);
            return null;
        }
        wc.qp = qp;
        wc.fromRecvQueue = recv;
        wc.queueSeq = seq;
        return wc;
    }

    private static WcStatus execute(QueuePair qp, Wqe w) {
        if (w.opcode == Opcode.LOCAL_INV) {
            return localInv(qp, w); // touches no memory: outside a section, so it may wait out the readers
        }
        WcStatus status;
        GracePeriod.Reader reader = qp.reader;
        reader.enter();
        try {
            status = switch (w.opcode) {
                case REG_MR, REG_MR_INTEGRITY -> regMr(qp, w);
                case RDMA_WRITE, RDMA_WRITE_WITH_IMM -> write(qp, w);
                case RDMA_READ, RDMA_READ_WITH_INV -> read(qp, w);
                case SEND, SEND_WITH_INV -> send(qp, w);
                default -> WcStatus.GENERAL_ERR;
            };
        } finally {
            reader.exit();
            SRC.clear();
            DST.clear();
            Integrity.clearPending();
        }
        MemoryRegion invalidate = pendingInvalidate;
        pendingInvalidate = null;
        if (invalidate != null) {
            // After the data is placed (verbs order), outside the section: wait out the other readers.
            invalidate.invalidateAndWait();
        }
        return status;
    }

    /** A fast-reg MR that the request invalidates once its data is placed (READ_WITH_INV, SEND_WITH_INV). */
    private static MemoryRegion pendingInvalidate;

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
        if ((w.opcode == Opcode.REG_MR_INTEGRITY) != mr.isIntegrity()) {
            return WcStatus.LOC_PROT_ERR; // integrity MRs register with REG_MR_INTEGRITY, others with REG_MR
        }
        DmaTable dma = qp.device.dma;
        for (int i = 0; i < mr.pageCount(); i++) {
            if (dma.find(mr.rawPage(i), 1) == null) {
                return WcStatus.LOC_PROT_ERR; // checked for every page before any changes
            }
        }
        for (int i = 0; i < mr.pageCount(); i++) {
            DmaMapping m = dma.find(mr.rawPage(i), 1);
            mr.pageMemory(i, m, mr.rawPage(i) - m.address());
        }
        // A page's bytes must lie inside the mapping that holds its first byte, up to the page end
        // or the region's end: checked per access against the segment's bounds.
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
        mr.invalidateAndWait();
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
        int copied = Pieces.copy(qp.reader, SRC, DST);
        if (copied != Pieces.COPIED) {
            return copied == Pieces.SRC_FAILED ? WcStatus.LOC_PROT_ERR : WcStatus.REM_ACCESS_ERR;
        }
        if (recv != null) {
            long seq = peer.rq.headSeq();
            peer.rq.pop();
            WorkCompletion wc = peerCompletion(peer, recv, seq, WcStatus.SUCCESS, Opcode.RECV_RDMA_WITH_IMM, total);
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
            return WcStatus.REM_ACCESS_ERR;
        }
        int copied = Pieces.copy(qp.reader, SRC, DST);
        if (copied != Pieces.COPIED) {
            return copied == Pieces.SRC_FAILED ? WcStatus.REM_ACCESS_ERR : WcStatus.LOC_PROT_ERR;
        }
        if (!Integrity.finishInbound()) {
            return WcStatus.LOC_PROT_ERR;
        }
        if (w.opcode == Opcode.RDMA_READ_WITH_INV) {
            MemoryRegion sink = qp.device.keys.current(w.lkey[0]);
            if (sink != null && sink.isFastReg()) {
                pendingInvalidate = sink;
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
            return failReceive(peer, recv, WcStatus.LOC_PROT_ERR, WcStatus.REM_OP_ERR);
        }
        if (DST.total() < total) {
            return failReceive(peer, recv, WcStatus.LOC_LEN_ERR, WcStatus.REM_INV_REQ_ERR);
        }
        MemoryRegion invalidated = null;
        if (w.opcode == Opcode.SEND_WITH_INV) {
            invalidated = peer.device.keys.current(w.invalidateRkey);
            if (invalidated == null || !invalidated.isFastReg() || invalidated.pd() != peer.pd()) {
                return WcStatus.REM_INV_REQ_ERR;
            }
        }
        DST.truncate(total);
        int copied = Pieces.copy(qp.reader, SRC, DST);
        if (copied == Pieces.SRC_FAILED) {
            return WcStatus.LOC_PROT_ERR; // the message never completes: the receive stays posted
        }
        if (copied == Pieces.DST_FAILED) {
            return failReceive(peer, recv, WcStatus.LOC_PROT_ERR, WcStatus.REM_OP_ERR);
        }
        long seq = peer.rq.headSeq();
        peer.rq.pop();
        pendingInvalidate = invalidated;
        WorkCompletion wc = peerCompletion(peer, recv, seq, WcStatus.SUCCESS, Opcode.RECV, total);
        if (wc != null) {
            if (invalidated != null) {
                wc.withInv = true;
                wc.invalidatedRkey = w.invalidateRkey;
            }
            peer.recvCq().commit();
        }
        return WcStatus.SUCCESS;
    }

    /** The receive at the peer fails with {@code recvStatus} and breaks it; the sender gets {@code senderStatus}. */
    private static WcStatus failReceive(QueuePair peer, Wqe recv, WcStatus recvStatus, WcStatus senderStatus) {
        long seq = peer.rq.headSeq();
        peer.rq.pop();
        if (peerCompletion(peer, recv, seq, recvStatus, Opcode.RECV, 0) != null) {
            peer.recvCq().commit();
        }
        toError(peer);
        return senderStatus;
    }

    private static WorkCompletion peerCompletion(QueuePair peer, Wqe recv, long seq, WcStatus status, Opcode op, long bytes) {
        WorkCompletion wc = reserve(peer, peer.recvCq(), seq, true);
        if (wc == null) {
            return null;
        }
        wc.wrId = recv.wrId;
        wc.status = status;
        wc.opcode = op;
        wc.byteLen = bytes;
        return wc;
    }

    // ---- address resolution (inside a section) ---------------------------------------------------

    /** Resolves a WQE's local SGEs into pieces; false on any protection failure, before any byte moves. */
    private static boolean gatherLocal(QueuePair qp, Wqe w, Pieces out, boolean write) {
        out.clear();
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
                out.add(m.segment(), addr - m.address(), len, null, m);
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
            out.add(seg, off, len, mr, null);
            return true;
        }
        return pagePieces(mr, 0, mr.address(), off, len, out);
    }

    /**
     * The pieces of {@code [off, off + len)} of a fast-reg MR's mapping that starts at page
     * {@code firstPage} with address {@code base} (integrity MRs keep data and protection mappings
     * in one page list). False if a page is unresolved, unmapped, dead, or too short.
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
            DmaMapping m = mr.pageMapping(p);
            if (m == null || m.isDestroyed()) {
                return false;
            }
            MemorySegment seg = m.segment();
            long segOff = mr.pageOffset(p) + po;
            if (!seg.scope().isAlive() || segOff + n > seg.byteSize()) {
                return false;
            }
            out.add(seg, segOff, n, mr, m);
            inPage += n;
            len -= n;
        }
        return true;
    }

    /** Checks that the pages of {@code [off, off + len)} resolve, without keeping the pieces. */
    static boolean pagesReachable(MemoryRegion mr, int firstPage, long base, long off, long len) {
        PROBE.clear();
        boolean ok = pagePieces(mr, firstPage, base, off, len, PROBE);
        PROBE.clear();
        return ok;
    }
}
