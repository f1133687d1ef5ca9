package io.regmem.registration.internal;

/**
 * Searches over sorted {@code long} arrays, for the lock-free indexes that map addresses to
 * regions (the registration cache, a device's DMA mappings).
 *
 * <p>{@link #floor} is branch-free: each step halves the range with a conditional move instead of a
 * branch that mispredicts half the time, and the number of steps depends only on {@code n}. For a
 * 64-entry leaf that is six dependent loads and no mispredictions; the classic
 * {@code lo <= hi} loop costs about as many mispredicted branches as steps when the key is random.
 */
public final class SortedLongs {
    private SortedLongs() {
    }

    /**
     * The last index {@code i < n} with {@code keys[i] <= key}, or -1 if there is none.
     *
     * @param keys sorted ascending in {@code [0, n)} (duplicates allowed: the last of equal keys is found)
     * @param n    how many leading entries to search ({@code 0 <= n <= keys.length})
     */
    public static int floor(long[] keys, int n, long key) {
        if (n == 0) {
            return -1;
        }
        int base = 0;
        int len = n;
        while (len > 1) {
            int half = len >>> 1;
            // The invariant: keys[base] <= key, or base == 0; the answer lies in [base, base + len).
            base = keys[base + half] <= key ? base + half : base;
            len -= half;
        }
        return keys[base] <= key ? base : base - 1;
    }
}
