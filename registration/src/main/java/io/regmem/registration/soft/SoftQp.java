package io.regmem.registration.soft;

import io.regmem.registration.QueuePair;
import io.regmem.registration.WcStatus;
import java.util.Objects;

/**
 * The soft provider's fault injection for one queue pair, for tests:
 * {@code qp.unwrap(SoftQp.class)} on a QP of a soft device (null on other providers).
 */
public final class SoftQp {
    private final SoftQueuePair qp;
    /** The send request that fails, and how (written by the test, read by the executor). */
    private volatile long failSeq = -1;
    private volatile WcStatus failStatus;
    volatile boolean paused;

    SoftQp(SoftQueuePair qp) {
        this.qp = qp;
    }

    /**
     * Makes the {@code nth} send WR posted from now on (1 = the next) fail with {@code status}, as a
     * NIC error would: it completes with that status and the QP moves to the error state (a remote
     * access, operation or request error breaks the peer too).
     */
    public void injectFailure(int nth, WcStatus status) {
        Objects.requireNonNull(status, "status");
        if (nth < 1) {
            throw new IllegalArgumentException("nth must be at least 1, got " + nth);
        }
        failStatus = status;
        failSeq = qp.ctx.sendTail() + nth - 1;
    }

    /** Moves the QP to the error state now, as a fatal NIC or link error would. */
    public void breakQp() {
        qp.ctx.toError();
    }

    /** While paused, posted sends wait: completions are delayed until {@code pause(false)}. */
    public void pause(boolean pause) {
        paused = pause;
    }

    /** The queue pair this controls. */
    public QueuePair queuePair() {
        return qp.ctx.queuePair();
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
