package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.lang.foreign.MemorySegment;

/**
 * The checks {@link QueuePair#postSend} and {@link QueuePair#postRecv} make of every request of a
 * chain before any is queued, the same for every provider: opcode for the queue, SGE count within the
 * QP's limits, no empty or wrapping SGE, at most {@link QueuePair#MAX_MESSAGE} bytes, no wrapping
 * remote range. Each failure names the request's index in the chain.
 */
final class WrChecks {
    private WrChecks() {
    }

    static void send(QueuePair qp, WorkRequest wr, int index) {
        Opcode op = wr.opcode();
        if (qp.qpType() == QpType.UD) {
            datagram(qp, wr, index);
        } else if (wr.ah() != null) {
            throw new RdmaException(Errno.EINVAL, qp + ": a datagram destination (WorkRequest.ud) on an RC QP, which sends "
                    + "to its connected peer only: bad WR index " + index);
        }
        if (!op.isSend()) {
            throw new RdmaException(Errno.EINVAL, qp + ": " + op + " cannot be posted to a send queue: bad WR index " + index);
        }
        if (op == Opcode.RDMA_READ_WITH_INV && !qp.device().attributes().iWarp()) {
            throw new RdmaException(Errno.EOPNOTSUPP, qp + ": RDMA_READ_WITH_INV needs an iWARP device: bad WR index " + index);
        }
        if (op == Opcode.BIND_MW) {
            bindMw(qp, wr, index);
        }
        if ((op == Opcode.REG_MR || op == Opcode.REG_MR_INTEGRITY) && wr.regMr() == null) {
            throw new RdmaException(Errno.EINVAL, qp + ": REG_MR without an MR: bad WR index " + index);
        }
        if (op.isAtomic() && (wr.numSge() != 1 || wr.sgeLength(0) != 8)) {
            throw new RdmaException(Errno.EINVAL, qp + ": " + op + " needs exactly one SGE of 8 bytes (the value found is "
                    + "written there), not " + wr.numSge() + " SGE(s) of " + wr.totalLength() + " bytes: bad WR index " + index);
        }
        MemorySegment payload = wr.inlinePayload();
        if (payload != null) {
            inline(qp, wr, index, payload);
        }
        boolean read = op == Opcode.RDMA_READ || op == Opcode.RDMA_READ_WITH_INV;
        int limit = read ? qp.maxReadSge() : qp.maxSendSge();
        sges(qp, wr, index, limit, read ? "maxReadSge" : "maxSendSge");
        long length = payload != null ? wr.inlineLength() : wr.totalLength();
        if ((wr.numSge() > 0 || payload != null) && Long.compareUnsigned(wr.remoteAddress() + length, wr.remoteAddress()) < 0) {
            throw new RdmaException(Errno.EINVAL, qp + ": remote range wraps the address space: bad WR index " + index);
        }
    }

    /**
     * A UD send: SEND or SEND_WITH_IMM, a live address handle of the QP's PD, a 24-bit remote QP
     * number, {@link AhAttributes#MULTICAST_QPN} exactly when the handle's GID is a group's.
     */
    private static void datagram(QueuePair qp, WorkRequest wr, int index) {
        Opcode op = wr.opcode();
        if (op != Opcode.SEND && op != Opcode.SEND_WITH_IMM) {
            throw new RdmaException(Errno.EINVAL, qp + ": a UD QP sends only SEND and SEND_WITH_IMM, not " + op
                    + ": bad WR index " + index);
        }
        AddressHandle ah = wr.ah();
        if (ah == null) {
            throw new RdmaException(Errno.EINVAL, qp + ": a UD send needs its destination (WorkRequest.ud(ah, remoteQpn, "
                    + "remoteQkey)): bad WR index " + index);
        }
        if (ah.isDestroyed() || ah.pd() != qp.pd()) {
            throw new RdmaException(Errno.EINVAL, qp + ": " + ah + (ah.isDestroyed() ? " was destroyed"
                    : " is of " + ah.pd() + ", not the QP's " + qp.pd()) + ": bad WR index " + index);
        }
        int qpn = wr.remoteQpn();
        if ((qpn & ~AhAttributes.MULTICAST_QPN) != 0) {
            throw new RdmaException(Errno.EINVAL, qp + ": remote QP number 0x" + Integer.toHexString(qpn)
                    + " has more than 24 bits: bad WR index " + index);
        }
        if ((qpn == AhAttributes.MULTICAST_QPN) != ah.attributes().isMulticast()) {
            throw new RdmaException(Errno.EINVAL, qp + ": remote QP number 0xffffff addresses a multicast group, and a "
                    + "group is addressed by it only (QPN 0x" + Integer.toHexString(qpn) + ", " + ah.attributes()
                    + "): bad WR index " + index);
        }
    }

