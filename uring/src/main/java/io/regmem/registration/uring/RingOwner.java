package io.regmem.registration.uring;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The owner rule of a ring: the thread that built it is the only one that prepares, submits, reaps,
 * opens files and registers pools; any thread may close it once that thread has ended. Also the
 * JVM's table of open rings ({@link IoRing#openRings()}).
 */
final class RingOwner {
    /** Rings open in this JVM. */
    private static final Set<IoRing> OPEN = ConcurrentHashMap.newKeySet();

    final Thread thread = Thread.currentThread();

    static void opened(IoRing ring) {
        OPEN.add(ring);
    }

    static void closed(IoRing ring) {
        OPEN.remove(ring);
    }

    /** The rings open in this JVM now, described. */
    static List<String> openRings() {
        List<String> out = new ArrayList<>();
        for (IoRing r : OPEN) {
            out.add(r + " owned by '" + r.owner().getName() + "'");
        }
        return out;
    }

    /** True on the owner thread. */
    boolean isCurrent() {
        return Thread.currentThread() == thread;
    }

    /** @throws RdmaException {@link Errno#EPERM} off the owner thread, {@link Errno#EBADF} once closed */
    void check(IoRing ring, String what) {
        if (Thread.currentThread() != thread) {
            throw new RdmaException(Errno.EPERM, ring + "." + what + ": called on thread '" + Thread.currentThread().getName()
                    + "'; an io_uring is used by its owner thread '" + thread.getName() + "' only");
        }
        if (ring.isClosed()) {
            throw new RdmaException(Errno.EBADF, ring + "." + what + ": the ring is closed");
        }
    }

    /** @throws RdmaException {@link Errno#EPERM} on another thread while the owner lives */
    void checkForClose(IoRing ring, String what) {
        if (Thread.currentThread() != thread && thread.isAlive()) {
            throw new RdmaException(Errno.EPERM, ring + "." + what + ": called on thread '" + Thread.currentThread().getName()
                    + "' while the owner thread '" + thread.getName() + "' lives; close on the owner");
        }
    }
}
