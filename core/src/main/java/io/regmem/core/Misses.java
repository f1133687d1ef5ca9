package io.regmem.core;

/**
 * A pool's allocation slow path: the calling thread's magazine is not in the table, or is empty,
 * or the thread has none. Refills from the class's stash, binds idle slots, carves new slabs.
 */
final class Misses {
    private final BufferPool pool;
    private final SizeClass[] classState;
    private final ThreadCaches caches;
    private final Chunks chunks;

    Misses(BufferPool pool, SizeClass[] classState, ThreadCaches caches, Chunks chunks) {
        this.pool = pool;
        this.classState = classState;
        this.caches = caches;
        this.chunks = chunks;
    }

    /**
     * The calling thread's magazine of the class is not in the table, or is empty, or the thread has
     * none (a virtual thread, caches off): the stash, idle slots, a new slab.
     */
    PooledBuffer allocate(int cls) {
        Magazine m = magazine(cls, "allocate");
        SizeClass sc = classState[cls];
        if (m == null) {
            PooledBuffer b = sc.stash.poll();
            if (b == null) {
                b = take(sc, null);
                caches.uncachedMisses.incrementAndGet();
            }
            caches.uncachedAllocations.incrementAndGet(cls);
            return b;
        }
        PooledBuffer b;
        if (m.top > 0) {
            b = m.pop(); // the magazine was there, only not in the table (first use, or a shared slot)
        } else {
            b = refill(m, sc); // may throw: then nothing is counted
            m.misses++;
        }
        m.allocations++;
        return b;
    }

    /**
     * The slow path's magazine of the calling thread (published in the table; null without a cache),
     * after which the pool must be open.
     */
    Magazine magazine(int cls, String op) {
        if (pool.isClosed()) {
            throw pool.closedException(op); // before making anything for a closed pool
        }
        Magazine m = caches.magazine(cls);
        if (pool.isClosed()) { // the close ran after the check above: it may have cleared the table before the publish
            if (m != null) {
                caches.withdraw(cls, m);
            }
            throw pool.closedException(op);
        }
        return m;
    }

    /** Takes a batch from the stash into the magazine and returns one buffer of it; else binds idle slots. */
    private PooledBuffer refill(Magazine m, SizeClass sc) {
        PooledBuffer first = sc.takeBatch(m);
        return first != null ? first : take(sc, m);
    }

    /**
     * The stash is empty: binds a batch of idle slots (one for the caller, the rest into its
     * magazine), carving a new slab when no slot is idle. Reclaims dead threads' caches first, since
     * they may hold free buffers (outside the class's lock: that takes other classes' locks).
     */
    private PooledBuffer take(SizeClass sc, Magazine m) {
        PooledBuffer b = takeLocked(sc, m, false);
        if (b == null && caches.reclaimDead() > 0) {
            b = sc.stash.poll();
        }
        return b != null ? b : takeLocked(sc, m, true);
    }

    private PooledBuffer takeLocked(SizeClass sc, Magazine m, boolean carve) {
        sc.lock.lock();
        try {
            PooledBuffer b = sc.stash.poll();
            if (b != null) {
                return b;
            }
            if (!sc.hasIdle()) {
                if (!carve) {
                    return null;
                }
                if (pool.isClosed()) {
                    throw pool.closedException("allocate");
                }
                sc.add(chunks.carveSlab(pool, sc, pool::inUseBytes));
            }
            return sc.bindBatch(m);
        } finally {
            sc.lock.unlock();
        }
    }
}
