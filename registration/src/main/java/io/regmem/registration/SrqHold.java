package io.regmem.registration;

/**
 * One queue pair's hold on the shared receive queue it takes its receives from: the receive it took
 * and has not completed yet (at most one), and whether it said {@code QP_LAST_WQE_REACHED}. Taking,
 * completing and flushing run under the QP's execution lock; {@link #settled()} is read by any thread.
 */
final class SrqHold {
    final SharedReceiveQueue srq;
    private final QueuePair qp;
    /** The slot of the receive taken and not completed, or -1. */
    private volatile int slot = -1;
    private volatile boolean lastWqeRaised;

    SrqHold(SharedReceiveQueue srq, QueuePair qp) {
        this.srq = srq;
        this.qp = qp;
    }

    /**
     * The receive the QP took (taking the oldest queued one if it holds none and is not in the error
     * state), or null.
     */
    Wqe receive() {
        int s = slot;
        if (s < 0) {
            if (qp.state() == QueuePair.State.ERROR || (s = srq.take(qp)) < 0) {
                return null;
            }
            slot = s;
        }
        return srq.slot(s);
    }

    /** Completes the receive {@link #receive()} returned, on the QP's receive CQ. */
    void complete(WcStatus status, Opcode op, long bytes, boolean withImm, int imm, boolean withInv, int invRkey,
                  boolean solicited, int srcQp, AhAttributes source) {
        int s = slot;
        if (s < 0) {
            throw new IllegalStateException(qp + ": a provider completed a receive it did not take (nextRecv was null)");
        }
        Wqe w = srq.slot(s);
        slot = -1;
        CompletionQueue cq = qp.recvCq();
        if (!cq.push(qp, true, s, w.wrId, status, op, bytes, withImm, imm, withInv, invRkey, solicited, srcQp, source)) {
            qp.context.lostCompletion(cq);
            srq.retire(s);
        }
    }

    /**
     * The QP's flush in the error state: the receive it took and did not complete is flushed (the
     * SRQ's queued ones stay), then QP_LAST_WQE_REACHED is raised once. Returns the receives flushed.
     */
    int flush() {
        int flushed = 0;
        if (slot >= 0) {
            complete(WcStatus.WR_FLUSH_ERR, Opcode.RECV, 0, false, 0, false, 0, false, 0, null);
            flushed++;
        }
        if (!lastWqeRaised) {
            lastWqeRaised = true;
            qp.device.raiseAsync(AsyncEvent.Type.QP_LAST_WQE_REACHED, qp, qp + " is in the error state and holds no "
                    + "receive of " + srq + " any more");
        }
        return flushed;
    }

    /** At destroy, after the provider stopped: a receive taken and not completed goes back to the SRQ's front. */
    void giveBack() {
        int s = slot;
        if (s >= 0) {
            slot = -1;
            srq.untake(s);
        }
    }

    /** True once nothing is held and the last-WQE event was raised: the error state's flush has nothing left. */
    boolean settled() {
        return slot < 0 && lastWqeRaised;
    }
}
