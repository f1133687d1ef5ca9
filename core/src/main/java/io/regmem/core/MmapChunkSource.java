package io.regmem.core;

import java.util.concurrent.atomic.AtomicLong;

/**
 * Chunks from anonymous {@code mmap}. Page-aligned by construction, zero-filled by the kernel,
 * physically backed only when touched.
 */
final class MmapChunkSource implements ChunkSource {
    static final MmapChunkSource PLAIN = new MmapChunkSource("mmap", false, false);
    static final MmapChunkSource TRANSPARENT_HUGE = new MmapChunkSource("mmap+thp", true, false);
    static final MmapChunkSource HUGETLB = new MmapChunkSource("hugetlb", false, true);
    private static final long HUGE_PAGE = 2L << 20;

    private final String name;
    private final boolean adviseHuge;
    private final boolean hugetlb;
    private final AtomicLong retiredBytes = new AtomicLong();

    private MmapChunkSource(String name, boolean adviseHuge, boolean hugetlb) {
        this.name = name;
        this.adviseHuge = adviseHuge;
        this.hugetlb = hugetlb;
    }

    @Override
    public Chunk allocate(long size, long alignment) {
        if (size <= 0 || size % pageSize() != 0) {
            throw new RdmaException(Errno.EINVAL, "ChunkSource[" + name + "]: chunk size " + size
                    + " is not a positive multiple of the page size " + pageSize());
        }
        if (Long.bitCount(alignment) != 1 || alignment > pageSize()) {
            throw new RdmaException(Errno.EINVAL, "ChunkSource[" + name + "]: alignment " + alignment
                    + " must be a power of two no larger than the page size " + pageSize());
        }
        int flags = Native.MAP_PRIVATE | Native.MAP_ANONYMOUS | (hugetlb ? Native.MAP_HUGETLB : 0);
        long address = Native.mmap(0L, size, Native.PROT_READ | Native.PROT_WRITE, flags, "ChunkSource[" + name + "]");
        if (adviseHuge) {
            Native.madvise(address, size, Native.MADV_HUGEPAGE); // advice only: failure keeps small pages
        }
        return new Chunk(this, address, size, null);
    }

    @Override
    public void release(Chunk chunk) {
        check(chunk);
        Native.munmap(chunk.address(), chunk.size(), "ChunkSource[" + name + "]");
    }

    @Override
    public void retire(Chunk chunk) {
        check(chunk);
        // Replace the mapping in place: the old pages go back to the kernel, the range stays
        // readable and writable (zeros), so a stale unchecked view cannot fault.
        int flags = Native.MAP_PRIVATE | Native.MAP_ANONYMOUS | Native.MAP_FIXED | Native.MAP_NORESERVE;
        Native.mmap(chunk.address(), chunk.size(), Native.PROT_READ | Native.PROT_WRITE, flags,
                "ChunkSource[" + name + "] retire");
        retiredBytes.addAndGet(chunk.size());
    }

    @Override
    public boolean canDecommit() {
        return Native.AVAILABLE;
    }

    /**
     * Drops the pages with {@code madvise(MADV_DONTNEED)}: private anonymous memory then reads as
     * zeros and is backed again page by page when touched (huge pages too, since Linux 5.18). The
     * range, its huge-page advice and its mapping stay. If the kernel refuses, a plain or THP
     * chunk's mapping is replaced in place as {@link #retire} does; a hugetlb chunk keeps its pages.
     */
    @Override
    public void decommit(Chunk chunk) {
        check(chunk);
        if (Native.madvise(chunk.address(), chunk.size(), Native.MADV_DONTNEED) != 0 && !hugetlb) {
            int flags = Native.MAP_PRIVATE | Native.MAP_ANONYMOUS | Native.MAP_FIXED;
            Native.mmap(chunk.address(), chunk.size(), Native.PROT_READ | Native.PROT_WRITE, flags,
                    "ChunkSource[" + name + "] decommit");
            if (adviseHuge) {
                Native.madvise(chunk.address(), chunk.size(), Native.MADV_HUGEPAGE);
            }
        }
    }

    /** Address space kept (with no physical memory) for chunks retired because unchecked views escaped. */
    long retiredBytes() {
        return retiredBytes.get();
    }

    private void check(Chunk chunk) {
        if (chunk.source() != this) {
            throw new RdmaException(Errno.EINVAL, "ChunkSource[" + name + "]: " + chunk + " belongs to another source");
        }
    }

    @Override
    public long pageSize() {
        return hugetlb ? HUGE_PAGE : Native.PAGE_SIZE;
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public String toString() {
        return "ChunkSource[" + name + "]";
    }
}
