package io.regmem.registration.cache;

import java.util.Arrays;

/**
 * The registration cache's hints: a direct-mapped table from the asked address's 4 KiB page to the
 * region a search last found for it. Read and written without synchronization: a hint is only a
 * guess, which the cache checks exactly as a searched region (a region's bounds and rights are
 * final fields, safe to read through a racy reference). A table made with no slots (hints off)
 * answers nothing and remembers nothing.
 */
final class HintTable {
    private static final int PAGE_SHIFT = 12;
    private final CacheEntry[] slots;
    private final int mask;

    /**
     * @param maxRegions the cache's region limit: 2-4 slots per region, 32 to 65,536 in all
     * @param on         false for a table that is always empty
     */
    HintTable(int maxRegions, boolean on) {
        int n = on ? Integer.highestOneBit(Math.min(1 << 15, Math.max(16, maxRegions)) - 1) << 2 : 0;
        this.slots = new CacheEntry[n];
        this.mask = n - 1;
    }

    /** The slot for the page of {@code address} (meaningless when the table is off). */
    int slot(long address) {
        return (int) (address >>> PAGE_SHIFT) & mask;
    }

    /** The hint in {@code slot}, or null. */
    CacheEntry get(int slot) {
        return slots.length == 0 ? null : slots[slot];
    }

    /** Remembers {@code r} in {@code slot}, writing only when it changes (spares the line on other cores). */
    void remember(int slot, CacheEntry r) {
        if (slots.length != 0 && slots[slot] != r) {
            slots[slot] = r;
        }
    }

    /** Clears the slots of {@code e}'s pages that name it (it leaves the index). */
    void forget(CacheEntry e) {
        long pages = Math.min(slots.length, ((e.end - 1) >>> PAGE_SHIFT) - (e.start >>> PAGE_SHIFT) + 1);
        for (long p = 0; p < pages; p++) {
            int s = (int) ((e.start >>> PAGE_SHIFT) + p) & mask;
            if (slots[s] == e) {
                slots[s] = null;
            }
        }
    }

    /** Forgets everything (cache close: also drops hints written racily after their region left). */
    void clear() {
        Arrays.fill(slots, null);
    }
}
