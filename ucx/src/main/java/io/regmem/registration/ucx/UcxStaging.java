package io.regmem.registration.ucx;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A QP's bounce buffers for rendezvous transfers: the only memory UCX reads or writes after the call
 * that handed it over returned. A rendezvous WRITE's bytes are copied into one before they go, and
 * arrive in one before they are copied into the checked range; a READ's answer arrives in one. So a
 * peer (which pulls or pushes a rendezvous's bytes on its own schedule, by CMA or over a socket) never
 * holds an application's memory: a deregistration waits only for this side's own copies, and a
 * request a stopped peer never finishes can be left to UCX without anything of the application's
 * being written or read later.
 *
 * <p>Buffers come in power-of-two sizes and are reused (a steady stream of transfers allocates
 * nothing); the pool keeps as many of a size as were ever in use at once, and its memory lives in the
 * QP's arena, freed with it (or, when UCX still holds one of them, when the device closes).
 */
final class UcxStaging {
    private final Arena arena;
    private final ReentrantLock lock = new ReentrantLock();
    /** Free buffers of size 2^c, c = 0..62. */
    private final MemorySegment[][] free = new MemorySegment[63][];
    private final int[] count = new int[63];

    UcxStaging(Arena arena) {
        this.arena = arena;
    }

    /** A buffer of at least {@code length} bytes (length &gt; 0), its contents undefined. */
    MemorySegment take(long length) {
        int c = 64 - Long.numberOfLeadingZeros(Math.max(4096, length) - 1);
        lock.lock();
        try {
            int k = count[c];
            if (k > 0) {
                MemorySegment s = free[c][--k];
                free[c][k] = null;
                count[c] = k;
                return s;
            }
        } finally {
            lock.unlock();
        }
        return arena.allocate(1L << c, 64); // (a shared arena's allocation is thread-safe)
    }

    /** Gives back a buffer {@link #take} returned, once UCX is done with it. */
    void give(MemorySegment s) {
        int c = 63 - Long.numberOfLeadingZeros(s.byteSize());
        lock.lock();
        try {
            MemorySegment[] f = free[c];
            int k = count[c];
            if (f == null) {
                f = free[c] = new MemorySegment[8];
            } else if (k == f.length) {
                f = free[c] = Arrays.copyOf(f, k * 2);
            }
            f[k] = s;
            count[c] = k + 1;
        } finally {
            lock.unlock();
        }
    }

    /** Bytes held free (for tests). */
    long freeBytes() {
        lock.lock();
        try {
            long b = 0;
            for (int c = 0; c < count.length; c++) {
                b += (long) count[c] << c;
            }
            return b;
        } finally {
            lock.unlock();
        }
    }
}
