package io.regmem.registration.ucx;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.regmem.registration.Access;
import io.regmem.registration.Opcode;
import io.regmem.registration.WcStatus;
import io.regmem.registration.spi.GracePeriod;
import io.regmem.registration.spi.MrContext;
import io.regmem.registration.spi.PostedWr;
import io.regmem.registration.spi.QpContext;
import io.regmem.registration.spi.Segments;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * The sending side of a {@link UcxQp}: starts one request. Its local entries are checked through
 * the verbs layer's key tables inside a grace-period section, an RDMA request's remote range against
 * the exporter's envelope (bounds, rights); then it goes as UCX puts or gets (a device that trusts
 * its peers, memory the peer's UCX allocated) or as an active message ({@link UcxAm}) that the target
 * executes and acknowledges. Fast registration and invalidation are done here at once (local
 * operations). The QP's execution lock is held for every method; the worker lock is taken inside.
 */
final class UcxSender {
    private final UcxQp qp;
    private final UcxDevice device;
    private final QpContext ctx;
    private final GracePeriod.Reader reader;
    private final UcxKeyTable keys;
    private final Arena arena;
    private final Segments local = new Segments();
    /** Request parameters of an eager active message whose data is an iov list. */
    private final MemorySegment amIovParams;
    /** Request parameters of a rendezvous active message (from a bounce buffer). */
    private final MemorySegment amRndvParams;
    /** WRITEs and READs started as puts and gets (for tests; under the QP's locks). */
    long oneSidedStarted;
    /** A bounce buffer as the destination of a copy. */
    private final Segments staged = new Segments();

    UcxSender(UcxQp qp, UcxKeyTable keys, Arena arena) {
        this.qp = qp;
        this.device = qp.device;
        this.ctx = qp.ctx;
        this.reader = qp.reader;
        this.keys = keys;
        this.arena = arena;
        this.amIovParams = UcpRequestParam.amSendIov(arena, UcpLayout.AM_SEND_FLAG_EAGER);
        this.amRndvParams = UcpRequestParam.amSend(arena, UcpLayout.AM_SEND_FLAG_RNDV);
    }

    /** {@code pieces} as a UCX iov list in {@code op}'s own iov buffer (grown when needed), alive while op's requests run. */
    private MemorySegment iov(Segments pieces, UcxOp op) {
        int n = pieces.count();
        if (op.iov.byteSize() < UcpDtIov.bytes(n)) {
            op.iov = UcpDtIov.allocate(arena, Math.max(8, Integer.highestOneBit(n) << 1));
        }
        for (int i = 0; i < n; i++) {
            UcpDtIov.set(op.iov, i, pieces.segment(i).address() + pieces.offset(i), pieces.length(i));
        }
        return op.iov;
    }

