package io.regmem.core.internal;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.util.Locale;

/**
 * regmem's one binding of the libc memory calls ({@code mmap}, {@code munmap}, {@code madvise},
 * {@code sysconf(_SC_PAGESIZE)}) and of errno capture, for core's chunk sources and the io_uring
 * module's ring memory. The calls return libc's raw results; a failed call leaves its errno in the
 * caller's {@link #CAPTURE} segment ({@link #errno}). Each caller turns failures into its own
 * {@code RdmaException}. Internal: exported only to {@code io.regmem.uring}.
 */
public final class Libc {
    /** What {@code mmap} returns on failure. */
    public static final long MAP_FAILED = -1L;
    /** The layout of the call-state segment every call fills (errno). */
    public static final StructLayout CAPTURE = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CAPTURE.varHandle(MemoryLayout.PathElement.groupElement("errno"));
    private static final int SC_PAGESIZE = 30;

    /** The system's page size (4096 where it could not be asked). */
    public static final long PAGE_SIZE;
    /** Why the calls did not bind (not Linux, or native access refused), or null when they did. */
    public static final String UNAVAILABLE;

    private static final MethodHandle MMAP;
    private static final MethodHandle MUNMAP;
    private static final MethodHandle MADVISE;

    static {
        MethodHandle mmap = null;
        MethodHandle munmap = null;
        MethodHandle madvise = null;
        long page = 4096;
        String why = null;
        if (!System.getProperty("os.name", "").toLowerCase(Locale.ROOT).contains("linux")) {
            why = "needs Linux (this is " + System.getProperty("os.name") + ")";
        } else {
            try {
                Linker linker = Linker.nativeLinker();
                SymbolLookup libc = linker.defaultLookup();
                Linker.Option errno = Linker.Option.captureCallState("errno");
                ValueLayout.OfLong l = ValueLayout.JAVA_LONG;
                ValueLayout.OfInt i = ValueLayout.JAVA_INT;
                mmap = linker.downcallHandle(libc.find("mmap").orElseThrow(), FunctionDescriptor.of(l, l, l, i, i, i, l), errno);
                munmap = linker.downcallHandle(libc.find("munmap").orElseThrow(), FunctionDescriptor.of(i, l, l), errno);
                madvise = linker.downcallHandle(libc.find("madvise").orElseThrow(), FunctionDescriptor.of(i, l, l, i), errno);
                MethodHandle sysconf = linker.downcallHandle(libc.find("sysconf").orElseThrow(), FunctionDescriptor.of(l, i));
                long p = (long) sysconf.invokeExact(SC_PAGESIZE);
                if (p > 0) {
                    page = p;
                }
            } catch (Throwable t) {
                why = "the libc calls did not bind (" + t + "); run with --enable-native-access";
                mmap = null;
                munmap = null;
                madvise = null;
            }
        }
        MMAP = mmap;
        MUNMAP = munmap;
        MADVISE = madvise;
        PAGE_SIZE = page;
        UNAVAILABLE = why;
    }

    private Libc() {
    }

    /** The errno a failed call left in {@code capture}. */
    public static int errno(MemorySegment capture) {
        return (int) ERRNO.get(capture, 0L);
    }

    /** {@code mmap(addr, length, prot, flags, fd, offset)}: the address, or {@link #MAP_FAILED}. */
    public static long mmap(MemorySegment capture, long addr, long length, int prot, int flags, int fd, long offset)
            throws Throwable {
        return (long) MMAP.invokeExact(capture, addr, length, prot, flags, fd, offset);
    }

    /** {@code munmap(addr, length)}: 0, or -1. */
    public static int munmap(MemorySegment capture, long addr, long length) throws Throwable {
        return (int) MUNMAP.invokeExact(capture, addr, length);
    }

    /** {@code madvise(addr, length, advice)}: 0, or -1. */
    public static int madvise(MemorySegment capture, long addr, long length, int advice) throws Throwable {
        return (int) MADVISE.invokeExact(capture, addr, length, advice);
    }
}
