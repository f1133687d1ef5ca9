package io.regmem.core;

/**
 * The error numbers regmem reports, with their Linux values, so that a failure reads the same
 * way it would from libibverbs or the kernel.
 *
 * <p>Every {@link RdmaException} carries exactly one of these. The numbers are stable and equal to
 * Linux's {@code errno.h} on x86-64 and aarch64.
 */
public enum Errno {
    /** Operation not permitted. */
    EPERM(1),
    /** No such object (a key, an id or a name that is not known). */
    ENOENT(2),
    /** Interrupted: the waiting thread was interrupted (its interrupt status stays set). */
    EINTR(4),
    /** Input/output error: the transport or the operating system failed. */
    EIO(5),
    /** The object was closed or destroyed: it cannot be used any more. */
    EBADF(9),
    /** Try again: a ring, a queue or a pool is empty or full for now. */
    EAGAIN(11),
    /** Out of memory: a configured limit or the operating system refused more memory. */
    ENOMEM(12),
    /** Permission denied: the access rights do not allow the operation. */
    EACCES(13),
    /** Bad address: an address or a range lies outside the memory it must be in. */
    EFAULT(14),
    /** Busy: the object still has children or users. */
    EBUSY(16),
    /** Exists already: a name that must be unique is taken. */
    EEXIST(17),
    /** No such device: the transport a provider needs is not there. */
    ENODEV(19),
    /** Invalid argument: the call broke a documented rule. */
    EINVAL(22),
    /** No space left on the device (a file system is full). */
    ENOSPC(28),
    /** Result or argument out of range (an overflow). */
    ERANGE(34),
    /** The system call is not implemented or is disabled (io_uring off, a seccomp filter). */
    ENOSYS(38),
    /** The operation is not supported by this provider or configuration. */
    EOPNOTSUPP(95),
    /** Address already in use: another socket holds the address an ID asked to bind. */
    EADDRINUSE(98),
    /** Address not available: an ID left a multicast group it had not joined. */
    EADDRNOTAVAIL(99),
    /** Network is down: the interface a device's datagrams use went down (its multicast groups are lost). */
    ENETDOWN(100),
    /** Connection reset by peer: the other end went away in the middle of an exchange. */
    ECONNRESET(104),
    /** Already connected: a connection-establishment notice for an ID that is established. */
    EISCONN(106),
    /** Timed out: a peer did not answer within the stated bound. */
    ETIMEDOUT(110),
    /** Connection refused: the peer rejected the connection request, or there was nobody to take it. */
    ECONNREFUSED(111),
    /** No route to host: an address that does not resolve to a host this provider can reach. */
    EHOSTUNREACH(113);

    private final int value;

    Errno(int value) {
        this.value = value;
    }

    /** The Linux {@code errno} value. */
    public int value() {
        return value;
    }

    /**
     * The constant for a Linux {@code errno} value, or {@link #EIO} for one regmem does not name.
     *
     * @param value a positive errno as returned by the operating system
     * @return the matching constant, never null
     */
    public static Errno of(int value) {
        for (Errno e : values()) {
            if (e.value == value) {
                return e;
            }
        }
        return EIO;
    }
}
