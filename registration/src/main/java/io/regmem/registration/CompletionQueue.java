package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;

/**
 * A completion queue ({@code ib_create_cq}): where work completions of the queue pairs that use it
 * arrive. It counts the QPs that use it; destroying it while any does fails with {@link Errno#EBUSY}.
 */
public final class CompletionQueue extends RdmaResource implements AutoCloseable {
    private final int depth;
    private int useCount;

    CompletionQueue(RdmaDevice device, int depth) {
        super(device, "CompletionQueue", null);
        this.depth = depth;
    }

    /** Entries the queue holds. */
    public int depth() {
        return depth;
    }

    /** Queue pairs using this CQ (as send CQ, receive CQ, or both: counted once per role). */
    public int useCount() {
        synchronized (device.lock) {
            return useCount;
        }
    }

    void retain() {
        useCount++;
    }

    void release() {
        useCount--;
    }

    /**
     * Destroys the CQ ({@code ib_destroy_cq}).
     *
     * @throws RdmaException {@link Errno#EBUSY} while queue pairs use it (the CQ stays usable);
     *                       {@link Errno#EBADF} if already destroyed
     */
    @Override
    public void close() {
        synchronized (device.lock) {
            checkAlive("close");
            if (useCount > 0) {
                throw new RdmaException(Errno.EBUSY, this + ": cannot destroy while " + useCount
                        + " queue pair role(s) use it; destroy the QPs first");
            }
            markDestroyed();
        }
    }
}
