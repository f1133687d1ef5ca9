package io.regmem.registration.cache;

/**
 * A {@link RegistrationCache}'s counters.
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

    /** hits / gets, or 0 before any get. */
    public double hitRate() {
        return gets == 0 ? 0 : (double) hits / gets;
    }
}
