package io.regmem.core;

import java.lang.ref.WeakReference;
import java.util.Arrays;

/**
 * One thread's cache of free buffers for one pool: a bounded LIFO stack per size class, touched
 * only by its owner thread, so the common allocate/free pair reads and writes no shared cache line.
 *
 * <p>Counters are plain longs written only by the owner; {@link BufferPool#stats()} reads them
 * racily (exact when the pool is quiescent). A stack starts empty (length 0) and gets its array on
 * the first slow path that needs it, so a thread that uses two size classes pays for two stacks.
 */
final class ThreadCache {
    private static final PooledBuffer[] EMPTY = new PooledBuffer[0];

    final WeakReference<Thread> owner;
    /** The owner's id (never reused in a JVM): what the fast lookup compares. */
    final long threadId;
    final PooledBuffer[][] stacks;
    final int[] tops;
    final long[] allocations;
    final long[] frees;
    /** Allocations that found the cache empty and went to the shared free list or carved a slab. */
    long misses;

    ThreadCache(Thread owner, int classes) {
        this.owner = new WeakReference<>(owner);
        this.threadId = owner.threadId();
        this.stacks = new PooledBuffer[classes][];
        Arrays.fill(stacks, EMPTY);
        this.tops = new int[classes];
        this.allocations = new long[classes];
        this.frees = new long[classes];
    }

    /** The most recently cached buffer of a class, or null when the stack is empty. */
    PooledBuffer pop(int cls) {
        int top = tops[cls];
        if (top == 0) {
            return null;
        }
        tops[cls] = --top;
        return stacks[cls][top];
    }

    /** Caches a buffer; false when the stack is full (or has no array yet). */
    boolean push(int cls, PooledBuffer buffer) {
        PooledBuffer[] stack = stacks[cls];
        int top = tops[cls];
        if (top == stack.length) {
            return false;
        }
        stack[top] = buffer;
        tops[cls] = top + 1;
        return true;
    }

    /** Gives the class its stack array if it has none yet. */
    void ensureStack(int cls, int capacity) {
        if (stacks[cls].length == 0) {
            stacks[cls] = new PooledBuffer[capacity];
        }
    }

    boolean ownerDead() {
        Thread t = owner.get();
        return t == null || !t.isAlive();
    }

    long cached() {
        long n = 0;
        for (int top : tops) {
            n += top;
        }
        return n;
    }
}
