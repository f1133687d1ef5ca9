package io.regmem.registration.rpc;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;

/**
 * Who handles a transport's completions now: one thread at a time, as a CQ has one handler. A
 * poller that finds the role taken leaves at once; the flush at disconnect waits for the holder's
 * batch to end (a grace period: afterwards no handler is running, so what the flush unmaps and
 * destroys is used by nobody) and keeps the role until it is done.
 */
final class PollRole {
    /** How long {@link #await} waits for another thread's batch to end, by default. */
    static final long WAIT_NANOS = 10_000_000_000L;
    private final AtomicReference<Thread> holder = new AtomicReference<>();
    private final Object owner;
    private final long waitNanos;

    /** @param owner named in error messages */
    PollRole(Object owner) {
        this(owner, WAIT_NANOS);
    }

    /** With another wait limit (tests). */
    PollRole(Object owner, long waitNanos) {
        this.owner = owner;
        this.waitNanos = waitNanos;
    }

    /**
     * Takes the role if nobody holds it.
     *
     * @return false if another thread holds it
     * @throws RdmaException {@link Errno#EBUSY} if this thread holds it (a handler polling its own CQ)
     */
    boolean tryTake() {
        Thread me = Thread.currentThread();
        if (holder.compareAndSet(null, me)) {
            return true;
        }
        if (holder.get() == me) {
            throw reentered();
        }
        return false;
    }

    /**
     * Takes the role, waiting (spinning briefly, then napping) for the holder to leave.
     *
     * @throws RdmaException {@link Errno#EBUSY} if this thread holds it, or if the holder stayed for
     *                       the wait limit ({@link #WAIT_NANOS} by default); the role is not taken then
     */
    void await() {
        long deadline = 0;
        for (int spins = 0; !tryTake(); spins++) {
            if (spins < 100) {
                Thread.onSpinWait();
                continue;
            }
            long now = System.nanoTime();
            if (deadline == 0) {
                deadline = now + waitNanos;
            } else if (now - deadline > 0) {
                throw new RdmaException(Errno.EBUSY, owner + ": another thread has been handling completions for "
                        + waitNanos / 1_000_000 + " ms; gave up and changed nothing");
            }
            LockSupport.parkNanos(10_000);
        }
    }

    void release() {
        holder.set(null);
    }

    private RdmaException reentered() {
        return new RdmaException(Errno.EBUSY, owner + ": poll or flushDisconnect called from inside one of its own"
                + " completion handlers; call it after poll returns");
    }
}
