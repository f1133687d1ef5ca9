package io.regmem.registration.soft;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.WcStatus;
import io.regmem.registration.faults.QpFaults;

/** The soft provider's {@link QpFaults} for one queue pair ({@code qp.unwrap(QpFaults.class)}). */
final class SoftQp implements QpFaults {
    private final SoftQueuePair qp;
    /** The send request that fails, and how (written by the test, read by the executor). */
    private volatile long failSeq = -1;
    private volatile WcStatus failStatus;
    volatile boolean paused;

    SoftQp(SoftQueuePair qp) {
        this.qp = qp;
    }

    @Override
    public void injectFailure(int nth, WcStatus status) {
        if (status == null || status == WcStatus.SUCCESS) {
            throw new RdmaException(Errno.EINVAL, qp.ctx.name() + ": an injected failure needs an error status, got " + status);
        }
        if (nth < 1) {
            throw new RdmaException(Errno.EINVAL, qp.ctx.name() + ": an injected failure's nth must be at least 1, got " + nth);
        }
        failStatus = status;
        failSeq = qp.ctx.sendTail() + nth - 1;
    }

    @Override
    public void breakQp() {
        qp.ctx.toError();
    }

    @Override
    public void pause(boolean pause) {
        paused = pause;
    }

    /** The injected status of request {@code seq}, once, or null (QP lock held). */
    WcStatus injectedFor(long seq) {
        if (seq != failSeq) {
            return null;
        }
        failSeq = -1;
        return failStatus;
    }
}
