package io.regmem.core;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.locks.ReentrantLock;
import org.jctools.queues.MpmcArrayQueue;

/**
 * The shared state of one size class: the slabs carved for it, their idle slots, and a bounded
 * stash of free handles.
 *
 * <p>A free buffer is in one of three places. In a thread's {@link Magazine} (a bound handle, the
 * fast path). In the {@link #stash}: JCTools' bounded {@link MpmcArrayQueue} of bound handles, which
 * magazines fill and drain in batches of {@link #batch}, so buffers move between threads without locks and
 * without garbage while the working set fits. Or idle: a set bit in its slab and no object, where
 * a buffer goes when the stash is full ({@link #release}) and where {@link #bind} takes slots when the
 * stash is empty, making their handles anew. The heap a class holds is its magazines' and
 * stash's handles (bounded) plus a bit and a share of a {@link Slab} per idle slot, whatever the
 * pool's size.
 *
 * <p>{@link #lock} guards the slabs' bits, {@link #slabs} and {@link #partial}. A pool's trim
 * takes the locks of every class with a slab in a chunk (in index order) to take the chunk's slabs
 * out, once all their slots are idle.
 */
final class SizeClass {
    /** Bytes of buffers the stash holds without thread caches; with them, four caches' worth. */
    private static final long STASH_BYTES = 4L << 20;
    private static final int STASH_MAX = 8192;

    final int index;
    final long size;
    /** Bytes of chunk memory carved per slab: a multiple of {@link #size}. */
    final long slabBytes;
    /** Maximum buffers of this class in one thread's magazine. */
    final int cacheCapacity;
    /** Buffers moved between a magazine and the shared state at a time. */
    final int batch;
    /** Free bound handles shared between threads. */
    final MpmcArrayQueue<PooledBuffer> stash;
    final ReentrantLock lock = new ReentrantLock();
    /** Every slab carved for the class, in order. */
    final List<Slab> slabs = new ArrayList<>();
    /** Slabs with idle slots, lowest address first. */
    private final SlabHeap partial = new SlabHeap();
    volatile long slots;
    /** Slots idle (a bit, no handle); written under {@link #lock}, once per batch; read racily by stats. */
    volatile long idleSlots;
    /** Where {@link #bind} puts a batch (used under {@link #lock}). */
    private final PooledBuffer[] scratch;

    SizeClass(int index, long size, long slabSize, long threadCacheBytes) {
        this.index = index;
        this.size = size;
        // at most 2^23 slots per slab: a handle packs its slot's number into 24 bits
        this.slabBytes = Math.max(size, (Math.min(slabSize, size << 23) / size) * size);
        long fit = threadCacheBytes / size;
        this.cacheCapacity = (int) Math.max(2, Math.min(512, fit));
        this.batch = Math.max(1, cacheCapacity / 2);
        long stashBytes = threadCacheBytes > 0 ? 4 * threadCacheBytes : STASH_BYTES;
        int stashed = (int) Math.max(2L * cacheCapacity, Math.min(STASH_MAX, stashBytes / size));
        this.stash = new MpmcArrayQueue<>(stashed);
        this.scratch = new PooledBuffer[batch];
    }

    /**
     * Binds up to {@code n} idle slots to new handles into {@code out} from {@code from} on (the lock
     * held); returns how many.
     */
    private int bind(PooledBuffer[] out, int from, int n) {
        int got = 0;
        while (got < n) {
            Slab s = partial.peek();
            if (s == null) {
                break;
            }
            s.takes++;
            int slot;
            while (got < n && (slot = s.takeIdle()) >= 0) {
                out[from + got++] = new PooledBuffer(s, slot);
            }
            if (s.idle == 0) {
                partial.remove(s);
            }
        }
        idleSlots -= got; // one volatile write per batch
        return got;
    }

    /**
     * Binds a batch of idle slots (the lock held, some slot idle): one handle for the caller, the rest
     * into the magazine as far as it has room (none without a magazine).
     */
    PooledBuffer bindBatch(Magazine m) {
        int n = bind(scratch, 0, batchFor(m));
        for (int i = 1; i < n; i++) {
            m.push(scratch[i]); // room for them: batchFor counted it
        }
        PooledBuffer first = scratch[0];
        Arrays.fill(scratch, 0, n, null);
        return first;
    }

