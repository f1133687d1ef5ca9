package io.regmem.registration.uring;

import io.regmem.core.Chunk;
import io.regmem.core.RdmaException;

/**
 * A pool chunk's place in an {@link IoRing}'s fixed-buffer table: attached to the chunk
 * ({@link Chunk#ioAttachment()}), so that a buffer finds its buffer index with a field read. Its
 * mutable fields are used by the ring's owner thread only, except {@link #removed}.
 */
final class FixedSlot {
    final IoRing ring;
    final IoRegistration registration;
    final Chunk chunk;
    /**
     * The slot's index in the kernel's table: -1 until the owner registers the chunk (a chunk born on
     * another thread waits for the owner's next call), and again once the index was given back.
     */
    volatile int index = -1;
    /** The nonzero tag the kernel posts as a completion once it no longer uses the chunk. */
    final long tag;
    final long start;
    final long end;
    /**
     * True once the owner began registering the chunk (under this slot's monitor, with {@link #removed}):
     * a chunk that leaves before is dropped by the thread that frees it, never reaching the owner.
     */
    boolean claimed;
    /** True once the kernel's table holds the chunk (false while a registration from another thread waits). */
    boolean registered;
    /** Operations submitted or prepared on the chunk and not yet reaped. */
    int inFlight;
    /** True once the chunk left its pool or the registration ended: no new operation may use it. */
    volatile boolean removed;
    /** True once the slot was cleared in the kernel's table (its tag completion is then due). */
    boolean cleared;
    /** True once the tag completion arrived. */
    boolean tagSeen;
    /** Why a registration left for the owner failed, or null. */
    RdmaException failure;
    /** The pool's hold on the chunk's memory, let go once the kernel and every operation are done. */
    Runnable hold;

    FixedSlot(IoRing ring, IoRegistration registration, Chunk chunk, long tag) {
        this.ring = ring;
        this.registration = registration;
        this.chunk = chunk;
        this.tag = tag;
        this.start = chunk.address();
        this.end = chunk.address() + chunk.size();
    }

    /** Done with: cleared, its tag seen (or never registered) and no operation left: the memory may go. */
    boolean quiet() {
        return inFlight == 0 && (!registered || tagSeen);
    }

    /**
     * The index may be reused: cleared in the kernel's table (or never registered) and no operation
     * of ours left that names it. The kernel keeps the old buffer pinned by reference until its own
     * last use and then posts the tag, which only the memory waits for.
     */
    boolean indexIdle() {
        return inFlight == 0 && (!registered || cleared);
    }

    @Override
    public String toString() {
        return "fixed buffer " + index + " (" + chunk + ")";
    }
}
