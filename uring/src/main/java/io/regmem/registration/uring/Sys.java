package io.regmem.registration.uring;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.core.internal.Libc;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.Locale;

/**
 * FFM downcalls for io_uring: the three io_uring system calls through libc's {@code syscall}
 * (liburing 2.3's helpers are header-only, so regmem binds the kernel directly), and {@code mmap},
 * {@code munmap}, {@code open}, {@code close}, {@code statx} and {@code getrlimit}. Every call takes
 * an errno-capture segment; {@link #errno(MemorySegment)} reads it. Pointers cross as {@code long}
 * so that the submit and reap path allocates nothing.
 */
final class Sys {
    static final int O_RDONLY = 0;
    static final int O_WRONLY = 1;
    static final int O_RDWR = 2;
    static final int O_CREAT = 0100;
    static final int O_TRUNC = 01000;
    static final int O_DSYNC = 010000;
    static final int O_DIRECT = 040000;
    static final int O_CLOEXEC = 02000000;
    static final int PROT_READ = 1;
    static final int PROT_WRITE = 2;
    static final int MAP_SHARED = 1;
    static final int MAP_POPULATE = 0x8000;
    static final int AT_FDCWD = -100;
    static final int RLIMIT_MEMLOCK = 8;
    static final long RLIM_INFINITY = -1L;

    /** The call-state (errno) layout of every call here: core's, shared ({@link Libc#CAPTURE}). */
    static final StructLayout CAPTURE = Libc.CAPTURE;

    /** Null when the calls did not bind (not Linux, or native access refused). */
    private static final MethodHandle SYSCALL;
    private static final MethodHandle OPEN;
    private static final MethodHandle CLOSE;
    private static final MethodHandle STATX;
    private static final MethodHandle GETRLIMIT;
    /** Why binding failed, or null. */
    static final String UNAVAILABLE;

    static {
        MethodHandle syscall = null;
        MethodHandle open = null;
        MethodHandle close = null;
        MethodHandle statx = null;
        MethodHandle getrlimit = null;
        String why = null;
        if (!System.getProperty("os.name", "").toLowerCase(Locale.ROOT).contains("linux")) {
            why = "io_uring needs Linux (this is " + System.getProperty("os.name") + ")";
        } else {
            try {
                Linker linker = Linker.nativeLinker();
                SymbolLookup libc = linker.defaultLookup();
                Linker.Option errno = Linker.Option.captureCallState("errno");
                ValueLayout.OfLong l = ValueLayout.JAVA_LONG;
                ValueLayout.OfInt i = ValueLayout.JAVA_INT;
                syscall = linker.downcallHandle(libc.find("syscall").orElseThrow(),
                        FunctionDescriptor.of(l, l, l, l, l, l, l, l), errno, Linker.Option.firstVariadicArg(1));
                open = linker.downcallHandle(libc.find("open").orElseThrow(),
                        FunctionDescriptor.of(i, l, i, i), errno, Linker.Option.firstVariadicArg(2));
                close = linker.downcallHandle(libc.find("close").orElseThrow(), FunctionDescriptor.of(i, i), errno);
                statx = linker.downcallHandle(libc.find("statx").orElseThrow(),
                        FunctionDescriptor.of(i, i, l, i, i, l), errno);
                getrlimit = linker.downcallHandle(libc.find("getrlimit").orElseThrow(),
                        FunctionDescriptor.of(i, i, l), errno);
            } catch (Throwable t) {
                why = "io_uring: the system calls did not bind (" + t + "); run with --enable-native-access";
            }
        }
        SYSCALL = syscall;
        OPEN = open;
        CLOSE = close;
        STATX = statx;
        GETRLIMIT = getrlimit;
        if (why == null && Libc.UNAVAILABLE != null) {
            why = "io_uring: core's libc binding (mmap) " + Libc.UNAVAILABLE; // native access refused to io.regmem.core
        }
        UNAVAILABLE = why;
    }

    private Sys() {
    }

    static void requireBound() {
        if (UNAVAILABLE != null) {
            throw new RdmaException(Errno.ENOSYS, UNAVAILABLE);
        }
    }

    /** The errno a failed call left in {@code capture}. */
    static int errno(MemorySegment capture) {
        return Libc.errno(capture);
    }

    /** {@code syscall(nr, a..f)}: the raw result, -1 with errno in {@code capture} on failure. */
    static long syscall(MemorySegment capture, long nr, long a, long b, long c, long d, long e, long f) {
        try {
            return (long) SYSCALL.invokeExact(capture, nr, a, b, c, d, e, f);
        } catch (Throwable t) {
            throw new RdmaException(Errno.EIO, "io_uring: syscall " + nr + " failed to run", t);
        }
    }

    static long mmap(MemorySegment capture, long length, int prot, int flags, int fd, long offset) {
        try {
            return Libc.mmap(capture, 0L, length, prot, flags, fd, offset);
        } catch (Throwable t) {
            throw new RdmaException(Errno.EIO, "io_uring: mmap failed to run", t);
        }
    }

    static int munmap(MemorySegment capture, long address, long length) {
        try {
            return Libc.munmap(capture, address, length);
        } catch (Throwable t) {
            throw new RdmaException(Errno.EIO, "io_uring: munmap failed to run", t);
        }
    }

    /** {@code open(path, flags, 0644)}: the fd, or -1 with errno in {@code capture}. */
    static int open(MemorySegment capture, String path, int flags) {
        try (Arena a = Arena.ofConfined()) {
            return (int) OPEN.invokeExact(capture, a.allocateFrom(path).address(), flags, 0644);
        } catch (Throwable t) {
            throw new RdmaException(Errno.EIO, "io_uring: open failed to run", t);
        }
    }

    static int close(MemorySegment capture, int fd) {
        try {
            return (int) CLOSE.invokeExact(capture, fd);
        } catch (Throwable t) {
            throw new RdmaException(Errno.EIO, "io_uring: close failed to run", t);
        }
    }

    /** {@code statx(AT_FDCWD, path, 0, mask, buf)}: 0, or -1 with errno in {@code capture}. */
    static int statx(MemorySegment capture, String path, int mask, MemorySegment buf) {
        try (Arena a = Arena.ofConfined()) {
            return (int) STATX.invokeExact(capture, AT_FDCWD, a.allocateFrom(path).address(), 0, mask, buf.address());
        } catch (Throwable t) {
            throw new RdmaException(Errno.EIO, "io_uring: statx failed to run", t);
        }
    }

    /** The soft {@code RLIMIT_MEMLOCK} in bytes, {@link #RLIM_INFINITY} for unlimited, or -2 when unknown. */
    static long memlockLimit() {
        if (GETRLIMIT == null) {
            return -2;
        }
        try (Arena a = Arena.ofConfined()) {
            MemorySegment capture = a.allocate(CAPTURE);
            MemorySegment rl = a.allocate(16, 8);
            int rc = (int) GETRLIMIT.invokeExact(capture, RLIMIT_MEMLOCK, rl.address());
            return rc == 0 ? rl.get(ValueLayout.JAVA_LONG, 0) : -2;
        } catch (Throwable t) {
            return -2;
        }
    }

    /** A memlock limit for messages: "64 KiB", "unlimited" or "unknown". */
    static String describeLimit(long limit) {
        if (limit == RLIM_INFINITY) {
            return "unlimited";
        }
        if (limit < 0) {
            return "unknown";
        }
        return limit % 1024 == 0 ? (limit / 1024) + " KiB" : limit + " bytes";
    }
}
