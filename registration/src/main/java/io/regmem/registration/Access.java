package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;

/**
 * Access rights of a memory region, with the bit values of {@code ib_access_flags}. Local read is
 * always allowed. A region that grants remote write or remote atomic access must also grant local
 * write (the rule user-space verbs enforce), else registration fails with {@link Errno#EINVAL}.
 */
public enum Access {
    /** The local HCA may write into the region (receives, RDMA READ sinks). */
    LOCAL_WRITE(1),
    /** A peer may RDMA WRITE into the region. Needs {@link #LOCAL_WRITE}. */
    REMOTE_WRITE(2),
    /** A peer may RDMA READ from the region. */
    REMOTE_READ(4),
    /** A peer may perform atomics on the region. Needs {@link #LOCAL_WRITE}. */
    REMOTE_ATOMIC(8),
    /** Memory windows may be bound to the region. */
    MW_BIND(16),
    /** Remote addresses are offsets from the region's start. */
    ZERO_BASED(32),
    /** On-demand paging; only where the device supports it. */
    ON_DEMAND(64),
    /** The memory is backed by huge pages. */
    HUGETLB(128);

    private final int bit;

    Access(int bit) {
        this.bit = bit;
    }

    /** The flag's bit, as in {@code ib_access_flags}. */
    public int bit() {
        return bit;
    }

    /** The OR of the given flags' bits. */
    public static int mask(Access... flags) {
        int m = 0;
        for (Access a : flags) {
            m |= a.bit;
        }
        return m;
    }

    /** True if {@code mask} has every bit of {@code flag}. */
    public static boolean has(int mask, Access flag) {
        return (mask & flag.bit) != 0;
    }

    /**
     * Checks the rules that hold for every registration.
     *
     * @param mask the requested access bits
     * @param who  the object the message names
     * @throws RdmaException {@link Errno#EINVAL} for unknown bits or remote write/atomic without local write
     */
    public static void validate(int mask, String who) {
        if ((mask & ~0xFF) != 0) {
            throw new RdmaException(Errno.EINVAL, who + ": unknown access bits 0x" + Integer.toHexString(mask & ~0xFF));
        }
        if ((has(mask, REMOTE_WRITE) || has(mask, REMOTE_ATOMIC)) && !has(mask, LOCAL_WRITE)) {
            throw new RdmaException(Errno.EINVAL, who + ": REMOTE_WRITE and REMOTE_ATOMIC need LOCAL_WRITE (access "
                    + describe(mask) + ")");
        }
    }

    /** The flags of a mask as text, e.g. {@code LOCAL_WRITE|REMOTE_READ}. */
    public static String describe(int mask) {
        StringBuilder sb = new StringBuilder();
        for (Access a : values()) {
            if (has(mask, a)) {
                sb.append(sb.isEmpty() ? "" : "|").append(a.name());
            }
        }
        return sb.isEmpty() ? "LOCAL_READ" : sb.toString();
    }
}
