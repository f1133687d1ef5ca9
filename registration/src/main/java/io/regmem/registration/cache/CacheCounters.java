package io.regmem.registration.cache;

import io.regmem.registration.CacheStats;
import java.util.concurrent.atomic.LongAdder;

/** A registration cache's counters since it was built: what {@link RegistrationCache#stats()} reports. */
final class CacheCounters {
    /** Hits handed over by regions (see {@link CacheEntry}); live regions hold the rest. */
    final LongAdder hits = new LongAdder();
    /** Hits counted by an acquire and then refused (the region was leaving): not hits after all. */
    final LongAdder refusedHits = new LongAdder();
    final LongAdder misses = new LongAdder();
    final LongAdder merges = new LongAdder();
    final LongAdder evictions = new LongAdder();
    final LongAdder invalidations = new LongAdder();

    /** The counters, with the hits the indexed regions still hold, and what the index holds now. */
    CacheStats stats(RegionIndex ix) {
        long h = hits.sum() - refusedHits.sum();
        for (CacheEntry e : ix.all()) {
            h += e.pendingHits();
        }
        long m = misses.sum();
        return new CacheStats(h + m, h, m, merges.sum(), evictions.sum(), invalidations.sum(), ix.size(), ix.bytes());
    }
}
