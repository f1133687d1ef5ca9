package io.regmem.core;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * A run of equal slots carved from one chunk for one size class (or, for a buffer above the largest
 * class, its dedicated chunk as a slab of one slot). A slot is either <em>idle</em>, a set bit in
 * {@link #idleBits} and no object at all, or <em>bound</em> to a {@link PooledBuffer} handle (live,
 * or free in a thread cache or the class's stash). Idle slots cost one bit and a share of this
 * object: that is what keeps a large pool's heap small.
 *
 * <p>{@link #idleBits}, {@link #idle}, {@link #heapIndex} and {@link #takes} are guarded by the
 * size class's lock; the rest is final.
 */
final class Slab {
    final BufferPool pool;
    final Chunk chunk;
    /** The size class's index, or {@link PooledBuffer#LARGE_CLASS} for a dedicated chunk. */
    final int sizeClass;
    /** The address of slot 0. */
    final long base;
    final long slotSize;
    final int slots;
    /** A dedicated chunk's arena (its segment's scope), else null. */
    final Arena largeArena;
    final long[] idleBits;
    int idle;
    /** The first word of {@link #idleBits} that may have a bit set. */
    int hint;
    /** Its place in its class's {@link SlabHeap} of slabs with idle slots, or -1 when not there. */
    int heapIndex = -1;
    /**
     * Times slots were bound here (once per batch that took from this slab): the decay tells from it
     * that a chunk whose slots are all idle now was not handed out meanwhile. Read racily by it.
     */
    int takes;
    /** True once its chunk was trimmed: it is out of its class for good. */
    boolean trimmed;

    /** A size class's slab of {@code slots} slots, all idle. */
    Slab(BufferPool pool, Chunk chunk, int sizeClass, long offset, long slotSize, int slots) {
        this.pool = pool;
        this.chunk = chunk;
        this.sizeClass = sizeClass;
        this.base = chunk.address() + offset;
        this.slotSize = slotSize;
        this.slots = slots;
        this.largeArena = null;
        this.idleBits = new long[(slots + 63) >>> 6];
        for (int i = 0; i < slots; i++) {
            idleBits[i >>> 6] |= 1L << i;
        }
        this.idle = slots;
    }

    /** A dedicated chunk (its segment set): one slot, bound at once. */
    Slab(BufferPool pool, Chunk chunk, Arena largeArena) {
        this.pool = pool;
        this.chunk = chunk;
        this.sizeClass = PooledBuffer.LARGE_CLASS;
        this.base = chunk.address();
        this.slotSize = chunk.segment().byteSize();
        this.slots = 1;
        this.largeArena = largeArena;
        this.idleBits = null;
    }

    long address(int slot) {
        return base + (long) slot * slotSize;
    }

    /** Slot {@code slot}'s memory as a segment in the slab's scope (allocates the segment object). */
    MemorySegment slice(int slot) {
        MemorySegment memory = chunk.segment(); // the chunk's segment in the pool's scope, or the dedicated one
        return largeArena != null ? memory : memory.asSlice(base - chunk.address() + (long) slot * slotSize, slotSize);
    }

    /** Takes the lowest idle slot (the class lock held), or -1 if none is idle. */
    int takeIdle() {
        for (int w = hint; w < idleBits.length; w++) {
            long bits = idleBits[w];
            if (bits != 0) {
                int bit = Long.numberOfTrailingZeros(bits);
                idleBits[w] = bits & (bits - 1);
                idle--;
                hint = w;
                return (w << 6) + bit;
            }
        }
        hint = idleBits.length;
        return -1;
    }

    /** Makes {@code slot} idle again (the class lock held; its handle is dropped). */
    void makeIdle(int slot) {
        int w = slot >>> 6;
        idleBits[w] |= 1L << slot;
        idle++;
        if (w < hint) {
            hint = w;
        }
    }

    boolean isIdle(int slot) {
        return (idleBits[slot >>> 6] & (1L << slot)) != 0;
    }
}
