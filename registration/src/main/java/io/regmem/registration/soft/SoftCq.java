package io.regmem.registration.soft;

import io.regmem.registration.spi.ProviderCq;
import java.util.Arrays;

/**
 * A soft CQ knows the QPs whose work completes on it: those that use it as their send CQ (their
 * requests complete here) and those that use it as their receive CQ (their receives are consumed
 * by their peers' requests). Polling it executes those QPs and their peers, nothing else.
 */
final class SoftCq implements ProviderCq {
    private static final SoftQueuePair[] NONE = new SoftQueuePair[0];
    private volatile SoftQueuePair[] senders = NONE;
    private volatile SoftQueuePair[] receivers = NONE;

    synchronized void addSender(SoftQueuePair qp) {
        senders = plus(senders, qp);
    }

    synchronized void addReceiver(SoftQueuePair qp) {
        receivers = plus(receivers, qp);
    }

    synchronized void remove(SoftQueuePair qp) {
        senders = Arrays.stream(senders).filter(q -> q != qp).toArray(SoftQueuePair[]::new);
        receivers = Arrays.stream(receivers).filter(q -> q != qp).toArray(SoftQueuePair[]::new);
    }

    private static SoftQueuePair[] plus(SoftQueuePair[] a, SoftQueuePair qp) {
        SoftQueuePair[] next = Arrays.copyOf(a, a.length + 1);
        next[a.length] = qp;
        return next;
    }

    @Override
    public void progress() {
        for (SoftQueuePair qp : senders) {
            qp.progress();
        }
        for (SoftQueuePair qp : receivers) {
            SoftQueuePair peer = qp.peer;
            if (peer != null) {
                peer.progress(); // its SENDs and WRITE_WITH_IMMs consume our receives
            }
            if (qp.sendCq != this) {
                qp.progress(); // flushes the receives in the error state (done above if it sends here too)
            }
        }
    }

    @Override
    public void destroy() {
    }
}