    /** Checks and issues one request: a failure status decided before anything moved, or null once it is under way. */
    WcStatus start(PostedWr w, UcxOp op) {
        Opcode opcode = w.opcode();
        if (opcode == Opcode.REG_MR || opcode == Opcode.BIND_MW) {
            reader.enter();
            try {
                WcStatus s = opcode == Opcode.BIND_MW ? ctx.memory().bindWindow(w) : ctx.memory().fastRegister(w);
                return s == WcStatus.SUCCESS ? null : s; // done at once: a local operation
            } finally {
                reader.exit();
            }
        }
        if (opcode == Opcode.LOCAL_INV) {
            MrContext mr = ctx.memory().invalidationTarget(w.invalidateRkey());
            if (mr == null) {
                return WcStatus.LOC_PROT_ERR;
            }
            ctx.memory().invalidate(mr);
            device.grace.synchronize(); // no access through the key that began before is still running
            return null;
        }
        boolean atomic = opcode.isAtomic();
        boolean rdma = opcode == Opcode.RDMA_WRITE || opcode == Opcode.RDMA_READ || opcode == Opcode.RDMA_WRITE_WITH_IMM || atomic;
        if (!rdma && opcode != Opcode.SEND && opcode != Opcode.SEND_WITH_INV && opcode != Opcode.SEND_WITH_IMM) {
            return WcStatus.REM_INV_REQ_ERR; // REG_MR_INTEGRITY and READ_WITH_INV: not carried by UCX
        }
        boolean read = opcode == Opcode.RDMA_READ;
        reader.enter();
        try {
            local.clear();
            if (!ctx.memory().gatherLocal(w, local, read || atomic)) {
                return WcStatus.LOC_PROT_ERR;
            }
            int targetKey = 0;
            if (rdma && w.totalLength() == 0) {
                targetKey = w.rkey(); // zero length: nothing to check, at either end (the target moves nothing)
            } else if (rdma) {
                // After the local keys, as a NIC checks its own SGEs before the responder sees the
                // request: checked here from the exporter's envelope (nothing is sent for a request
                // that cannot succeed) and again by the target against its tables. A raw key (a
                // fast-reg MR's, or one never imported) is the target's alone to check.
                RemoteKeyEnvelope.Decoded k = keys.get(w.rkey());
                if (k != null) {
                    if (!UcxKeyTable.mayAccess(k, w.remoteAddress(), w.totalLength(),
                            atomic ? Access.REMOTE_ATOMIC : read ? Access.REMOTE_READ : Access.REMOTE_WRITE)) {
                        return WcStatus.REM_ACCESS_ERR;
                    }
                    targetKey = k.rkey();
                } else if (UcxKeyTable.isRaw(w.rkey())) {
                    targetKey = w.rkey();
                } else {
                    return WcStatus.REM_ACCESS_ERR; // a handle this QP never gave out
                }
            }
            // A WRITE of at least the rendezvous threshold goes by UCX's rendezvous (eagerly on TCP
            // alone), from a bounce buffer the bytes are copied into here, inside the section: the peer
            // takes them on its own schedule, and what it takes is never the application's memory.
            boolean staged = opcode == Opcode.RDMA_WRITE && w.totalLength() >= device.rndvThreshold;
            if (staged && !device.oneSided && !qp.nicOneSided() && !stage(op)) {
                return WcStatus.LOC_PROT_ERR; // the memory went away under the copy (freed without a deregistration)
            }
            device.lockWorker();
            try {
                long rkey = rdma ? oneSidedKey(w, opcode) : 0;
                if (rkey != 0) {
                    sendOneSided(w, op, read, rkey);
                } else {
                    if (read) {
                        holdAnswer(op); // the bytes come back in the response, placed there
                        op.ownMemoryOnly = true; // (the header only: the answer is received into a buffer of the QP's)
                    } else if (atomic) {
                        holdAnswer(op); // the value found comes back in the response, placed as a READ's bytes
                        op.operands.set(JAVA_LONG, 0, w.compareAdd());
                        op.operands.set(JAVA_LONG, 8, w.swap());
                        local.add(op.operands, 0, UcxAm.ATOMIC_OPERANDS);
                        op.ownMemoryOnly = true;
                    }
                    if (staged && op.stage == null && !stage(op)) { // (a device that may go one-sided stages here)
                        return WcStatus.LOC_PROT_ERR;
                    }
                    sendMessage(w, op, rdma, targetKey);
                }
            } finally {
                device.workerLock.unlock();
            }
            op.bytes = w.totalLength();
            return null;
        } finally {
            local.clear();
            reader.exit();
        }
    }

    /**
     * Keeps the local entries (resolved, inside the section) as where the answer goes, and empties
     * {@code local}: from here a deregistration of their region waits for the answer.
     */
    private void holdAnswer(UcxOp op) {
        op.answerTo.clear();
        op.answerTo.addAll(local);
        op.answerHeld = true;
        local.clear();
    }

    /**
     * Copies the local entries (resolved, inside the section) into a bounce buffer of the QP's, which
     * becomes the request's: false, with nothing taken, if their memory went away under the copy.
     */
    private boolean stage(UcxOp op) {
        long total = local.total();
        MemorySegment b = qp.staging.take(total);
        staged.clear();
        staged.add(b, 0, total);
        boolean copied = Segments.copy(reader, local, staged) == Segments.COPIED;
        staged.clear();
        if (!copied) {
            qp.staging.give(b);
            return false;
        }
        op.stage = b;
        op.ownMemoryOnly = true;
        return true;
    }

    /**
     * The UCX remote key a WRITE or READ goes by as a put or get, or 0 when it goes as a message: for a
     * plain WRITE or READ through a key UCX registered, on a connection whose transports' NIC enforces
     * remote keys ({@link UcxTransports}); or on a device that trusts its peers, through a key of
     * memory the peer's UCX allocated (checked against the envelope already). Worker lock held.
     */
    private long oneSidedKey(PostedWr w, Opcode opcode) {
        boolean nic = qp.nicOneSided();
        if ((!device.oneSided && !nic) || (opcode != Opcode.RDMA_WRITE && opcode != Opcode.RDMA_READ) || w.totalLength() == 0) {
            return 0;
        }
        RemoteKeyEnvelope.Decoded k = keys.get(w.rkey());
        if (k == null || k.packed().length == 0 || (k.flags() & RemoteKeyEnvelope.TARGET_CHECKS) != 0
                || (!nic && (k.flags() & RemoteKeyEnvelope.ONE_SIDED) == 0)) {
            return 0; // (a NIC checks any key UCX registered; trusting peers covers memory UCX allocated only)
        }
        long ep = qp.endpoint();
        UcxQp peer = qp.localPeer;
        return ep == 0 ? 0 : keys.remoteKey(w.rkey(), device, ep, peer == null ? null : peer.device, nic);
    }

