package io.regmem.core.internal;

import static io.regmem.core.internal.Libc.I;
import static io.regmem.core.internal.Libc.L;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

/** {@code <sys/mman.h>}: mappings, advice and memfds. Each call returns its result, or {@code -errno} ({@link Libc}). */
public final class Mman {
    public static final int PROT_NONE = 0;
    public static final int PROT_READ = 1;
    public static final int PROT_WRITE = 2;
    public static final int MAP_SHARED = 0x01;
    public static final int MAP_PRIVATE = 0x02;
    public static final int MAP_FIXED = 0x10;
    public static final int MAP_ANONYMOUS = 0x20;
    public static final int MAP_NORESERVE = 0x4000;
    public static final int MAP_POPULATE = 0x8000;
    public static final int MAP_HUGETLB = 0x40000;
    public static final int MADV_DONTNEED = 4;
    public static final int MADV_HUGEPAGE = 14;
    /** Populate the range's page tables writable, as writes would (Linux 5.14). */
    public static final int MADV_POPULATE_WRITE = 23;
    public static final int MFD_CLOEXEC = 1;
    public static final int MFD_ALLOW_SEALING = 2;

    private static final MethodHandle MMAP = Libc.capturing("mmap", FunctionDescriptor.of(L, L, L, I, I, I, L));
    private static final MethodHandle MUNMAP = Libc.capturing("munmap", FunctionDescriptor.of(I, L, L));
    private static final MethodHandle MADVISE = Libc.capturing("madvise", FunctionDescriptor.of(I, L, L, I));
    private static final MethodHandle MEMFD_CREATE = Libc.capturing("memfd_create", FunctionDescriptor.of(I, L, I));

    private Mman() {
    }

    /** {@code mmap(addr, length, prot, flags, fd, offset)}: the address, or -errno. */
    public static long mmap(MemorySegment capture, long addr, long length, int prot, int flags, int fd, long offset) {
        try {
            long a = (long) MMAP.invokeExact(capture, addr, length, prot, flags, fd, offset);
            return a == -1L ? -Libc.errno(capture) : a;
        } catch (Throwable t) {
            throw Libc.failedToRun("mmap", t);
        }
    }

    /** {@code munmap(addr, length)}: 0, or -errno. */
    public static int munmap(MemorySegment capture, long addr, long length) {
        try {
            return Libc.ret(capture, (int) MUNMAP.invokeExact(capture, addr, length));
        } catch (Throwable t) {
            throw Libc.failedToRun("munmap", t);
        }
    }

    /** {@code madvise(addr, length, advice)}: 0, or -errno. */
    public static int madvise(MemorySegment capture, long addr, long length, int advice) {
        try {
            return Libc.ret(capture, (int) MADVISE.invokeExact(capture, addr, length, advice));
        } catch (Throwable t) {
            throw Libc.failedToRun("madvise", t);
        }
    }

    /** {@code memfd_create(name, flags)}: the fd, or -errno. */
    public static int memfdCreate(MemorySegment capture, MemorySegment name, int flags) {
        try {
            return Libc.ret(capture, (int) MEMFD_CREATE.invokeExact(capture, name.address(), flags));
        } catch (Throwable t) {
            throw Libc.failedToRun("memfd_create", t);
        }
    }
}
