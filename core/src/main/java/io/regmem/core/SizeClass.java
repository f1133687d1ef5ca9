package io.regmem.core;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.ReentrantLock;
import org.jctools.queues.MpmcUnboundedXaddArrayQueue;

/**
 * The shared state of one size class: its free list and the slabs carved for it.
 *
 * <p>The free list is JCTools' {@link MpmcUnboundedXaddArrayQueue}: a multi-producer,
 * multi-consumer queue indexed by sequence numbers taken with an atomic add, so it is ABA-safe
 * without tags, and it recycles its internal chunks, so it allocates nothing once it has grown to
 * the class's working set. Thread caches move buffers to and from it in batches of
 * {@link #batch}, which keeps its contention per buffer low.
 */
final class SizeClass {
    private static final int QUEUE_CHUNK = 256;
    private static final int POOLED_QUEUE_CHUNKS = 8;

    final int index;
    final long size;
    /** Bytes of chunk memory carved per slab: a multiple of {@link #size}. */
    final long slabBytes;
    /** Maximum buffers of this class in one thread cache. */
    final int cacheCapacity;
    /** Buffers moved between a thread cache and {@link #free} at a time. */
    final int batch;
    final MpmcUnboundedXaddArrayQueue<PooledBuffer> free =
            new MpmcUnboundedXaddArrayQueue<>(QUEUE_CHUNK, POOLED_QUEUE_CHUNKS);
    /** Serializes carving for this class; guards {@link #slabs}. */
    final ReentrantLock carveLock = new ReentrantLock();
    final List<PooledBuffer[]> slabs = new ArrayList<>();
    volatile long slots;

    SizeClass(int index, long size, long slabSize, long threadCacheBytes) {
        this.index = index;
        this.size = size;
        this.slabBytes = Math.max(size, (slabSize / size) * size);
        long fit = threadCacheBytes / size;
        this.cacheCapacity = (int) Math.max(2, Math.min(512, fit));
        this.batch = Math.max(1, cacheCapacity / 2);
    }
}
