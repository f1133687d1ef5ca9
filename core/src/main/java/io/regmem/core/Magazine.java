package io.regmem.core;

/**
 * One platform thread's free buffers of one size class: a bounded LIFO stack that only its owner
 * thread reads and writes, so a thread's allocate/free pair writes no shared cache line.
 *
 * <p>The allocator finds the calling thread's magazine of a class with one load from the pool's
 * table ({@link ThreadCaches#fast}), checks {@link #threadId}, and pops or pushes here: no atomic
 * instruction, no lock, no garbage. The counters are plain longs written only by the owner; other
 * threads read them racily for {@link BufferPool#stats()} (exact when the pool is quiescent).
 *
 * <p>{@link #pop()} does not clear the entry it takes (one store fewer on every allocation): the
 * stack may keep a reference above {@link #top} to a buffer now live, until a push overwrites it
 * or a flush or drain clears it. Nothing reads above {@link #top}; it costs at most the stack's
 * capacity in handles kept reachable.
 */
final class Magazine {
    /** The owner's id (never reused in a JVM): what the table's reader compares. */
    final long threadId;
    final PooledBuffer[] stack;
    /** Buffers in {@link #stack}, from index 0. */
    int top;
    /** Allocations of the class by the owner, served from here or not. */
    long allocations;
    /** Allocations that found this magazine empty. */
    long misses;

    Magazine(long threadId, int capacity) {
        this.threadId = threadId;
        this.stack = new PooledBuffer[capacity];
    }

    /** Caches a buffer; false when the stack is full. */
    boolean push(PooledBuffer buffer) {
        int t = top;
        if (t == stack.length) {
            return false;
        }
        stack[t] = buffer;
        top = t + 1;
        return true;
    }

    /** The most recently cached buffer; the stack must not be empty. */
    PooledBuffer pop() {
        return stack[--top];
    }
}
