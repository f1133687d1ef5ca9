package io.regmem.registration.metrics;

/**
 * A registration cache as JMX sees it: {@code io.regmem:type=RegistrationCache,name=<device>.cache<n>}
 * (see {@link io.regmem.registration.CacheStats}).
 */
public interface RegistrationCacheMXBean {
    /** The cache's name: its device's name and a number. */
    String getName();

    /** Calls to get. */
    long getGets();

    /** Gets served from the index. */
    long getHits();

    /** Gets that registered. */
    long getMisses();

    /** Idle regions evicted by the limits. */
    long getEvictions();

    /** Regions invalidated. */
    long getInvalidations();

    /** Regions indexed now. */
    int getRegions();

    /** Bytes the indexed regions cover now. */
    long getRegisteredBytes();
}
