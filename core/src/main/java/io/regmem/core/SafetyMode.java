package io.regmem.core;

/**
 * How much checking a {@link BufferPool} does on allocate and free.
 *
 * <p>All modes give bounds-checked {@link java.lang.foreign.MemorySegment}s whose scope ends when
 * the pool closes, so no mode lets the JVM crash through {@link PooledBuffer#segment()}.
 */
public enum SafetyMode {
    /**
     * No checks beyond bounds: a double free of a pooled buffer hands the same memory to two
     * owners later. For code that is proven correct. Buffers larger than the largest size class are
     * always checked, since freeing one twice would unmap memory twice. A free still refuses a
     * {@linkplain PooledBuffer#pin() pinned} buffer, but reads its pins with a plain load: a
     * {@code pin()} on another thread racing the free may be missed ({@link #CHECKED} makes the two
     * atomic).
     */
    FAST,
    /**
     * Detects double free, free of a buffer of another pool, free or use of a stale handle (by its
     * generation stamp) and use after free through {@link PooledBuffer#segment()}; each throws an
     * {@link RdmaException} and leaves the pool unharmed. Costs one compare-and-set per free. The
     * default.
     */
    CHECKED,
    /**
     * {@link #CHECKED}, and also fills freed memory with {@link BufferPool#POISON} and records the
     * allocation site of every buffer so that leak reports say where each leaked buffer came from.
     * Allocates a stack trace per allocation: for tests and debugging, not production.
     */
    PARANOID
}
