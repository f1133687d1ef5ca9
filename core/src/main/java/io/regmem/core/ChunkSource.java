package io.regmem.core;

/**
 * Where a {@link BufferPool} gets its large, never-moving chunks of memory.
 *
 * <p>The default, {@link #mmap()}, maps anonymous memory with {@code mmap} through FFM. Others:
 * {@link #mmapHugePages()} (transparent huge pages by {@code madvise}), {@link #hugetlb()}
 * (explicit huge pages, which must be reserved by the administrator), {@link #arena()} (memory from
 * a shared {@link java.lang.foreign.Arena}, portable). A transport provider may supply its own
 * source whose memory is registered at birth.
 *
 * <p>Implementations must be thread-safe; a pool calls them only on slow paths (a new slab, a
 * buffer larger than the largest size class, close).
 */
public interface ChunkSource {

    /**
     * Reserves a chunk.
     *
     * @param size      bytes, positive and a multiple of {@link #pageSize()}
     * @param alignment power of two; the chunk's address is a multiple of it (at most the page size
     *                  is guaranteed by mmap-based sources, which is what pools ask for)
     * @return a chunk of exactly {@code size} bytes, zero-filled
     * @throws RdmaException {@link Errno#ENOMEM} when the memory cannot be had
     */
    Chunk allocate(long size, long alignment);

    /**
     * Gives a chunk back. The caller guarantees that no checked view over it is used afterwards
     * (the pool's scoped segments are already closed).
     *
     * @param chunk a chunk this source allocated, released at most once
     */
    void release(Chunk chunk);

    /**
     * Gives back a chunk over which unchecked views (raw-address Agrona or Chronicle views) were
     * made, which may still be used by careless code. The default releases it; an mmap source
     * instead replaces the mapping by fresh, page-less anonymous memory, so that a stale view reads
     * zeros rather than crashing the JVM, and gives the physical memory back.
     *
     * @param chunk a chunk this source allocated
     */
    default void retire(Chunk chunk) {
        release(chunk);
    }

    /**
     * True if this source can {@link #decommit} its chunks: then a pool gives idle chunks' memory
     * back while it runs ({@link BufferPool#trim()}, the decay). False by default: a pool keeps
     * the chunks of such a source until it closes.
     */
    default boolean canDecommit() {
        return false;
    }

    /**
     * Gives a chunk's physical memory back while keeping its address range mapped, readable and
     * writable (zero-filled when next touched), so that the pool can reuse the range for a later
     * chunk and a stale view over it can never fault. Called only when every listener has let go of
     * the chunk (its registrations ended, no I/O into it in flight); never on registered memory.
     * The mmap sources use {@code madvise(MADV_DONTNEED)}. The pool still {@linkplain #release
     * releases} the chunk when it closes.
     *
     * @param chunk a chunk this source allocated, not released
     * @throws RdmaException {@link Errno#EOPNOTSUPP} if {@link #canDecommit()} is false
     */
    default void decommit(Chunk chunk) {
        throw new RdmaException(Errno.EOPNOTSUPP, this + ": cannot decommit " + chunk);
    }

    /** The granularity of this source's chunks in bytes (a power of two). */
    long pageSize();

    /** A short name for messages and stats, e.g. {@code "mmap"}. */
    String name();

    /** Anonymous private memory from {@code mmap}: the default. */
    static ChunkSource mmap() {
        return MmapChunkSource.PLAIN;
    }

    /** {@link #mmap()} with {@code madvise(MADV_HUGEPAGE)} on each chunk (best effort). */
    static ChunkSource mmapHugePages() {
        return MmapChunkSource.TRANSPARENT_HUGE;
    }

    /**
     * Explicit 2 MiB huge pages ({@code MAP_HUGETLB}); allocation fails with
     * {@link Errno#ENOMEM} unless huge pages are reserved ({@code /proc/sys/vm/nr_hugepages}).
     */
    static ChunkSource hugetlb() {
        return MmapChunkSource.HUGETLB;
    }

    /** Memory from a shared {@link java.lang.foreign.Arena} per chunk: works where mmap is unavailable. */
    static ChunkSource arena() {
        return ArenaChunkSource.INSTANCE;
    }
}
