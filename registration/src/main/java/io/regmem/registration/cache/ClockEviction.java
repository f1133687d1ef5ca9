package io.regmem.registration.cache;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;

/**
 * The registration cache's eviction: CLOCK, the usual approximation of least recently used, over
 * the index's entries in address order. A hit sets a region's reference bit; the hand clears it;
 * a region found idle (held by the index alone, still indexed) with a clear bit is evicted. Once a
 * limit is crossed, eviction goes on to 1/64 below it, so a full cache evicts in batches: most
 * misses evict nothing and change one leaf instead of two. Used under the cache's lock.
 */
final class ClockEviction {
    private final int maxRegions;
    private final long maxBytes;
    private final int lowRegions;
    private final long lowBytes;
    /** The hand: a (leaf, slot) position, kept across changes. */
    private int leaf;
    private int slot;

    ClockEviction(int maxRegions, long maxBytes) {
        this.maxRegions = maxRegions;
        this.maxBytes = maxBytes;
        this.lowRegions = maxRegions - maxRegions / 64;
        this.lowBytes = maxBytes - maxBytes / 64;
    }

    /**
     * CLOCK over {@code ix}, whose entries would count {@code count} regions and {@code bytes} bytes
     * once the pending change is published: nothing if both are within the limits; otherwise at most
     * two sweeps, retiring idle regions with a clear reference bit (their count goes from 1 to 0 by
     * compare-and-set, so nobody can acquire them any more) until both are 1/64 below the limits or
     * nothing idle is left. A change that moves entries between leaves only moves where the next
     * sweep resumes, which CLOCK tolerates.
     *
     * @param evicted told about each region retired, before the next is looked at
     * @return the retired regions, a list the caller may extend
     */
    List<CacheEntry> victims(RegionIndex ix, int count, long bytes, Consumer<CacheEntry> evicted) {
        List<CacheEntry> victims = new ArrayList<>(2);
        if ((count <= maxRegions && bytes <= maxBytes) || ix.leafCount() == 0) {
            return victims;
        }
        int l = leaf < ix.leafCount() ? leaf : 0;
        int s = slot;
        for (int steps = 2 * ix.size(); steps > 0 && (count > lowRegions || bytes > lowBytes); steps--) {
            RegionIndex.Leaf lf = ix.leaf(l);
            if (s >= lf.size()) {
                s = 0;
                l = l + 1 == ix.leafCount() ? 0 : l + 1;
                lf = ix.leaf(l);
            }
            CacheEntry e = lf.regions()[s++];
            if (e.indexed && !e.clearAccessed() && e.refs() == 1 && e.tryRetireIdle()) {
                e.indexed = false;
                victims.add(e);
                count--;
                bytes -= e.end - e.start;
                evicted.accept(e);
            }
        }
        leaf = l;
        slot = s;
        return victims;
    }
}