    /**
     * A WRITE as puts or a READ as gets, one per local piece, straight between the local entries and
     * the peer's memory. A WRITE completes only once an endpoint flush issued after its puts has
     * finished (the bytes are at the target then): {@link UcxQp#reap} issues that flush when the WRITE is
     * the oldest request, for it and every request started with it. Worker lock held.
     */
    private void sendOneSided(PostedWr w, UcxOp op, boolean read, long rkey) {
        oneSidedStarted++;
        op.oneSided = true;
        op.seq = w.seq();
        long ep = qp.endpoint();
        long params = device.worker.noParams.address();
        RemoteKeyEnvelope.Decoded k = keys.get(w.rkey()); // (known: oneSidedKey found it)
        long remote = k == null ? w.remoteAddress() : UcxKeyTable.absolute(k, w.remoteAddress()); // puts and gets name absolute addresses
        for (int i = 0; i < local.count(); i++) {
            long at = local.segment(i).address() + local.offset(i);
            long len = local.length(i);
            op.add(read ? device.ucp.get(ep, at, len, remote, rkey, params) : device.ucp.put(ep, at, len, remote, rkey, params));
            remote += len;
        }
        op.needsFlush = !read;
    }

    /** Sends a message: the header, then the local pieces (one buffer, or an iov list). Worker lock held. */
    private void sendMessage(PostedWr w, UcxOp op, boolean rdma, int targetKey) {
        MemorySegment h = op.header;
        h.fill((byte) 0);
        h.set(JAVA_INT, UcxAm.H_TYPE, UcxAm.TYPE_MSG);
        h.set(JAVA_INT, UcxAm.H_DST, qp.peerNumber());
        h.set(JAVA_INT, UcxAm.H_SRC, qp.number);
        h.set(JAVA_INT, UcxAm.H_OPCODE, w.opcode().ordinal());
        h.set(JAVA_LONG, UcxAm.H_SEQ, w.seq());
        h.set(JAVA_INT, UcxAm.H_IMM, w.immData());
        // A message's status slot carries its flags: the RNR retries the target may hold it for, solicited.
        h.set(JAVA_INT, UcxAm.H_STATUS, qp.rnrRetry | (w.solicited() ? UcxAm.FLAG_SOLICITED : 0));
        int inv = w.invalidateRkey();
        h.set(JAVA_INT, UcxAm.H_INV, w.opcode() == Opcode.SEND_WITH_INV ? keys.invalidateKey(inv) : inv);
        if (rdma) {
            h.set(JAVA_LONG, UcxAm.H_RADDR, w.remoteAddress());
            h.set(JAVA_INT, UcxAm.H_RKEY, targetKey); // the exporter's own key: it checks it against its tables
        }
        h.set(JAVA_LONG, UcxAm.H_LENGTH, w.totalLength());
        h.set(JAVA_LONG, UcxAm.H_TOKEN, qp.peerToken());
        op.seq = w.seq();
        op.awaitAck = true; // before the send: its acknowledgement may come at the next progress of any thread
        int pieces = local.count();
        long req;
        long endpoint = qp.endpoint();
        if (endpoint == 0) {
            req = UcpLayout.UCS_ERR_CONNECTION_RESET; // the peer's device closed: as a reset connection
        } else {
            MemorySegment stage = op.stage;
            if (stage != null) { // from the bounce buffer: by rendezvous (the target checks the header first), or eagerly on TCP alone
                req = device.ucp.amSend(endpoint, UcxAm.ID, h.address(), UcxAm.HEADER, stage.address(), w.totalLength(),
                        (qp.rendezvous(w.totalLength()) ? amRndvParams : qp.amParams).address(), qp.toSelf());
            } else if (pieces <= 1) {
                long addr = pieces == 0 ? 0 : local.segment(0).address() + local.offset(0);
                long len = pieces == 0 ? 0 : local.length(0);
                req = device.ucp.amSend(endpoint, UcxAm.ID, h.address(), UcxAm.HEADER, addr, len, qp.amParams.address(),
                        qp.toSelf());
            } else {
                req = device.ucp.amSend(endpoint, UcxAm.ID, h.address(), UcxAm.HEADER, iov(local, op).address(), pieces,
                        amIovParams.address(), qp.toSelf());
            }
        }
        op.add(req);
    }
}
