package io.regmem.core;

import java.lang.ref.WeakReference;

/**
 * One platform thread's cache of free buffers for one pool: its {@link Magazine}s, one per size
 * class it has used, made on first use (a thread that uses two classes pays for two stacks). The
 * allocator's fast path reaches a magazine through the pool's table, not through this object; this
 * is the registry's view of a thread, for statistics, leak reports and reclaiming a dead thread's
 * buffers.
 */
final class ThreadCache {
    final WeakReference<Thread> owner;
    /** The owner's id (never reused in a JVM). */
    final long threadId;
    /** Per class, the owner's magazine, or null before its first use of the class. */
    final Magazine[] magazines;

    ThreadCache(Thread owner, int classes) {
        this.owner = new WeakReference<>(owner);
        this.threadId = owner.threadId();
        this.magazines = new Magazine[classes];
    }

    /** The owner's magazine of a class, made now if it has none (the owner thread only). */
    Magazine magazine(int cls, int capacity) {
        Magazine m = magazines[cls];
        if (m == null) {
            m = new Magazine(threadId, capacity);
            magazines[cls] = m;
        }
        return m;
    }

    boolean ownerDead() {
        Thread t = owner.get();
        return t == null || !t.isAlive();
    }

    /** Buffers held by every magazine (read racily). */
    long cached() {
        long n = 0;
        for (Magazine m : magazines) {
            if (m != null) {
                n += m.top;
            }
        }
        return n;
    }
}
