package io.regmem.core.internal;

import static io.regmem.core.internal.Libc.I;
import static io.regmem.core.internal.Libc.L;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

/**
 * {@code <unistd.h>}: {@code close}, {@code ftruncate}, {@code lseek} and {@code syscall} (for the
 * system calls libc has no wrapper for: io_uring's, {@code pidfd_open}, futexes). Each call returns
 * its result, or {@code -errno} ({@link Libc}).
 */
public final class Unistd {
    public static final int SEEK_END = 2;
    public static final long SYS_FUTEX = 202;
    public static final long SYS_PIDFD_OPEN = 434;
    public static final long SYS_FUTEX_WAITV = 449;

    private static final FunctionDescriptor SYSCALL_FD = FunctionDescriptor.of(L, L, L, L, L, L, L, L);
    private static final MethodHandle CLOSE = Libc.capturing("close", FunctionDescriptor.of(I, I));
    private static final MethodHandle FTRUNCATE = Libc.capturing("ftruncate", FunctionDescriptor.of(I, I, L));
    private static final MethodHandle LSEEK = Libc.capturing("lseek", FunctionDescriptor.of(L, I, L, I));
    private static final MethodHandle SYSCALL = Libc.capturing("syscall", SYSCALL_FD, Linker.Option.firstVariadicArg(1));
    private static final MethodHandle SYSCALL_PLAIN = Libc.plain("syscall", SYSCALL_FD, Linker.Option.firstVariadicArg(1));

    private Unistd() {
    }

    /** {@code close(fd)}: 0, or -errno. */
    public static int close(MemorySegment capture, int fd) {
        try {
            return Libc.ret(capture, (int) CLOSE.invokeExact(capture, fd));
        } catch (Throwable t) {
            throw Libc.failedToRun("close", t);
        }
    }

    /** {@code ftruncate(fd, length)}: 0, or -errno. */
    public static int ftruncate(MemorySegment capture, int fd, long length) {
        try {
            return Libc.ret(capture, (int) FTRUNCATE.invokeExact(capture, fd, length));
        } catch (Throwable t) {
            throw Libc.failedToRun("ftruncate", t);
        }
    }

    /** {@code lseek(fd, offset, whence)}: the new offset, or -errno. */
    public static long lseek(MemorySegment capture, int fd, long offset, int whence) {
        try {
            return Libc.retLong(capture, (long) LSEEK.invokeExact(capture, fd, offset, whence));
        } catch (Throwable t) {
            throw Libc.failedToRun("lseek", t);
        }
    }

    /** {@code syscall(nr, a, b, c, d, e, f)}: the result, or -errno. */
    public static long syscall(MemorySegment capture, long nr, long a, long b, long c, long d, long e, long f) {
        try {
            return Libc.retLong(capture, (long) SYSCALL.invokeExact(capture, nr, a, b, c, d, e, f));
        } catch (Throwable t) {
            throw Libc.failedToRun("syscall " + nr, t);
        }
    }

    /**
     * {@code syscall(nr, a, b, c, d, e, f)} where only success matters (a futex wake): the result, or -1
     * on any failure (errno not captured, so nothing is sliced per call).
     */
    public static long syscallPlain(long nr, long a, long b, long c, long d, long e, long f) {
        try {
            return (long) SYSCALL_PLAIN.invokeExact(nr, a, b, c, d, e, f);
        } catch (Throwable t) {
            throw Libc.failedToRun("syscall " + nr, t);
        }
    }
}
