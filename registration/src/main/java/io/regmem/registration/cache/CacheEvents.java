package io.regmem.registration.cache;

import jdk.jfr.Category;
import jdk.jfr.DataAmount;
import jdk.jfr.Description;
import jdk.jfr.Enabled;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.MemoryAddress;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;

/**
 * The registration cache's JDK Flight Recorder events: misses (with the registration's duration),
 * evictions and invalidations. Off unless a recording enables them ({@code io.regmem.*}); a hit
 * records nothing.
 */
final class CacheEvents {
    private CacheEvents() {
    }

    @Name("io.regmem.CacheMiss")
    @Label("Registration Cache Miss")
    @Category({"regmem", "Registration Cache"})
    @Description("A get found no usable region and registered one; the duration includes the registration")
    @Enabled(false)
    static final class Miss extends Event {
        @Label("Cache")
        String cache;
        @Label("Address")
        @MemoryAddress
        long address;
        @Label("Length")
        @DataAmount
        long length;
        @Label("Registered Length")
        @Description("The region registered: larger than asked when neighbours were merged in")
        @DataAmount
        long registered;
    }

    @Name("io.regmem.CacheEviction")
    @Label("Registration Cache Eviction")
    @Category({"regmem", "Registration Cache"})
    @Description("An idle region left the cache to keep it within its limits (deregistered)")
    @Enabled(false)
    @StackTrace(false)
    static final class Eviction extends Event {
        @Label("Cache")
        String cache;
        @Label("Address")
        @MemoryAddress
        long address;
        @Label("Length")
        @DataAmount
        long length;
    }

    @Name("io.regmem.CacheInvalidation")
    @Label("Registration Cache Invalidation")
    @Category({"regmem", "Registration Cache"})
    @Description("Regions over memory that is going away lost their keys (invalidate by range or by arena)")
    @Enabled(false)
    static final class Invalidation extends Event {
        @Label("Cache")
        String cache;
        @Label("Regions")
        int regions;
    }

    /** Records an eviction of {@code e} from {@code cache}, if the event is on. */
    static void evicted(RegistrationCache cache, CacheEntry e) {
        Eviction event = new Eviction();
        if (event.shouldCommit()) {
            event.cache = cache.toString();
            event.address = e.start;
            event.length = e.end - e.start;
            event.commit();
        }
    }

    /** Records an invalidation of {@code regions} regions of {@code cache}, if the event is on. */
    static void invalidated(RegistrationCache cache, int regions) {
        Invalidation event = new Invalidation();
        if (event.shouldCommit()) {
            event.cache = cache.toString();
            event.regions = regions;
            event.commit();
        }
    }
}
