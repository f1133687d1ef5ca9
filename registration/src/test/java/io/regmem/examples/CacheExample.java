package io.regmem.examples;

// example: cache
import io.regmem.registration.Access;
import io.regmem.registration.CacheStats;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.cache.CachedRegion;
import io.regmem.registration.cache.RegistrationCache;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/** Registering once and reusing the registration: a miss, then hits, then an invalidation. */
public final class CacheExample {
    public static void main(String[] args) {
        try (RdmaDevice device = RdmaDevice.open("soft");
             Arena arena = Arena.ofShared()) {
            ProtectionDomain pd = device.allocPd();
            RegistrationCache cache = RegistrationCache.builder(pd).maxRegions(1024).build();
            MemorySegment message = arena.allocate(8192, 4096);

            try (CachedRegion first = cache.get(message, Access.REMOTE_READ)) {   // a miss: registers now
                System.out.println("first get: lkey " + (first.lkey() != 0 ? "assigned" : "missing"));
            }                                                                     // given back; stays registered
            for (int i = 0; i < 3; i++) {
                try (CachedRegion again = cache.get(message, Access.REMOTE_READ)) { // hits: no registration
                    // put again.lkey() into a work request's SGE, again.rkey() into a message to the peer
                }
            }
            CacheStats s = cache.stats();
            System.out.println("gets " + s.gets() + ", hits " + s.hits() + ", misses " + s.misses());

            // Memory about to be freed or reused: its regions leave the cache and their rkeys die now.
            int invalidated = cache.invalidate(message.address(), message.byteSize());
            System.out.println("invalidated " + invalidated + " region(s)");

            cache.close();   // deregisters the idle regions
            pd.close();
        }
    }
}
// end example
