package io.regmem.registration.ucx;

import io.regmem.registration.spi.CqContext;
import io.regmem.registration.spi.ProviderCq;
import java.util.Arrays;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A UCX completion queue: polling it progresses the device's worker (which also serves the peers'
 * requests aimed at this process: without RDMA hardware a target must progress), places the
 * messages that arrived for the QPs whose receives complete here, and reaps, in order, the requests
 * of the QPs whose sends complete here.
 */
final class UcxCq implements ProviderCq {
    private static final UcxQp[] NONE = new UcxQp[0];
    private final UcxDevice device;
    /** The QPs whose send queue completes here: replaced, never mutated, under {@code this}. */
    private volatile UcxQp[] qps = NONE;
    /** The QPs whose receive queue completes here. */
    private volatile UcxQp[] receivers = NONE;

    UcxCq(UcxDevice device, CqContext ctx) {
        this.device = device;
        ctx.attach(this);
    }

    synchronized void addSender(UcxQp qp) {
        qps = plus(qps, qp);
    }

    synchronized void addReceiver(UcxQp qp) {
        receivers = plus(receivers, qp);
    }

    private static UcxQp[] plus(UcxQp[] a, UcxQp qp) {
        UcxQp[] next = Arrays.copyOf(a, a.length + 1);
        next[a.length] = qp;
        return next;
    }

    synchronized void remove(UcxQp qp) {
        qps = Arrays.stream(qps).filter(q -> q != qp).toArray(UcxQp[]::new);
        receivers = Arrays.stream(receivers).filter(q -> q != qp).toArray(UcxQp[]::new);
    }

    @Override
    public void progress() {
        device.progress();
        for (UcxQp qp : receivers) {
            ReentrantLock l = qp.ctx.lock();
            l.lock(); // reentrant: a poll of a CQ with one user already holds it
            try {
                qp.deliver();
            } finally {
                l.unlock();
            }
        }
        for (UcxQp qp : qps) {
            ReentrantLock l = qp.ctx.lock();
            l.lock();
            try {
                qp.reap();
            } finally {
                l.unlock();
            }
        }
    }

    @Override
    public void destroy() {
    }
}
