package io.regmem.core;

import java.util.Objects;

/**
 * The one exception regmem throws for misuse and for failures of the memory or the transport.
 *
 * <p>It carries an {@link Errno} and a message that names the object and the rule that was
 * broken. A call that throws it has changed nothing: every object it touched is as it was before
 * the call. Expected back-pressure (a full ring, an empty pool) is reported by return values, not
 * by this exception.
 */
public class RdmaException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final Errno errno;

    /**
     * @param errno   what kind of failure this is
     * @param message names the object and the rule, e.g. "BufferPool[main]: size 0 is not in [1, 1048576]"
     */
    public RdmaException(Errno errno, String message) {
        super(Objects.requireNonNull(errno, "errno") + ": " + message);
        this.errno = errno;
    }

    /**
     * @param errno   what kind of failure this is
     * @param message names the object and the rule
     * @param cause   the underlying failure
     */
    public RdmaException(Errno errno, String message, Throwable cause) {
        super(Objects.requireNonNull(errno, "errno") + ": " + message, cause);
        this.errno = errno;
    }

    /** The error number of this failure. */
    public Errno errno() {
        return errno;
    }
}
