package io.regmem.bench;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * A completion queue as an RDMA device lays one out, for benchmarks that need a send-completion
 * handler without a device: a ring of 64-byte entries (CQEs), each carrying the work-request id by
 * value and an owner (phase) bit that flips on every lap, so the poller sees a new entry by reading
 * that entry alone, with no shared index (as mlx5 polls its CQ). One writer (standing in for the
 * device) and one poller. Entries are never overwritten before they are polled as long as no more
 * than {@code capacity} completions are outstanding, which a send queue guarantees (its completions
 * are at most its depth); the benchmarks keep fewer in flight than that.
 */
final class StandInCq {
    private static final VarHandle ENTRY = MethodHandles.arrayElementVarHandle(long[].class);
    /** Longs per entry: 64 bytes, one cache line, as a CQE. */
    private static final int STRIDE = 8;

    private final long[] entries;
    private final int mask;
    private final int lapShift;
    /** The writer's count at [WRITTEN] and the poller's at [POLLED], 128 bytes apart: no false sharing. */
    private final long[] counts = new long[48];
    private static final int WRITTEN = 16;
    private static final int POLLED = 32;

    /** @param capacity entries, a power of two */
    StandInCq(int capacity) {
        if (Integer.bitCount(capacity) != 1) {
            throw new IllegalArgumentException("StandInCq: capacity " + capacity + " must be a power of two");
        }
        this.entries = new long[(capacity + 2) * STRIDE]; // a line of padding at each end
        this.mask = capacity - 1;
        this.lapShift = Integer.numberOfTrailingZeros(capacity);
        for (int i = 0; i < capacity; i++) {
            entries[index(i)] = 1; // phase 1: not written in lap 0
        }
    }

    private int index(long n) {
        return (int) ((n & mask) + 1) * STRIDE;
    }

    /** Writes the completion of {@code wrId} (a non-negative id below 2^62). */
    void complete(long wrId) {
        long n = counts[WRITTEN]++;
        ENTRY.setRelease(entries, index(n), (wrId << 1) | ((n >>> lapShift) & 1));
    }

    /** The next completion's work-request id, or -1 if none has been written. */
    long poll() {
        long n = counts[POLLED];
        long v = (long) ENTRY.getAcquire(entries, index(n));
        if ((v & 1) != ((n >>> lapShift) & 1)) {
            return -1;
        }
        counts[POLLED] = n + 1;
        return v >>> 1;
    }
}
