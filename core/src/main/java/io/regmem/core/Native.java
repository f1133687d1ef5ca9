package io.regmem.core;

import io.regmem.core.internal.Libc;
import io.regmem.core.internal.Mman;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The libc memory calls core needs ({@code mmap}, {@code munmap}, {@code madvise}), bound once in
 * {@link Mman} (regmem's one libc binding), with core's checks and messages. Linux only;
 * {@link #AVAILABLE} says whether they bound. Every call here is on a slow path (chunk reservation), so errno capture's small
 * allocation does not matter.
 */
final class Native {
    static final int PROT_NONE = Mman.PROT_NONE;
    static final int PROT_READ = Mman.PROT_READ;
    static final int PROT_WRITE = Mman.PROT_WRITE;
    static final int MAP_PRIVATE = Mman.MAP_PRIVATE;
    static final int MAP_FIXED = Mman.MAP_FIXED;
    static final int MAP_ANONYMOUS = Mman.MAP_ANONYMOUS;
    static final int MAP_NORESERVE = Mman.MAP_NORESERVE;
    static final int MAP_HUGETLB = Mman.MAP_HUGETLB;
    static final int MADV_DONTNEED = Mman.MADV_DONTNEED;
    static final int MADV_HUGEPAGE = Mman.MADV_HUGEPAGE;
    /** Populate the range's page tables writable, as writes would (Linux 5.14). */
    static final int MADV_POPULATE_WRITE = Mman.MADV_POPULATE_WRITE;
    /** True when the calls bound (Linux, native access granted). */
    static final boolean AVAILABLE = Libc.UNAVAILABLE == null;
    /** The system's page size. */
    static final long PAGE_SIZE = Libc.PAGE_SIZE;

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
            MemorySegment state = arena.allocate(Libc.CAPTURE);
            long result = Mman.mmap(state, addr, length, prot, flags, -1, 0L);
            if (result < 0) {
                int errno = (int) -result;
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
            MemorySegment state = arena.allocate(Libc.CAPTURE);
            int rc = Mman.munmap(state, addr, length);
            if (rc != 0) {
                int errno = -rc;
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
            MemorySegment state = arena.allocate(Libc.CAPTURE);
            return -Mman.madvise(state, addr, length, advice);
        } catch (Throwable t) {
            return Errno.EIO.value();
        }
    }

    /**
     * Faults every page of [addr, addr + length) in (pre-touch): the kernel populates them writable
     * if it can ({@code MADV_POPULATE_WRITE}), else each page's first byte is written back as read,
     * so the memory's content does not change either way.
     */
    static void populate(long addr, long length) {
        if (madvise(addr, length, MADV_POPULATE_WRITE) == 0 || !AVAILABLE) {
            return; // (without native calls the source is an arena, whose memory is zeroed, so touched, already)
        }
        MemorySegment seg = MemorySegment.ofAddress(addr).reinterpret(length);
        for (long off = 0; off < length; off += PAGE_SIZE) {
            seg.set(ValueLayout.JAVA_BYTE, off, seg.get(ValueLayout.JAVA_BYTE, off));
        }
    }

    private static void requireAvailable(String what) {
        if (!AVAILABLE) {
            throw new RdmaException(Errno.EOPNOTSUPP, what + ": mmap is not available here (needs Linux and "
                    + "--enable-native-access); use ChunkSource.arena() instead");
        }
    }
}
