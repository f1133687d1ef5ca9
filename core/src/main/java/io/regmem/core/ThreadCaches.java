package io.regmem.core;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A pool's per-thread caches: the thread-local lookup, the registry of every cache (for stats and
 * for reclaiming the caches of dead threads) and the counters of allocations that used no cache
 * (virtual threads, caches disabled) or whose cache's thread died.
 */
final class ThreadCaches {
    private final SizeClass[] classes;
    private final ThreadLocal<ThreadCache> local;
    private final List<ThreadCache> registry = new ArrayList<>();
    private final ReentrantLock lock = new ReentrantLock();
    final AtomicLongArray uncachedAllocations;
    final AtomicLongArray uncachedFrees;
    final AtomicLong uncachedMisses = new AtomicLong();

    ThreadCaches(SizeClass[] classes) {
        this.classes = classes;
        this.local = ThreadLocal.withInitial(this::register);
        this.uncachedAllocations = new AtomicLongArray(classes.length);
        this.uncachedFrees = new AtomicLongArray(classes.length);
    }

    /**
     * The caches by thread id, direct-mapped: the fast lookup. An entry is written only by the thread
     * whose cache it is, and read by any thread that maps to the same slot, which uses it only if the
     * cache's (final) thread id is its own; a thread that finds another's cache there takes its own
     * from the thread-local (and claims the slot), so two threads sharing a slot stay correct, only slower.
     */
    private final ThreadCache[] byId = new ThreadCache[FAST_SLOTS];
    private static final int FAST_SLOTS = 256;

    /** The calling thread's cache, made and registered on first use. */
    ThreadCache get() {
        long id = Thread.currentThread().threadId();
        int slot = (int) id & (FAST_SLOTS - 1);
        ThreadCache tc = byId[slot];
        if (tc != null && tc.threadId == id) {
            return tc;
        }
        tc = local.get();
        byId[slot] = tc;
        return tc;
    }

    /** Forgets the calling thread's cache (pool close). */
    void removeCurrent() {
        local.remove();
        Arrays.fill(byId, null);
    }

    private ThreadCache register() {
        ThreadCache tc = new ThreadCache(Thread.currentThread(), classes.length);
        lock.lock();
        try {
            registry.add(tc);
        } finally {
            lock.unlock();
        }
        return tc;
    }

    /** Moves every buffer of one stack to its class's shared state. Owner thread, or a dead owner. */
    void drain(ThreadCache tc, int cls) {
        PooledBuffer[] stack = tc.stacks[cls];
        int top = tc.tops[cls];
        classes[cls].release(stack, top);
        Arrays.fill(stack, 0, top, null);
        tc.tops[cls] = 0;
    }

    /** Moves the cached buffers and counters of dead threads to the shared state; returns buffers moved. */
    long reclaimDead() {
        List<ThreadCache> dead = new ArrayList<>();
        lock.lock();
        try {
            for (int i = registry.size() - 1; i >= 0; i--) {
                ThreadCache tc = registry.get(i);
                if (!tc.ownerDead()) {
                    continue;
                }
                for (int cls = 0; cls < classes.length; cls++) {
                    uncachedAllocations.addAndGet(cls, tc.allocations[cls]);
                    uncachedFrees.addAndGet(cls, tc.frees[cls]);
                }
                uncachedMisses.addAndGet(tc.misses);
                registry.remove(i);
                dead.add(tc);
                int slot = (int) tc.threadId & (FAST_SLOTS - 1);
                if (byId[slot] == tc) {
                    byId[slot] = null; // a racing claim by a live thread only falls back to its thread-local
                }
            }
        } finally {
            lock.unlock();
        }
        long moved = 0;
        for (ThreadCache tc : dead) { // outside the registry's lock: releasing takes the classes' locks
            moved += tc.cached();
            for (int cls = 0; cls < classes.length; cls++) {
                drain(tc, cls);
            }
        }
        return moved;
    }

    /** Every registered cache (a snapshot), for the pool's close. */
    List<ThreadCache> all() {
        lock.lock();
        try {
            return new ArrayList<>(registry);
        } finally {
            lock.unlock();
        }
    }

    /**
     * Adds every cache's counters (read racily) and the uncached ones into the arrays.
     *
     * @return the total of cache misses
     */
    long sumCounts(long[] allocations, long[] frees) {
        long misses = uncachedMisses.get();
        for (int cls = 0; cls < classes.length; cls++) {
            allocations[cls] = uncachedAllocations.get(cls);
            frees[cls] = uncachedFrees.get(cls);
        }
        lock.lock();
        try {
            for (ThreadCache tc : registry) {
                for (int cls = 0; cls < classes.length; cls++) {
                    allocations[cls] += tc.allocations[cls];
                    frees[cls] += tc.frees[cls];
                }
                misses += tc.misses;
            }
        } finally {
            lock.unlock();
        }
        return misses;
    }
}
