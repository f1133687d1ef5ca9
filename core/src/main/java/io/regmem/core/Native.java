package io.regmem.core;

import java.lang.foreign.Arena;
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
 * FFM downcalls to the few libc functions core needs: {@code mmap}, {@code munmap},
 * {@code madvise} and {@code sysconf(_SC_PAGESIZE)}. Linux only; {@link #AVAILABLE} says whether
 * they bound. Every call here is on a slow path (chunk reservation), so errno capture's small
 * allocation does not matter.
 */
final class Native {
    static final int PROT_NONE = 0;
    static final int PROT_READ = 1;
    static final int PROT_WRITE = 2;
    static final int MAP_PRIVATE = 0x02;
    static final int MAP_FIXED = 0x10;
    static final int MAP_ANONYMOUS = 0x20;
    static final int MAP_NORESERVE = 0x4000;
    static final int MAP_HUGETLB = 0x40000;
    static final int MADV_HUGEPAGE = 14;
    private static final int SC_PAGESIZE = 30;
    private static final long MAP_FAILED = -1L;

    /** True when the calls bound (Linux with a C library the linker can see). */
    static final boolean AVAILABLE;
    /** The system page size, or 4096 when the calls did not bind. */
    static final long PAGE_SIZE;

    private static final MethodHandle MMAP;
    private static final MethodHandle MUNMAP;
    private static final MethodHandle MADVISE;
    private static final StructLayout CAPTURE = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO =
            CAPTURE.varHandle(MemoryLayout.PathElement.groupElement("errno"));

    static {
        MethodHandle mmap = null;
        MethodHandle munmap = null;
        MethodHandle madvise = null;
        long page = 4096;
        boolean ok = false;
        if (System.getProperty("os.name", "").toLowerCase(Locale.ROOT).contains("linux")) {
            try {
                Linker linker = Linker.nativeLinker();
                SymbolLookup libc = linker.defaultLookup();
                Linker.Option errno = Linker.Option.captureCallState("errno");
                mmap = linker.downcallHandle(libc.find("mmap").orElseThrow(),
                        FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG,
                                ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG),
                        errno);
                munmap = linker.downcallHandle(libc.find("munmap").orElseThrow(),
                        FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG), errno);
                madvise = linker.downcallHandle(libc.find("madvise").orElseThrow(),
                        FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG,
                                ValueLayout.JAVA_INT), errno);
                MethodHandle sysconf = linker.downcallHandle(libc.find("sysconf").orElseThrow(),
                        FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT));
                long p = (long) sysconf.invokeExact(SC_PAGESIZE);
                if (p > 0) {
                    page = p;
                }
                ok = true;
            } catch (Throwable t) {
                // Native access refused or no libc symbols: the mmap source reports it when used.
                ok = false;
            }
        }
        MMAP = mmap;
        MUNMAP = munmap;
        MADVISE = madvise;
        PAGE_SIZE = page;
        AVAILABLE = ok;
    }

    private Native() {
    }

    /**
     * Calls {@code mmap(addr, length, prot, flags, -1, 0)}.
     *
     * @return the mapped address
     * @throws RdmaException with the errno of the failure
     */
    static long mmap(long addr, long length, int prot, int flags, String what) {
        requireAvailable(what);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CAPTURE);
            long result = (long) MMAP.invokeExact(state, addr, length, prot, flags, -1, 0L);
            if (result == MAP_FAILED) {
                int errno = (int) ERRNO.get(state, 0L);
                Errno e = Errno.of(errno);
                throw new RdmaException(e == Errno.EIO ? Errno.ENOMEM : e,
                        what + ": mmap of " + length + " bytes failed with errno " + errno);
            }
            return result;
        } catch (RdmaException e) {
            throw e;
        } catch (Throwable t) {
            throw new RdmaException(Errno.EIO, what + ": mmap call failed", t);
        }
    }

    /** Calls {@code munmap(addr, length)}; failure throws (it would mean a corrupt chunk table). */
    static void munmap(long addr, long length, String what) {
        requireAvailable(what);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CAPTURE);
            int rc = (int) MUNMAP.invokeExact(state, addr, length);
            if (rc != 0) {
                int errno = (int) ERRNO.get(state, 0L);
                throw new RdmaException(Errno.of(errno), what + ": munmap of " + length + " bytes at 0x"
                        + Long.toHexString(addr) + " failed with errno " + errno);
            }
        } catch (RdmaException e) {
            throw e;
        } catch (Throwable t) {
            throw new RdmaException(Errno.EIO, what + ": munmap call failed", t);
        }
    }

    /** Calls {@code madvise}; returns the errno, or 0 on success (advice is best effort). */
    static int madvise(long addr, long length, int advice) {
        if (!AVAILABLE) {
            return Errno.EOPNOTSUPP.value();
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CAPTURE);
            int rc = (int) MADVISE.invokeExact(state, addr, length, advice);
            return rc == 0 ? 0 : (int) ERRNO.get(state, 0L);
        } catch (Throwable t) {
            return Errno.EIO.value();
        }
    }

    private static void requireAvailable(String what) {
        if (!AVAILABLE) {
            throw new RdmaException(Errno.EOPNOTSUPP, what + ": mmap is not available here (needs Linux and "
                    + "--enable-native-access); use ChunkSource.arena() instead");
        }
    }
}
