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
    /** Guarded by the QP's lock. */
    private long postedSends;
    private long failAtSend;
    private WcStatus failStatus;
    private long failSeq = -1;
    private WcStatus failSeqStatus;
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
        qp.lock().lock();
        try {
            failAtSend = postedSends + nth;
            failStatus = status;
        } finally {
            qp.lock().unlock();
        }
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

    /** Send requests {@code [firstSeq, firstSeq + count)} were posted (QP lock held). */
    void posted(long firstSeq, int count) {
        long before = postedSends;
        postedSends += count;
        if (failStatus != null && failAtSend > before && failAtSend <= postedSends) {
            failSeq = firstSeq + (failAtSend - before - 1);
            failSeqStatus = failStatus;
            failStatus = null;
        }
    }

    /** The injected status of request {@code seq}, once, or null (QP lock held). */
    WcStatus injectedFor(long seq) {
        if (seq != failSeq) {
            return null;
        }
        failSeq = -1;
        return failSeqStatus;
    }
}
