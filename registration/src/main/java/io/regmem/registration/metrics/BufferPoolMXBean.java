package io.regmem.registration.metrics;

/**
 * A {@link io.regmem.core.BufferPool} as JMX sees it: {@code io.regmem:type=BufferPool,name=<pool>}.
 * Each read takes a fresh {@code stats()} snapshot on the reader's thread; nothing is counted on the
 * allocation path for it.
 */
public interface BufferPoolMXBean {
    /** The pool's name. */
    String getName();

    /** FAST, CHECKED or PARANOID. */
    String getSafetyMode();

    /** The pool's limit on reserved bytes. */
    long getMaxBytes();

    /** Bytes of chunk memory reserved from the chunk source. */
    long getReservedBytes();

    /** Bytes of capacity in live buffers. */
    long getInUseBytes();

    /** Bytes of free buffers held ready by the threads' caches and the stashes. */
    long getCachedBytes();

    /** Buffers allocated and not freed. */
    long getLiveBuffers();

    /** Allocations since the pool was built. */
    long getAllocations();

    /** Frees since the pool was built. */
    long getFrees();

    /** Allocations the calling thread's cache could not serve. */
    long getCacheMisses();

    /** Allocations refused at {@code maxBytes}. */
    long getExhausted();

    /** Chunks reserved for size classes. */
    long getChunks();

    /** Size-class chunks given back while the pool ran (trim, decay). */
    long getGivenBackChunks();

    /** Their bytes. */
    long getGivenBackBytes();
}
