package io.regmem.registration.spi;

import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

/**
 * The last line of a provider's progress thread: a failure that no QP's own guard caught (a fault in
 * the loop itself) is logged and the thread goes on serving, after a millisecond's pause so that a
 * failure that repeats every round neither spins a core nor floods the log (the first one is logged
 * with its stack, then one line a minute with the count). A provider's progress thread never ends
 * by an exception: a failure in one QP's progress errs that QP ({@link QpContext#fatal}) and the
 * thread goes on with the others.
 */
public final class ProgressFaults {
    private static final System.Logger LOG = System.getLogger("io.regmem.registration.spi");
    private static final AtomicLong COUNT = new AtomicLong();
    private static volatile long lastLogged;

    private ProgressFaults() {
    }

    /** Records that {@code who} survived {@code e}; logs it (rate-limited) and pauses 1 ms. Never throws. */
    public static void survived(String who, Throwable e) {
        try {
            long n = COUNT.incrementAndGet();
            long now = System.nanoTime();
            if (n == 1) {
                lastLogged = now;
                LOG.log(System.Logger.Level.ERROR, who + " survived a failure and goes on serving", e);
            } else if (now - lastLogged > 60_000_000_000L) {
                lastLogged = now;
                LOG.log(System.Logger.Level.ERROR, who + " survived a failure and goes on serving (" + n + " so far): " + e);
            }
        } catch (RuntimeException | Error ignored) {
            // logging failed too: the thread goes on all the same
        }
        LockSupport.parkNanos(1_000_000L);
    }

    /** How many failures the progress threads of this JVM survived (for tests and diagnostics). */
    public static long survivedCount() {
        return COUNT.get();
    }
}
