package io.regmem.core.internal;

/**
 * {@code <linux/futex.h>}: the futex operations and flags a sleeping progress thread waits and is woken
 * with, through {@link Unistd#syscall} ({@link Unistd#SYS_FUTEX}, {@link Unistd#SYS_FUTEX_WAITV}).
 */
public final class Futex {
    public static final int FUTEX_WAIT = 0;
    public static final int FUTEX_WAKE = 1;
    /** futex_waitv: a 32-bit futex word. */
    public static final int FUTEX2_SIZE_U32 = 0x02;
    /** {@code <time.h>}: the clock futex_waitv's absolute timeout is read on. */
    public static final int CLOCK_MONOTONIC = 1;

    private Futex() {
    }
}
