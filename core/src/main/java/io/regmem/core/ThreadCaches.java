package io.regmem.core;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A pool's per-thread caches: the table the fast path reads, the thread-local behind it, the
 * registry of every cache (for stats, leak reports and reclaiming the caches of dead threads) and
 * the counters of allocations that used no cache (virtual threads, caches off) or whose thread died.
 *
 * <h2>The table</h2>
 * <pre>
 *   fast[(cls &lt;&lt; 8) | (threadId &amp; 255)] ──▶ Magazine { threadId, stack[], top, counters }
 * </pre>
 * One entry per size class and thread-id slot, direct-mapped: the allocator computes the index from
 * the class and the calling thread's id, loads the entry and uses it if its (final) thread id is the
 * caller's. Only platform threads' magazines are ever published, so a hit needs no other test. An
 * entry is written by the thread whose magazine it is (when it publishes one, see
 * {@link #magazine(int)}), by the pool's close (which clears them all) and by the reclaim of a dead
 * thread; any thread reads it. Two live threads whose ids share a slot take turns: each finds the
 * other's magazine, goes to its thread-local and publishes its own, correct and only slower.
 * Cost: 4 bytes per class and slot, 256 slots (about 53 KB of heap for the default 52 classes).
 *
 * <h2>Close</h2>
 * The table is what keeps a closed pool closed without a read of its {@code closed} flag on the
 * fast path: the close sets the flag (volatile), then clears every entry with a volatile store; a
 * thread publishes an entry with a volatile store and then reads the flag. In the one order of
 * these volatile accesses, either the publisher sees the flag (and withdraws its entry) or the
 * close's clear comes after the publish. So an allocate or free that happens after the close finds
 * no entry, takes the slow path and is refused there.
 */
final class ThreadCaches {
    static final int SLOT_BITS = 8;
    /** Thread-id slots per class in {@link #fast}. */
    static final int SLOTS = 1 << SLOT_BITS;

    private static final VarHandle ENTRY = MethodHandles.arrayElementVarHandle(Magazine[].class);

    private final SizeClass[] classes;
    /** False when the pool was built with {@code threadCacheBytes} 0: every thread uses the stash. */
    private final boolean enabled;
    private final ThreadLocal<ThreadCache> local;
    private final List<ThreadCache> registry = new ArrayList<>();
    private final ReentrantLock lock = new ReentrantLock();
    /** The magazines by class and thread-id slot: see the class comment. */
    final Magazine[] fast;
    final AtomicLongArray uncachedAllocations;
    final AtomicLong uncachedMisses = new AtomicLong();

    ThreadCaches(SizeClass[] classes, boolean enabled) {
        this.classes = classes;
        this.enabled = enabled;
        this.local = ThreadLocal.withInitial(this::register);
        this.fast = new Magazine[classes.length << SLOT_BITS];
        this.uncachedAllocations = new AtomicLongArray(classes.length);
    }

    /** The index of a class's entry for a thread id in {@link #fast}. */
    static int index(int cls, long threadId) {
        return cls << SLOT_BITS | (int) threadId & (SLOTS - 1);
    }

    /**
     * The slow path's lookup: the calling thread's magazine of a class, made (and the thread's cache
     * registered) on first use, and published in {@link #fast} with a volatile store; null for a
     * virtual thread (they come and go in numbers: they use the stash) or when caches are off. The
     * caller reads the pool's {@code closed} flag after this, and {@link #withdraw}s the entry if it
     * is set.
     */
    Magazine magazine(int cls) {
        ThreadCache tc = current();
        if (tc == null) {
            return null;
        }
        Magazine m = tc.magazine(cls, classes[cls].cacheCapacity);
        int i = index(cls, tc.threadId);
        if (fast[i] != m) {
            ENTRY.setVolatile(fast, i, m);
        }
        return m;
    }

    /** Removes a magazine's entry again (the pool turned out to be closed). */
    void withdraw(int cls, Magazine m) {
        ENTRY.compareAndSet(fast, index(cls, m.threadId), m, null);
    }

    /** The calling thread's cache, made and registered on first use; null for a virtual thread or when caches are off. */
    ThreadCache current() {
        if (!enabled || Thread.currentThread().isVirtual()) {
            return null;
        }
        return local.get();
    }

    /** Clears every entry of the table, each with a volatile store (the pool's close, after it set its flag: see the class comment). */
    void clearTable() {
        for (int i = 0; i < fast.length; i++) {
            ENTRY.setVolatile(fast, i, null);
        }
    }

    /** Forgets the calling thread's cache (a closed pool's). */
    void removeCurrent() {
        local.remove();
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

    /** Drains every magazine of the calling thread's cache ({@link BufferPool#releaseThreadCache()}). */
    void releaseCurrent() {
        ThreadCache tc = current();
        if (tc == null) {
            return;
        }
        for (int cls = 0; cls < classes.length; cls++) {
            Magazine m = tc.magazines[cls];
            if (m != null) {
                drain(m, cls);
            }
        }
    }

    /** Moves every buffer of a magazine to its class's shared state. Owner thread, or a dead owner. */
    void drain(Magazine m, int cls) {
        classes[cls].release(m.stack, m.top);
        Arrays.fill(m.stack, null);
        m.top = 0;
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
                    Magazine m = tc.magazines[cls];
                    if (m != null) {
                        uncachedAllocations.addAndGet(cls, m.allocations);
                        uncachedMisses.addAndGet(m.misses);
                        // a live thread's entry in the same slot is left alone: only this magazine's is cleared
                        ENTRY.compareAndSet(fast, index(cls, tc.threadId), m, null);
                    }
                }
                registry.remove(i);
                dead.add(tc);
            }
        } finally {
            lock.unlock();
        }
        long moved = 0;
        for (ThreadCache tc : dead) { // outside the registry's lock: releasing takes the classes' locks
            moved += tc.cached();
            for (int cls = 0; cls < classes.length; cls++) {
                Magazine m = tc.magazines[cls];
                if (m != null) {
                    drain(m, cls);
                }
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
     * Adds every cache's allocation counters and the uncached ones into {@code allocations}, and the
     * buffers each class has in caches into {@code cached} (all read racily).
     *
     * @return the total of cache misses
     */
    long sumCounts(long[] allocations, long[] cached) {
        long misses = uncachedMisses.get();
        for (int cls = 0; cls < classes.length; cls++) {
            allocations[cls] = uncachedAllocations.get(cls);
            cached[cls] = 0;
        }
        lock.lock();
        try {
            for (ThreadCache tc : registry) {
                for (int cls = 0; cls < classes.length; cls++) {
                    Magazine m = tc.magazines[cls];
                    if (m != null) {
                        allocations[cls] += m.allocations;
                        cached[cls] += m.top;
                        misses += m.misses;
                    }
                }
            }
        } finally {
            lock.unlock();
        }
        return misses;
    }
}
