package io.regmem.registration.uring;

import io.regmem.core.PooledBuffer;

/**
 * A ring's operation table: an id per operation prepared or in flight (the id is the SQE's user
 * data, so a completion finds its operation by index), with the caller's user data, the fixed slot
 * its buffer's chunk is registered in, and the buffer it pinned until the kernel is done with it.
 * Free ids are a stack. Owner thread only, like the ring.
 */
final class Operations {
    private final long[] userData;
    private final FixedSlot[] slot;
    /** The buffer each operation pinned (from prepare to completion), or null. */
    private final PooledBuffer[] buffer;
    /** Whether each id is prepared or in flight. */
    private final boolean[] busy;
    private final int[] free;
    private int freeTop;
    private int inFlight;

    Operations(int capacity) {
        this.userData = new long[capacity];
        this.slot = new FixedSlot[capacity];
        this.buffer = new PooledBuffer[capacity];
        this.busy = new boolean[capacity];
        this.free = new int[capacity];
        for (int i = 0; i < capacity; i++) {
            free[i] = capacity - 1 - i;
        }
        this.freeTop = capacity;
    }

    int capacity() {
        return free.length;
    }

    /** The id the next {@link #begin} takes, or -1 when every id is in use. */
    int peekFree() {
        return freeTop == 0 ? -1 : free[freeTop - 1];
    }

    /** Takes id {@link #peekFree()} for an operation on {@code s} (or null) that pinned {@code b} (or null). */
    void begin(int id, long ud, FixedSlot s, PooledBuffer b) {
        freeTop--;
        userData[id] = ud;
        slot[id] = s;
        buffer[id] = b;
        busy[id] = true;
        if (s != null) {
            s.inFlight++;
        }
        inFlight++;
    }

    /**
     * Ends operation {@code id} (its completion arrived, or it was taken back unsubmitted): unpins its
     * buffer, frees the id and returns the slot it used, or null.
     */
    FixedSlot end(int id) {
        FixedSlot s = slot[id];
        slot[id] = null;
        unpin(id);
        free[freeTop++] = id;
        inFlight--;
        if (s != null) {
            s.inFlight--;
        }
        return s;
    }

    /** Lets go of operation {@code id}'s buffer: the kernel is done with its memory. */
    void unpin(int id) {
        busy[id] = false;
        PooledBuffer b = buffer[id];
        if (b != null) {
            buffer[id] = null;
            b.unpin();
        }
    }

    long userData(int id) {
        return userData[id];
    }

    FixedSlot slot(int id) {
        return slot[id];
    }

    /** True if id {@code id} is prepared or in flight. */
    boolean isBusy(int id) {
        return busy[id];
    }

    /** Operations prepared or in flight. */
    int inFlight() {
        return inFlight;
    }
}
