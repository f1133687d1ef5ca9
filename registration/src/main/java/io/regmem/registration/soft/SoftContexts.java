package io.regmem.registration.soft;

import io.regmem.registration.spi.CmContext;
import io.regmem.registration.spi.CqContext;
import io.regmem.registration.spi.QpContext;

/**
 * From a verbs object's context to the soft provider's half of it: the one place that downcasts an
 * attachment, as rdma-core's {@code to_rqp()} is for rxe. Each soft object attaches itself to its
 * context when it is made, so the casts cannot fail for a context of this provider.
 */
final class SoftContexts {
    private SoftContexts() {
    }

    static SoftCq cq(CqContext ctx) {
        return (SoftCq) ctx.attachment();
    }

    static SoftQueuePair qp(QpContext ctx) {
        return (SoftQueuePair) ctx.attachment();
    }

    static SoftCm cm(CmContext ctx) {
        return (SoftCm) ctx.attachment();
    }
}
