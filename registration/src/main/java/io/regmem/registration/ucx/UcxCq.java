package io.regmem.registration.ucx;

import io.regmem.registration.spi.CqContext;
import io.regmem.registration.spi.ProviderCq;
import java.util.Arrays;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A UCX completion queue: polling it progresses the device's worker (which also serves the peers'
 * requests aimed at this process: without RDMA hardware a target must progress) and then reaps, in
 * order, the requests of the QPs that complete here.
 */
final class UcxCq implements ProviderCq {
    private static final UcxQp[] NONE = new UcxQp[0];
    private final UcxDevice device;
    /** The QPs whose send queue completes here: replaced, never mutated, under {@code this}. */
    private volatile UcxQp[] qps = NONE;

    UcxCq(UcxDevice device, CqContext ctx) {
        this.device = device;
        ctx.attach(this);
    }

    synchronized void add(UcxQp qp) {
        UcxQp[] next = Arrays.copyOf(qps, qps.length + 1);
        next[qps.length] = qp;
        qps = next;
    }

    synchronized void remove(UcxQp qp) {
        qps = Arrays.stream(qps).filter(q -> q != qp).toArray(UcxQp[]::new);
    }

    @Override
    public void progress() {
        device.progress();
        for (UcxQp qp : qps) {
            ReentrantLock l = qp.ctx.lock();
            l.lock(); // reentrant: a poll of a CQ with one user already holds it
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
