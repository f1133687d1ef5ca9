package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.internal.RwSizing;

/**
 * A CM ID's queue pair, made and unmade ({@code rdma_create_qp}, {@code rdma_destroy_qp}): the
 * checks, the provider's half, the rw MR pools, the PD, CQ and SRQ references and the CQs'
 * membership. The ID's device lock is held by the caller; the ID keeps the QP it returns.
 */
final class CmQps {
    private CmQps() {
    }

    /** Creates {@code id}'s QP (see {@link CmId#createQp}); on failure nothing is created and no count changes. */
    static QueuePair create(CmId id, ProtectionDomain pd, QpInitAttributes attrs) {
        RdmaDevice device = id.device;
        if (pd.device != device) {
            throw new RdmaException(Errno.EINVAL, id + ": createQp with " + pd + " of device " + pd.device.name()
                    + "; this ID is bound to " + device.name());
        }
        pd.checkAlive("createQp");
        if (id.qp() != null) {
            throw new RdmaException(Errno.EBUSY, id + ": already has " + id.qp() + "; a CM ID carries one QP");
        }
        QpChecks.check(id, device, pd, attrs);
        CompletionQueue scq = attrs.sendCq();
        CompletionQueue rcq = attrs.recvCq();
        SharedReceiveQueue srq = attrs.srq();
        int ctxs = attrs.maxRdmaCtxs();
        long extra = RwSizing.maxSendWr(device.attributes(), device.rwForceMr(), ctxs, attrs.integrity());
        int sendWr = (int) Math.min(device.attributes().maxQpWr(), attrs.maxSendWr() + extra);
        int qpNum = QpNumbers.allocate();
        QueuePair created = new QueuePair(id, pd, attrs, sendWr, qpNum);
        try {
            created.provider = device.provider().createQp(created.context); // throws: nothing created
        } catch (RuntimeException e) {
            QpNumbers.release(qpNum);
            throw e;
        }
        try {
            createMrPools(created, pd, ctxs, attrs.integrity()); // throws: nothing created
        } catch (RuntimeException e) {
            created.provider.destroy();
            QpNumbers.release(qpNum);
            throw e;
        }
        pd.retain();
        scq.retain();
        rcq.retain();
        if (srq != null) {
            srq.retain();
        }
        scq.attach(created);
        scq.provider.attach(created.provider, true, rcq == scq);
        if (rcq != scq) {
            rcq.attach(created);
            rcq.provider.attach(created.provider, false, true);
        }
        device.tracker.add(created);
        if (created.qpType() == QpType.UD) {
            created.ready(); // rdma_create_qp moves a UD QP of a bound ID to RTS at once
        }
        return created;
    }

    /** Destroys {@code q}, {@code id}'s QP (see {@link CmId#destroyQp}); {@code force} ignores rw contexts' MRs. */
    static void destroy(CmId id, QueuePair q, boolean force) {
        if (q == null) {
            throw new RdmaException(Errno.EINVAL, id + ": destroyQp with no QP attached (already destroyed?)");
        }
        int held = q.rdmaMrs().used() + q.sigMrs().used();
        if (held > 0 && !force) {
            throw new RdmaException(Errno.EBUSY, id + ": cannot destroy " + q + ": " + held + " pool MR(s) are "
                    + "still held by live rw contexts (mrs_used); destroy the contexts first");
        }
        Multicast.detachAll(q); // as uverbs does at destroy: no group delivers here any more
        q.postLock.lock(); // no post is in progress, and none starts (the QP is in the error state)
        q.lock.lock();
        try {
            q.toError("destroyed");
            q.provider().stop(); // nothing of the QP touches memory any more
            if (q.srqHold != null) {
                q.srqHold.giveBack();
            }
        } finally {
            q.lock.unlock();
            q.postLock.unlock();
        }
        q.provider().destroy(); // the provider unlinks it (the peer loses its connection) and never runs it again
        q.releaseInlineArea();
        q.sendCq().provider.detach(q.provider()); // no poll runs it any more
        if (q.recvCq() != q.sendCq()) {
            q.recvCq().provider.detach(q.provider());
        }
        q.rdmaMrs.destroy();
        q.sigMrs.destroy();
        q.markDestroyed();
        QpNumbers.release(q.qpNum());
        q.pd().release();
        q.sendCq().release();
        q.recvCq().release();
        if (q.srq != null) {
            q.srq.release();
        }
        q.sendCq().detach(q);
        if (q.recvCq() != q.sendCq()) {
            q.recvCq().detach(q);
        }
    }

    /** Creates {@code qp}'s rw MR pools: c fast-reg MRs, plus c signature MRs with integrity. */
    private static void createMrPools(QueuePair qp, ProtectionDomain pd, int ctxs, boolean integrity) {
        int pages = RwSizing.frPageListLen(qp.device.attributes());
        qp.rdmaMrs = new MrPool(qp, pd, ctxs, pages, false);
        try {
            qp.sigMrs = new MrPool(qp, pd, integrity ? ctxs : 0, pages, true);
        } catch (RuntimeException e) {
            qp.rdmaMrs.destroy();
            throw e;
        }
    }
}
