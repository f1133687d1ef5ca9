package io.regmem.registration.shm;

import io.regmem.registration.spi.QpContext;

/** The shm provider's halves of the verbs layer's contexts (the one place that reads their attachments). */
final class ShmContexts {
    private ShmContexts() {
    }

    static ShmQp qp(QpContext ctx) {
        return (ShmQp) ctx.attachment();
    }
}
