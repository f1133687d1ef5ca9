package io.regmem.registration;

/**
 * A registration cache's counters ({@code io.regmem.registration.cache.RegistrationCache#stats()}),
 * or the sum over every cache of a protection domain ({@link ProtectionDomain#cacheStats()}).
 *
 * @param gets            calls to get
 * @param hits            gets served from the index
 * @param misses          gets that registered
 * @param merges          regions merged into a new registration
 * @param evictions       idle regions evicted by the limits
 * @param invalidations   regions invalidated (unmapped memory, closed arenas, close)
 * @param regions         regions in the index now
 * @param registeredBytes bytes the indexed regions cover now
 */
public record CacheStats(long gets, long hits, long misses, long merges, long evictions, long invalidations,
                         int regions, long registeredBytes) {

    /** All zero. */
    public static final CacheStats ZERO = new CacheStats(0, 0, 0, 0, 0, 0, 0, 0);

    /** The field-by-field sum of this and {@code other}. */
    public CacheStats plus(CacheStats other) {
        return new CacheStats(gets + other.gets, hits + other.hits, misses + other.misses, merges + other.merges,
                evictions + other.evictions, invalidations + other.invalidations, regions + other.regions,
                registeredBytes + other.registeredBytes);
    }

    /** The same counters with nothing indexed now (what a closed cache leaves behind). */
    public CacheStats retired() {
        return new CacheStats(gets, hits, misses, merges, evictions, invalidations, 0, 0);
    }

    /** hits / gets, or 0 before any get. */
    public double hitRate() {
        return gets == 0 ? 0 : (double) hits / gets;
    }
}
