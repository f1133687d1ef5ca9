package io.regmem.core;

/**
 * A {@link BufferPool} could not satisfy an allocation without going over its {@code maxBytes}
 * limit, or the operating system refused more memory. Its {@link #errno()} is
 * {@link Errno#ENOMEM}; it says which limit was hit, how much is reserved and how much was asked.
 * Nothing was allocated and the pool is unchanged.
 */
public final class PoolExhaustedException extends RdmaException {
    private static final long serialVersionUID = 1L;

    private final long limit;
    private final long reserved;
    private final long requested;

    PoolExhaustedException(String pool, long limit, long reserved, long inUse, long requested) {
        super(Errno.ENOMEM, pool + ": maxBytes limit " + limit + " reached: " + reserved
                + " bytes reserved from the chunk source (" + inUse + " in live buffers), "
                + requested + " more needed");
        this.limit = limit;
        this.reserved = reserved;
        this.requested = requested;
    }

    /** The pool's {@code maxBytes} limit. */
    public long limit() {
        return limit;
    }

    /** Bytes the pool had reserved from its chunk source when the allocation failed. */
    public long reserved() {
        return reserved;
    }

    /** Bytes of new chunk memory the failed allocation needed. */
    public long requested() {
        return requested;
    }
}
