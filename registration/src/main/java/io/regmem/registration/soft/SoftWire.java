package io.regmem.registration.soft;

import io.regmem.registration.spi.GracePeriod;
import io.regmem.registration.spi.LocalRendezvous;
import io.regmem.registration.spi.Segments;

/**
 * The in-process "wire" every soft device of this JVM shares: the rendezvous of its connections, and the
 * grace-period domain of the data path. A soft request reads its own memory and writes its peer's
 * (or the other way round), on whichever device that memory is, so the executors of every soft QP
 * are readers of one domain: whoever deregisters or invalidates memory on any soft device waits for
 * the copy pieces in progress on all of them (at most {@link Segments#PIECE}
 * bytes each). There is no data-path lock here: each QP has its own.
 */
final class SoftWire {
    /** The data path's grace-period domain; each soft QP's executor is a reader. */
    static final GracePeriod GRACE = new GracePeriod();
    /** Connection setup between soft IDs: the names they listen under; never on the data path. */
    static final LocalRendezvous RENDEZVOUS = new LocalRendezvous();

    private SoftWire() {
    }
}
