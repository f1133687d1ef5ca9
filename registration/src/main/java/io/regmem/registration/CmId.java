package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;

/**
 * A connection-manager ID ({@code rdma_create_id}): the handle a connection is made through. It
 * carries at most one queue pair. Its rules (kernel-semantics section 1): the QP's PD must belong
 * to this ID's device ({@link Errno#EINVAL} otherwise); the ID cannot be destroyed while a QP is
 * attached ({@link Errno#EBUSY}: the kernel silently orphans the QP instead); destroying the QP
 * twice is an error.
 */
public final class CmId extends RdmaResource implements AutoCloseable {
    private QueuePair qp;

    CmId(RdmaDevice device) {
        super(device, "CmId", null);
    }

    /**
     * Creates this ID's queue pair ({@code rdma_create_qp}): a reliable-connected QP in the INIT
     * state, holding a reference on the PD and on each CQ. With {@code maxRdmaCtxs = c} its send
     * queue grows by {@code f * c} WRs (f = 3 when the device can use MRs for rw, else 1), clamped
     * to the device's {@code maxQpWr}. On failure nothing is created and no count changes.
     *
     * @throws RdmaException {@link Errno#EINVAL} for a PD or CQ of another device, missing CQs or
     *                       limits beyond the device's; {@link Errno#EBUSY} if a QP is already attached;
     *                       {@link Errno#EBADF} if this ID, the PD or a CQ was destroyed
     */
    public QueuePair createQp(ProtectionDomain pd, QpInitAttributes attrs) {
        synchronized (device.lock) {
            checkAlive("createQp");
            if (pd.device != device) {
                throw new RdmaException(Errno.EINVAL, this + ": createQp with " + pd + " of device " + pd.device.name()
                        + "; this ID is bound to " + device.name());
            }
            pd.checkAlive("createQp");
            if (qp != null) {
                throw new RdmaException(Errno.EBUSY, this + ": already has " + qp + "; a CM ID carries one QP");
            }
            CompletionQueue scq = attrs.sendCq();
            CompletionQueue rcq = attrs.recvCq();
            if (scq == null || rcq == null) {
                throw new RdmaException(Errno.EINVAL, this + ": createQp needs a send CQ and a receive CQ");
            }
            for (CompletionQueue cq : new CompletionQueue[] {scq, rcq}) {
                if (cq.device != device) {
                    throw new RdmaException(Errno.EINVAL, this + ": " + cq + " belongs to device " + cq.device.name());
                }
                cq.checkAlive("createQp");
            }
            DeviceAttributes a = device.attributes();
            check(attrs.maxSendWr(), a.maxQpWr(), "maxSendWr", "maxQpWr");
            check(attrs.maxRecvWr(), a.maxQpWr(), "maxRecvWr", "maxQpWr");
            check(attrs.maxSendSge(), a.maxSendSge(), "maxSendSge", "maxSendSge");
            check(attrs.maxRecvSge(), a.maxRecvSge(), "maxRecvSge", "maxRecvSge");
            if (attrs.maxRdmaCtxs() < 0) {
                throw new RdmaException(Errno.EINVAL, this + ": maxRdmaCtxs " + attrs.maxRdmaCtxs() + " is negative");
            }
            boolean canUseMr = a.iWarp() || a.maxSglRd() != 0;
            long extra = (long) (canUseMr ? 3 : 1) * attrs.maxRdmaCtxs();
            int sendWr = (int) Math.min(a.maxQpWr(), attrs.maxSendWr() + extra);
            QueuePair created = new QueuePair(this, pd, attrs, sendWr);
            pd.retain();
            scq.retain();
            rcq.retain();
            qp = created;
            device.tracker.add(created);
            return created;
        }
    }

    private void check(int value, int limit, String what, String deviceLimit) {
        if (value < 1 || value > limit) {
            throw new RdmaException(Errno.EINVAL, this + ": " + what + " " + value + " is not in [1, " + deviceLimit
                    + "=" + limit + "]");
        }
    }

    /** The attached queue pair, or null. */
    public QueuePair qp() {
        synchronized (device.lock) {
            return qp;
        }
    }

    /**
     * Destroys the attached queue pair ({@code rdma_destroy_qp}) and drops its PD and CQ references.
     *
     * @throws RdmaException {@link Errno#EINVAL} if no QP is attached (a second destroy);
     *                       {@link Errno#EBADF} if this ID was destroyed
     */
    public void destroyQp() {
        synchronized (device.lock) {
            checkAlive("destroyQp");
            if (qp == null) {
                throw new RdmaException(Errno.EINVAL, this + ": destroyQp with no QP attached (already destroyed?)");
            }
            QueuePair q = qp;
            q.state(QueuePair.State.ERROR);
            q.markDestroyed();
            q.pd().release();
            q.sendCq().release();
            q.recvCq().release();
            qp = null;
        }
    }

    /**
     * Destroys the ID ({@code rdma_destroy_id}).
     *
     * @throws RdmaException {@link Errno#EBUSY} while a QP is attached (nothing changes: call
     *                       {@link #destroyQp()} first); {@link Errno#EBADF} if already destroyed
     */
    @Override
    public void close() {
        synchronized (device.lock) {
            checkAlive("close");
            if (qp != null) {
                throw new RdmaException(Errno.EBUSY, this + ": cannot destroy while " + qp
                        + " is attached; destroyQp() first (the kernel would orphan the QP)");
            }
            markDestroyed();
        }
    }
}
