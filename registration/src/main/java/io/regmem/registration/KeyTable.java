package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.spi.ProviderQp;
import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * A device's memory keys. A key is 32 bits:
 * <pre>
 *   31                                  8 7        0
 *  +-------------------------------------+----------+
 *  |  slot index XOR device salt (24)    | key byte |
 *  +-------------------------------------+----------+
 * </pre>
 * The upper 24 bits name a slot of this table through a random per-device permutation of the 24-bit
 * space (XOR with a random word, multiply by a random odd number, xor-shift, multiply again: every
 * step is invertible mod 2^24), so neither a key's value nor the difference between two keys tells
 * a peer which slots exist or in which order they were made. The low byte is a generation: for an ordinary region the
 * slot's own counter, bumped every time the slot is reused; for a fast-reg MR the consumer's byte
 * ({@link MemoryRegion#updateFastRegKey}). A key resolves only while it equals the key its region
 * holds now, so a deregistered region's key, or a fast-reg key from before a bump, fails at once.
 *
 * <p>Freed slots are reused first-in first-out, so a key value comes back only after every other
 * free slot was used, and, for the same slot, after 256 reuses. Lookups are lock-free (an
 * {@link AtomicReferenceArray} per 4096 slots); adding and removing take the table's lock.
 */
final class KeyTable {
    private static final int PAGE_SHIFT = 12;
    private static final int PAGE = 1 << PAGE_SHIFT;
    private static final int MAX_SLOTS = 1 << 24;
    /** Slot 0 is reserved for the device's local DMA key. */
    static final int DMA_SLOT = 0;

    private static final int MASK = (1 << 24) - 1;
    private final int salt = ThreadLocalRandom.current().nextInt(1 << 24);
    private final int mul1 = ThreadLocalRandom.current().nextInt(1 << 24) | 1;
    private final int mul2 = ThreadLocalRandom.current().nextInt(1 << 24) | 1;
    private final int inv1 = inverse(mul1);
    private final int inv2 = inverse(mul2);
    private volatile AtomicReferenceArray<MemoryRegion>[] pages;
    private final byte[][] generations = new byte[MAX_SLOTS >> PAGE_SHIFT][];
    private final ArrayDeque<Integer> freeSlots = new ArrayDeque<>();
    private int nextFresh = 1;

    @SuppressWarnings({"unchecked", "rawtypes"})
    KeyTable() {
        pages = new AtomicReferenceArray[] {new AtomicReferenceArray<MemoryRegion>(PAGE)};
        generations[0] = new byte[PAGE];
    }

    /**
     * Moves {@link #nextFresh} past slots whose keys would carry
     * {@link io.regmem.registration.spi.ProviderQp#HANDLE_TAG_BYTE} as their top byte (one slot in 256:
     * those values are a provider's imported-key handles); returns it.
     */
    private int skipReserved() {
        while (nextFresh < MAX_SLOTS && (permute(nextFresh) >>> 16) == ProviderQp.HANDLE_TAG_BYTE) {
            nextFresh++;
        }
        return nextFresh;
    }

    /** The key for a slot and key byte. */
    int key(int slot, int keyByte) {
        return (permute(slot) << 8) | (keyByte & 0xFF);
    }

    int slotOf(int key) {
        return unpermute(key >>> 8);
    }

    private int permute(int x) {
        x = ((x ^ salt) * mul1) & MASK;
        x ^= x >>> 12;
        return (x * mul2) & MASK;
    }

    private int unpermute(int x) {
        x = (x * inv2) & MASK;
        x ^= x >>> 12; // x ^= x >>> 12 is its own inverse on 24 bits
        return ((x * inv1) & MASK) ^ salt;
    }

    /** The inverse of an odd number mod 2^24 (Newton's iteration doubles the correct bits each step). */
    private static int inverse(int odd) {
        int inv = odd;
        for (int i = 0; i < 5; i++) {
            inv *= 2 - odd * inv;
        }
        return inv & MASK;
    }

    /** The device-global local DMA key. */
    int dmaKey() {
        return key(DMA_SLOT, 0);
    }

    /**
     * Takes a slot for a region and returns it; the region's key byte for it is
     * {@link #generation(int)}.
     *
     * @throws RdmaException {@link Errno#ENOMEM} when all 2^24 - 1 slots are in use
     */
    synchronized int allocate() {
        int slot;
        if (!freeSlots.isEmpty() && (nextFresh >= MAX_SLOTS || freeSlots.size() > 64)) {
            // Reuse only once a few slots are free, so a just-freed key is not handed out again at once.
            slot = freeSlots.pollFirst();
        } else if (skipReserved() < MAX_SLOTS) {
            slot = nextFresh++;
            ensurePage(slot);
        } else {
            throw new RdmaException(Errno.ENOMEM, "KeyTable: all " + (MAX_SLOTS - 1) + " memory keys are in use");
        }
        generations[slot >> PAGE_SHIFT][slot & (PAGE - 1)]++;
        return slot;
    }

    @SuppressWarnings("unchecked")
    private void ensurePage(int slot) {
        int p = slot >> PAGE_SHIFT;
        if (p >= pages.length) {
            AtomicReferenceArray<MemoryRegion>[] grown = Arrays.copyOf(pages, p + 1);
            grown[p] = new AtomicReferenceArray<>(PAGE);
            generations[p] = new byte[PAGE];
            pages = grown;
        }
    }

    /** The slot's current generation byte. */
    synchronized int generation(int slot) {
        return generations[slot >> PAGE_SHIFT][slot & (PAGE - 1)] & 0xFF;
    }

    /** Makes a region resolvable through its slot. */
    void publish(int slot, MemoryRegion region) {
        pages[slot >> PAGE_SHIFT].set(slot & (PAGE - 1), region);
    }

    /** Removes a region: its keys stop resolving before this returns; the slot is reusable. */
    synchronized void release(int slot, MemoryRegion region) {
        pages[slot >> PAGE_SHIFT].compareAndSet(slot & (PAGE - 1), region, null);
        freeSlots.addLast(slot);
    }

    /** The region in the slot a key names, whatever its current key, or null. Lock-free. */
    private MemoryRegion inSlot(int key) {
        int slot = slotOf(key);
        AtomicReferenceArray<MemoryRegion>[] p = pages;
        int page = slot >> PAGE_SHIFT;
        return page >= p.length ? null : p[page].get(slot & (PAGE - 1));
    }

    /** The live region whose current key is {@code key}, valid or not (LOCAL_INV, SEND_WITH_INV), or null. */
    MemoryRegion current(int key) {
        MemoryRegion r = inSlot(key);
        return r == null || r.lkey() != key || r.isDestroyed() ? null : r;
    }

    /**
     * The region a key names now, or null if the key is unknown, stale or retired.
     *
     * @param key    an lkey or rkey
     * @param remote true to match the region's rkey, false its lkey
     */
    MemoryRegion lookup(int key, boolean remote) {
        MemoryRegion r = inSlot(key);
        if (r == null || (remote ? r.rkey() : r.lkey()) != key || !r.isValid()) {
            return null;
        }
        return r;
    }
}
