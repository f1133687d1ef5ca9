package io.regmem.registration.ucx;

import io.regmem.registration.spi.QpContext;

/**
 * From a verbs object's context to the ucx provider's half of it: the one place that downcasts an
 * attachment, as rdma-core's {@code to_rqp()} is for rxe. Each ucx object attaches itself to its
 * context when it is made, so the casts cannot fail for a context of this provider.
 */
final class UcxContexts {
    private UcxContexts() {
    }

    static UcxQp qp(QpContext ctx) {
        return (UcxQp) ctx.attachment();
    }
}
