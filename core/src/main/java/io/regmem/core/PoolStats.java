package io.regmem.core;

import java.util.ArrayList;
import java.util.List;

/**
 * A snapshot of a {@link BufferPool}'s accounting. Exact when no application thread is allocating
 * or freeing (the pool's decay does not run while it is taken); while they are, each counter is a
 * recent value of its own (they are read one by one, without a lock the hot path takes, so the hot
 * path never writes a shared counter).
 *
 * @param pool          the pool's name
 * @param reservedBytes bytes of chunk memory reserved from the chunk source (what {@code maxBytes} limits)
 * @param inUseBytes    bytes of capacity in live buffers
 * @param liveBuffers   buffers allocated and not yet freed
 * @param chunks        chunks reserved for size classes (buffers above the largest class have their own, see {@code largeBuffers})
 * @param largeBuffers  live buffers above the largest size class, each in a dedicated chunk
 * @param allocations   allocations since the pool was built
 * @param frees         frees since the pool was built
 * @param cacheMisses   allocations the calling thread's cache could not serve
 * @param cachedBytes   bytes of free buffers held ready by the threads' caches and the size classes' stashes
 * @param exhausted     allocations refused because they would have exceeded {@code maxBytes}
 * @param givenBackChunks size-class chunks given back while the pool ran ({@link BufferPool#trim()}, the decay)
 * @param givenBackBytes  their bytes (their address ranges stay mapped, with no memory, for reuse)
 * @param classes       one entry per size class that has slabs now
 */
public record PoolStats(String pool, long reservedBytes, long inUseBytes, long liveBuffers, long chunks,
                        long largeBuffers, long allocations, long frees, long cacheMisses, long cachedBytes,
                        long exhausted, long givenBackChunks, long givenBackBytes, List<ClassStats> classes) {

    /** The snapshot {@link BufferPool#stats()} returns: counts from the caches, classes, chunks and large buffers. */
    static PoolStats collect(String name, SizeClass[] classState, ThreadCaches caches, Chunks chunks,
                             LargeBuffers large) {
        int n = classState.length;
        long[] allocs = new long[n];
        long[] cached = new long[n];
        long misses = caches.sumCounts(allocs, cached);
        long inUse = large.bytes();
        long live = large.liveCount();
        long totalAllocs = large.allocations();
        long totalFrees = large.frees();
        long cachedBytes = 0;
        List<ClassStats> perClass = new ArrayList<>();
        for (int cls = 0; cls < n; cls++) {
            long classLive = Math.min(allocs[cls], classState[cls].live(cached[cls]));
            live += classLive;
            inUse += classLive * classState[cls].size;
            totalAllocs += allocs[cls];
            totalFrees += allocs[cls] - classLive;
            cachedBytes += (cached[cls] + classState[cls].stash.size()) * classState[cls].size;
            if (classState[cls].slots > 0) {
                perClass.add(new ClassStats(classState[cls].size, classState[cls].slots, classLive, allocs[cls]));
            }
        }
        return new PoolStats(name, chunks.reserved(), inUse, live, chunks.snapshot().size(), large.liveCount(),
                totalAllocs, totalFrees, misses + large.allocations(), cachedBytes, chunks.exhausted.sum(),
                chunks.retained.chunks.get(), chunks.retained.bytes.get(), List.copyOf(perClass));
    }

    /** Fraction of allocations served by the calling thread's cache, in [0, 1]; 0 before any allocation. */
    public double cacheHitRate() {
        return allocations == 0 ? 0.0 : (double) (allocations - cacheMisses) / allocations;
    }

    /**
     * Accounting of one size class.
     *
     * @param size        the class's buffer capacity in bytes
     * @param slots       buffers its slabs hold now (live, cached or idle; a trim takes idle chunks' slots away)
     * @param live        its buffers allocated and not yet freed
     * @param allocations its allocations since the pool was built
     */
    public record ClassStats(long size, long slots, long live, long allocations) {
    }
}
