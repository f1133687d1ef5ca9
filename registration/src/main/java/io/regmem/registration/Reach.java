package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.lang.foreign.MemorySegment;

/**
 * Which memory a device can reach. A device's data path runs on whatever thread executes it (a
 * poller, a progress thread, a peer's poller), so it can only reach memory that any thread may
 * access: a confined arena's memory (reachable by its owner thread alone) is refused at
 * registration and DMA mapping, as is memory whose arena is already closed. Every other native
 * segment is reachable for as long as its scope is alive.
 */
final class Reach {
    /** A thread that owns nothing: memory it may access, every thread may. Never started. */
    private static final Thread ANY_THREAD = Thread.ofPlatform().name("regmem-reach-probe").unstarted(() -> { });

    private Reach() {
    }

    /**
     * @throws RdmaException {@link Errno#EINVAL} naming {@code who} and the rule when the memory is
     *                       confined to one thread or its scope has ended
     */
    static void check(MemorySegment segment, String who, String what) {
        if (!segment.scope().isAlive()) {
            throw new RdmaException(Errno.EINVAL, who + ": cannot " + what + " " + segment
                    + ": its arena is closed already");
        }
        if (!segment.isAccessibleBy(ANY_THREAD)) {
            throw new RdmaException(Errno.EINVAL, who + ": cannot " + what + " " + segment + ": a confined arena's "
                    + "memory cannot be registered, since the device reaches memory from threads other than its "
                    + "owner; allocate it from Arena.ofShared(), Arena.ofAuto() or Arena.global()");
        }
    }
}