    /** A BIND_MW's shape: a live type-2 window and a region, a positive length, remote rights only, no SGEs. */
    private static void bindMw(QueuePair qp, WorkRequest wr, int index) {
        MemoryWindow mw = wr.bindMw();
        if (mw == null || wr.regMr() == null) {
            throw new RdmaException(Errno.EINVAL, qp + ": BIND_MW needs a window and a region (WorkRequest.bindMw): bad WR index "
                    + index);
        }
        if (mw.windowType() != MemoryWindow.Type.TYPE_2) {
            throw new RdmaException(Errno.EINVAL, qp + ": " + mw + " is a type-1 window, bound with MemoryWindow.bind, not a "
                    + "BIND_MW work request: bad WR index " + index);
        }
        if (wr.bindLength() <= 0 || (wr.regAccess() & ~MemoryWindow.BIND_TWO_BITS) != 0 || wr.numSge() != 0) {
            throw new RdmaException(Errno.EINVAL, qp + ": BIND_MW needs a positive length (" + wr.bindLength()
                    + "), remote rights only (with LOCAL_WRITE, ignored, and ZERO_BASED; got "
                    + Access.describe(wr.regAccess()) + ") and no SGEs: bad WR index " + index);
        }
    }

    /** An inline request: a SEND or WRITE opcode, no SGEs, within maxInlineData, a payload this thread can read. */
    private static void inline(QueuePair qp, WorkRequest wr, int index, MemorySegment payload) {
        Opcode op = wr.opcode();
        if (op != Opcode.SEND && op != Opcode.SEND_WITH_IMM && op != Opcode.SEND_WITH_INV && op != Opcode.RDMA_WRITE
                && op != Opcode.RDMA_WRITE_WITH_IMM) {
            throw new RdmaException(Errno.EINVAL, qp + ": " + op + " cannot be inline (SEND and RDMA_WRITE kinds only): bad WR index "
                    + index);
        }
        if (wr.numSge() != 0) {
            throw new RdmaException(Errno.EINVAL, qp + ": an inline request carries its payload, not SGEs (it has "
                    + wr.numSge() + "): bad WR index " + index);
        }
        long n = wr.inlineLength();
        if (n < 0 || n > payload.byteSize()) {
            throw new RdmaException(Errno.EINVAL, qp + ": inline length " + n + " is outside the payload's [0, "
                    + payload.byteSize() + "] bytes: bad WR index " + index);
        }
        if (n > qp.maxInlineData()) {
            throw new RdmaException(Errno.EINVAL, qp + ": inline payload of " + n + " bytes exceeds maxInlineData "
                    + qp.maxInlineData() + ": bad WR index " + index);
        }
        if (!payload.scope().isAlive() || !payload.isAccessibleBy(Thread.currentThread())) {
            throw new RdmaException(Errno.EINVAL, qp + ": inline payload " + payload + " is "
                    + (payload.scope().isAlive() ? "confined to another thread" : "freed (its arena is closed)")
                    + ": bad WR index " + index);
        }
    }

    static void sges(Object qp, WorkRequest wr, int index, int limit, String what) {
        if (wr.numSge() > limit) {
            throw new RdmaException(Errno.EINVAL, qp + ": " + wr.numSge() + " SGEs exceed " + what + " " + limit
                    + ": bad WR index " + index);
        }
        long total = 0;
        for (int i = 0; i < wr.numSge(); i++) {
            long a = wr.sgeAddress(i);
            long l = wr.sgeLength(i);
            if (l < 0 || Long.compareUnsigned(a + l, a) < 0) {
                throw new RdmaException(Errno.EINVAL, qp + ": SGE " + i + " (0x" + Long.toHexString(a) + ", " + l
                        + ") has a negative length or wraps: bad WR index " + index);
            }
            total += l;
        }
        if (total > QueuePair.MAX_MESSAGE) {
            throw new RdmaException(Errno.EINVAL, qp + ": " + total + " bytes exceed the 2 GiB message limit: bad WR index "
                    + index);
        }
    }
}
