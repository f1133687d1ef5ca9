package io.regmem.core;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;

/**
 * Buffers above the largest size class: each has a dedicated chunk and its own shared arena, so
 * freeing it unmaps the memory and ends the scope of its views at once. Not pooled: each costs an
 * {@code mmap}, an {@code munmap} and a few objects, as Netty's huge allocations do.
 *
 * <p>Membership in {@link #live} decides who releases a buffer: whoever removes it (its free, or
 * the pool's close) releases it, exactly once.
 */
final class LargeBuffers {
    private final Chunks chunks;
    private final Set<PooledBuffer> live = ConcurrentHashMap.newKeySet();
    private final AtomicLong allocations = new AtomicLong();
    private final AtomicLong frees = new AtomicLong();
    private final AtomicLong bytes = new AtomicLong();

    LargeBuffers(Chunks chunks) {
        this.chunks = chunks;
    }

    /** Maps a dedicated chunk of {@code size} rounded up to the source's page size. */
    PooledBuffer allocate(BufferPool owner, long size, long pageSize, LongSupplier inUse) {
        long rounded = (size + pageSize - 1) & -pageSize;
        Chunk chunk = chunks.allocate(rounded, inUse);
        Arena arena = Arena.ofShared();
        MemorySegment segment = MemorySegment.ofAddress(chunk.address()).reinterpret(rounded, arena, null);
        chunk.segment(segment);
        try {
            chunks.adoptDedicated(chunk);
        } catch (RuntimeException e) {
            arena.close(); // the chunk itself was given back by adoptDedicated
            throw e;
        }
        PooledBuffer b = new PooledBuffer(new Slab(owner, chunk, arena), 0);
        live.add(b);
        allocations.incrementAndGet();
        bytes.addAndGet(rounded);
        return b;
    }

    /**
     * Frees a large buffer: always checked, since a second unmap could hit someone else's mapping.
     *
     * @throws RdmaException {@link Errno#EINVAL} on a double free; {@link Errno#EBUSY} while pinned
     */
    void free(PooledBuffer b, String pool) {
        int was = b.markFreeChecked();
        if (was != PooledBuffer.LIVE) {
            throw was == PooledBuffer.FREE ? new RdmaException(Errno.EINVAL, pool + ": double free of " + b)
                    : b.pinnedException(pool);
        }
        if (live.remove(b)) {
            frees.incrementAndGet();
            release(b);
        } // else close() took it concurrently and released it
    }

    /** Releases the buffer if it is still live here; true if this call released it. */
    boolean releaseIfLive(PooledBuffer b) {
        if (live.remove(b)) {
            release(b);
            return true;
        }
        return false;
    }

    /** Releases every large buffer still out (pool close). */
    void releaseAll() {
        for (PooledBuffer b : live) {
            releaseIfLive(b);
        }
    }

    private void release(PooledBuffer b) {
        bytes.addAndGet(-b.slab.chunk.size());
        chunks.release(b.slab.chunk, b.slab.largeArena);
    }

    /** The live large buffers (a weakly consistent view). */
    Iterable<PooledBuffer> live() {
        return live;
    }

    long liveCount() {
        return live.size();
    }

    long bytes() {
        return bytes.get();
    }

    long allocations() {
        return allocations.get();
    }

    long frees() {
        return frees.get();
    }
}
