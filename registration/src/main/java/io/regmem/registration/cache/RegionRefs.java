package io.regmem.registration.cache;

import java.lang.foreign.MemorySegment;

/**
 * Padding around {@link CacheEntry}'s reference word, in the Agrona / JCTools manner (superclass
 * fields are laid out before subclass fields), of regmem's one padding width: 128 bytes (16 longs)
 * each side (see the package documentation of {@code io.regmem.registration}). Regions are made one after another and
 * the garbage collector keeps them next to each other in index order, so without padding two
 * regions used by two threads share a cache line and every hit of one thread invalidates the other
 * thread's line: a hit on two cores, each on its own half of the regions, cost 3-6 times a hit on
 * one.
 */
abstract class RegionRefsPadLeft {
    long p00, p01, p02, p03, p04, p05, p06, p07, p08, p09, p0a, p0b, p0c, p0d, p0e, p0f;
}

/**
 * The reference word itself (see {@link CacheEntry}), with everything a hit reads and the two flags
 * that the eviction hand reads beside it, on one cache line: a hit touches this line and its
 * handle's, a CLOCK visit of a cold region this line only. (The hit's compare-and-set needs the line
 * anyway, so the read-mostly fields lose nothing by sharing it.)
 */
abstract class RegionRefs extends RegionRefsPadLeft {
    /** References, the lease rotor and lease bits in the low half, hits not yet handed over in the high half (see {@link CacheEntry}). */
    volatile long refs = 1;
    /** The registered range. */
    final long start;
    final long end;
    /** The memory's scope, so that a hit's liveness check is one hop. */
    final MemorySegment.Scope scope;
    /** The granted rights. */
    final int access;
    /** False once the entry left the index (evicted, merged away, invalidated, cache closed). */
    volatile boolean indexed = true;
    /** CLOCK's reference bit (through CacheEntry's ACCESSED handle). */
    volatile boolean accessed = true;

    RegionRefs(long start, long end, MemorySegment.Scope scope, int access) {
        this.start = start;
        this.end = end;
        this.scope = scope;
        this.access = access;
    }
}

/** Padding after the reference word, so the region's cold fields and its neighbour sit on other lines. */
abstract class RegionRefsPadRight extends RegionRefs {
    long p10, p11, p12, p13, p14, p15, p16, p17, p18, p19, p1a, p1b, p1c, p1d, p1e, p1f;

    RegionRefsPadRight(long start, long end, MemorySegment.Scope scope, int access) {
        super(start, end, scope, access);
    }
}