    /**
     * Moves up to a batch from the stash into an empty magazine and returns one buffer of it, or
     * null if the stash is empty. Any thread (the magazine's owner); lock-free.
     */
    PooledBuffer takeBatch(Magazine m) {
        PooledBuffer first = stash.poll();
        if (first == null) {
            return null;
        }
        for (int i = 1, n = batchFor(m); i < n; i++) {
            PooledBuffer b = stash.poll();
            if (b == null) {
                break;
            }
            m.push(b); // room for it: batchFor counted it
        }
        return first;
    }

    /** Buffers to move at once into {@code m}: one for the caller plus what the magazine has room for, at most a batch. */
    private int batchFor(Magazine m) {
        return m == null ? 1 : Math.min(batch, m.stack.length - m.top + 1);
    }

    /** The magazine is full: gives its oldest batch to the shared state and pushes {@code b} (the owner thread). */
    void flush(Magazine m, PooledBuffer b) {
        PooledBuffer[] stack = m.stack;
        int top = m.top;
        int n = Math.min(batch, top);
        release(stack, n);
        System.arraycopy(stack, n, stack, 0, top - n);
        Arrays.fill(stack, top - n, stack.length, null); // what moved on is not kept alive from here
        m.top = top - n;
        m.push(b);
    }

    /** True if a slab has idle slots (the lock held). */
    boolean hasIdle() {
        return !partial.isEmpty();
    }

    /** A new slab, all idle (the lock held). */
    void add(Slab s) {
        slabs.add(s);
        slots += s.slots;
        idleSlots += s.slots;
        partial.add(s);
    }

    /**
     * Takes out slabs whose slots are all idle, for their chunk to go back (the lock held): no
     * handle exists for any of their slots, so nothing can bind, free or reach them through the pool.
     */
    void unlink(List<Slab> gone) {
        long n = 0;
        for (Slab s : gone) {
            partial.remove(s);
            s.trimmed = true;
            n += s.slots;
        }
        slabs.removeIf(s -> s.trimmed);
        slots -= n;
        idleSlots -= n;
    }

    /**
     * Makes every handle in the stash idle (under the lock), so that their slots no longer keep
     * their chunks: a trim's, or the decay's for a class nobody allocated from for its idle time.
     * Bounded by the stash's size when it starts. Returns the handles dropped.
     */
    int drainStash() {
        lock.lock();
        try {
            int n = 0;
            for (int max = stash.size(); n < max; n++) {
                PooledBuffer b = stash.poll();
                if (b == null) {
                    break;
                }
                idle(b);
            }
            idleSlots += n;
            return n;
        } finally {
            lock.unlock();
        }
    }

    /**
     * Takes back free handles {@code buffers[0..n)}: into the stash while it has room, the rest made
     * idle (their handles dropped) under the lock. Any thread; never takes another class's lock.
     */
    void release(PooledBuffer[] buffers, int n) {
        int i = 0;
        while (i < n && stash.offer(buffers[i])) {
            i++;
        }
        if (i < n) {
            lock.lock();
            try {
                idleSlots += n - i; // one volatile write per batch
                for (; i < n; i++) {
                    idle(buffers[i]);
                }
            } finally {
                lock.unlock();
            }
        }
    }

    /** Takes back one free handle (as {@link #release}). */
    void release(PooledBuffer b) {
        if (!stash.offer(b)) {
            lock.lock();
            try {
                idleSlots++;
                idle(b);
            } finally {
                lock.unlock();
            }
        }
    }

    /**
     * Buffers of the class that are live, given how many the threads' magazines hold: every slot carved
     * that is neither idle, in the stash nor cached. Exact when no thread allocates or frees.
     */
    long live(long cached) {
        return Math.max(0, slots - idleSlots - stash.size() - cached);
    }

    private void idle(PooledBuffer b) {
        Slab s = b.slab;
        s.makeIdle(b.slot());
        if (s.heapIndex < 0) {
            partial.add(s);
        }
    }
}
