package io.regmem.registration.faults;

import io.regmem.registration.WcStatus;

/**
 * Fault injection for one queue pair, for tests of code that must survive a NIC's failures:
 * {@code qp.unwrap(QpFaults.class)} gives it on a QP of the soft provider, and null on providers that
 * offer none (ucx). A failure injected here takes the same path as a real one: its request completes
 * with the status, the QP moves to the error state and flushes what follows.
 */
public interface QpFaults {

    /**
     * Makes the {@code nth} send WR posted from now on (1 = the next) fail with {@code status}, as a
     * NIC error would: it completes with that status and the QP moves to the error state (a remote
     * access, operation or request error breaks the peer too).
     *
     * @throws io.regmem.core.RdmaException {@link io.regmem.core.Errno#EINVAL} if {@code nth} is below
     *         1 or {@code status} is null or SUCCESS
     */
    void injectFailure(int nth, WcStatus status);

    /** Moves the QP to the error state now, as a fatal NIC or link error would. */
    void breakQp();

    /** While paused, posted sends wait: their completions are delayed until {@code pause(false)}. */
    void pause(boolean pause);
}
