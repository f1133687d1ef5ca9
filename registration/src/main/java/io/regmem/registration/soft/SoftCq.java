package io.regmem.registration.soft;

import io.regmem.registration.spi.MembersCq;

/**
 * A soft CQ knows the QPs whose work completes on it: those that use it as their send CQ (their
 * requests complete here) and those that use it as their receive CQ (their receives are consumed
 * by their peers' requests). Polling it executes those QPs and their peers, nothing else.
 */
final class SoftCq extends MembersCq<SoftQueuePair> {
    SoftCq(boolean selfProgressing) {
        super(new SoftQueuePair[0], () -> selfProgressing);
    }


    /**
     * Executes the QPs whose requests complete here and the peers of those whose receives complete
     * here. A poll of a CQ with one user holds that QP's lock: then the peer's lock is taken only if
     * it orders after it, else tried (and the peer's work left for later if it is busy).
     */
    @Override
    public void progress() {
        SoftQueuePair[] s = members.senders();
        SoftQueuePair[] r = members.receivers();
        // A poll holds a QP's lock only when that QP is the CQ's one user: then it is among the first.
        SoftQueuePair first = s.length > 0 ? s[0] : r.length > 0 ? r[0] : null;
        SoftQueuePair held = first != null && first.lock().isHeldByCurrentThread() ? first : null;
        for (SoftQueuePair qp : r) {
            SoftQueuePair peer = qp.peer;
            if (peer != null) {
                peer.progress(held); // its SENDs and WRITE_WITH_IMMs consume our receives
            }
        }
        for (SoftQueuePair qp : s) {
            qp.progress(held);
        }
        for (SoftQueuePair qp : r) {
            if (qp.sendCq != this) {
                qp.progress(held); // flushes the receives in the error state (done above if it sends here too)
            }
        }
    }

    @Override
    public boolean idle() {
        for (SoftQueuePair qp : members.senders()) {
            if (!qp.ctx.idle()) {
                return false;
            }
        }
        for (SoftQueuePair qp : members.receivers()) {
            SoftQueuePair peer = qp.peer;
            if (!qp.ctx.idle() || (peer != null && !peer.ctx.idle())) {
                return false;
            }
        }
        return true;
    }
}
