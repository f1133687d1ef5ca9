package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;

/**
 * The checks of {@link CmId#createQp} before anything is made: the CQs and SRQ belong to the ID's
 * device (the SRQ to the QP's PD) and live, and every capacity and setting is within the device's
 * limits and the verbs ranges. Device lock held.
 */
final class QpChecks {
    private QpChecks() {
    }

    /** Throws the first broken rule as {@link RdmaException} naming {@code id} ({@code EINVAL}, {@code EBADF}, {@code EOPNOTSUPP}). */
    static void check(CmId id, RdmaDevice device, ProtectionDomain pd, QpInitAttributes attrs) {
        CompletionQueue scq = attrs.sendCq();
        CompletionQueue rcq = attrs.recvCq();
        if (scq == null || rcq == null) {
            throw new RdmaException(Errno.EINVAL, id + ": createQp needs a send CQ and a receive CQ");
        }
        for (CompletionQueue cq : new CompletionQueue[] {scq, rcq}) {
            if (cq.device != device) {
                throw new RdmaException(Errno.EINVAL, id + ": " + cq + " belongs to device " + cq.device.name());
            }
            cq.checkAlive("createQp");
        }
        SharedReceiveQueue srq = attrs.srq();
        if (srq != null) {
            srq.checkAlive("createQp");
            if (srq.pd() != pd) {
                throw new RdmaException(Errno.EINVAL, id + ": createQp with " + srq + " of " + srq.pd() + " in " + pd
                        + "; a QP's SRQ is of its own PD");
            }
        }
        DeviceAttributes a = device.attributes();
        limit(id, attrs.maxSendWr(), a.maxQpWr(), "maxSendWr", "maxQpWr");
        limit(id, attrs.maxRecvWr(), a.maxQpWr(), "maxRecvWr", "maxQpWr");
        limit(id, attrs.maxSendSge(), a.maxSendSge(), "maxSendSge", "maxSendSge");
        if (srq == null) { // with an SRQ the receive SGEs are the SRQ's (ibv_create_qp(3) ignores them)
            limit(id, attrs.maxRecvSge(), a.maxRecvSge(), "maxRecvSge", "maxRecvSge");
        }
        if (attrs.rnrRetry() < 0 || attrs.rnrRetry() > 7) {
            throw new RdmaException(Errno.EINVAL, id + ": rnrRetry " + attrs.rnrRetry()
                    + " is outside [0, 7] (0: fail at once, 7: retry for ever)");
        }
        if (attrs.minRnrTimer() < 0 || attrs.minRnrTimer() > 31) {
            throw new RdmaException(Errno.EINVAL, id + ": minRnrTimer " + attrs.minRnrTimer()
                    + " is outside [0, 31] (the IBA's min_rnr_timer code)");
        }
        if (attrs.maxInlineData() < 0 || attrs.maxInlineData() > QpInitAttributes.MAX_INLINE_DATA) {
            throw new RdmaException(Errno.EINVAL, id + ": maxInlineData " + attrs.maxInlineData() + " is outside [0, "
                    + QpInitAttributes.MAX_INLINE_DATA + "]");
        }
        if (attrs.maxRdmaCtxs() < 0) {
            throw new RdmaException(Errno.EINVAL, id + ": maxRdmaCtxs " + attrs.maxRdmaCtxs() + " is negative");
        }
        if (id.portSpace() == PortSpace.UDP) {
            if (attrs.maxRdmaCtxs() != 0 || attrs.integrity()) {
                throw new RdmaException(Errno.EINVAL, id + ": a UD QP has no rw contexts or integrity (they need RDMA READ "
                        + "and WRITE, which UD does not carry): maxRdmaCtxs " + attrs.maxRdmaCtxs() + ", integrity "
                        + attrs.integrity());
            }
            if (attrs.qkey() < 0) {
                throw new RdmaException(Errno.EINVAL, id + ": Q_Key 0x" + Integer.toHexString(attrs.qkey())
                        + " has its top bit set (reserved: a send's Q_Key with it means the sender's own)");
            }
        }
        if (attrs.integrity() && !a.integrityHandover()) {
            throw new RdmaException(Errno.EOPNOTSUPP, id + ": createQp with integrity on device " + device.name()
                    + ", which has no signature offload (DeviceAttributes.integrityHandover is false)");
        }
    }

    private static void limit(CmId id, int value, int limit, String what, String deviceLimit) {
        if (value < 1 || value > limit) {
            throw new RdmaException(Errno.EINVAL, id + ": " + what + " " + value + " is not in [1, " + deviceLimit
                    + "=" + limit + "]");
        }
    }
}
