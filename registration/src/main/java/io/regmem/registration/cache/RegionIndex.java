package io.regmem.registration.cache;

import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;

/**
 * The cache's index: an immutable, two-level sorted structure of non-overlapping regions.
 *
 * <pre>
 *  top:    firstStart[0]  firstStart[1]  ...  firstStart[L-1]      (one per leaf, sorted)
 *            |              |                   |
 *  leaves: [s e r]x&lt;=64    [s e r]x&lt;=64         [s e r]x&lt;=64          (starts, ends, regions; sorted)
 * </pre>
 *
 * A lookup is two binary searches (top, then one leaf) over primitive arrays, with no lock and no
 * allocation. A change copies only the leaves it touches (at most {@value #LEAF} entries each) and
 * the top arrays (one entry per leaf), never the whole index: with 10,000 regions that is about
 * 64 + 160 entries instead of 10,000. Instances never change after construction, so a reader that
 * loaded one through the cache's volatile field sees a consistent index.
 */
final class RegionIndex {
    /** Entries per leaf at most; a leaf that would grow past it splits in two. */
    static final int LEAF = 64;
    static final RegionIndex EMPTY = new RegionIndex(new Leaf[0], 0, 0);

    /** One leaf: sorted, non-overlapping entries. */
    record Leaf(long[] starts, long[] ends, CachedRegion[] regions) {
        static Leaf of(List<CachedRegion> sorted) {
            int n = sorted.size();
            long[] s = new long[n];
            long[] e = new long[n];
            CachedRegion[] r = sorted.toArray(new CachedRegion[0]);
            for (int i = 0; i < n; i++) {
                s[i] = r[i].start;
                e[i] = r[i].end;
            }
            return new Leaf(s, e, r);
        }

        int size() {
            return starts.length;
        }
    }

    private final Leaf[] leaves;
    private final long[] firstStarts;
    private final int size;
    private final long bytes;

    private RegionIndex(Leaf[] leaves, int size, long bytes) {
        this.leaves = leaves;
        this.firstStarts = new long[leaves.length];
        for (int i = 0; i < leaves.length; i++) {
            firstStarts[i] = leaves[i].starts[0];
        }
        this.size = size;
        this.bytes = bytes;
    }

    int size() {
        return size;
    }

    long bytes() {
        return bytes;
    }

    /** The last index i with {@code keys[i] <= key}, or -1. */
    private static int floor(long[] keys, long key) {
        int lo = 0;
        int hi = keys.length - 1;
        int found = -1;
        while (lo <= hi) {
            int mid = (lo + hi) >>> 1;
            if (keys[mid] <= key) {
                found = mid;
                lo = mid + 1;
            } else {
                hi = mid - 1;
            }
        }
        return found;
    }

    /** The region starting at or before {@code address} with the greatest start, or null. Lock-free. */
    CachedRegion floorRegion(long address) {
        int l = floor(firstStarts, address);
        if (l < 0) {
            return null;
        }
        Leaf leaf = leaves[l];
        return leaf.regions[floor(leaf.starts, address)];
    }

    /**
     * The regions overlapping {@code [lo, hi)}, or with {@code touching} also those ending at
     * {@code lo} or starting at {@code hi}, in address order.
     */
    List<CachedRegion> overlapping(long lo, long hi, boolean touching) {
        List<CachedRegion> out = new ArrayList<>();
        int l = Math.max(0, floor(firstStarts, lo));
        for (; l < leaves.length; l++) {
            Leaf leaf = leaves[l];
            int i = Math.max(0, floor(leaf.starts, lo));
            for (; i < leaf.size(); i++) {
                long s = leaf.starts[i];
                long e = leaf.ends[i];
                if (touching ? s > hi : s >= hi) {
                    return out;
                }
                if (touching ? e >= lo : e > lo) {
                    out.add(leaf.regions[i]);
                }
            }
        }
        return out;
    }

    /** Every region, in address order. */
    List<CachedRegion> all() {
        List<CachedRegion> out = new ArrayList<>(size);
        for (Leaf leaf : leaves) {
            Collections.addAll(out, leaf.regions);
        }
        return out;
    }

    /** The region at a global position (leaf, slot), for the eviction hand. */
    Leaf leaf(int i) {
        return leaves[i];
    }

    int leafCount() {
        return leaves.length;
    }

    /**
     * A new index without {@code removed} and with {@code added} (may be null). Only the leaves
     * that change are copied. {@code added} must not overlap what stays.
     */
    RegionIndex replace(List<CachedRegion> removed, CachedRegion added) {
        if (removed.isEmpty() && added == null) {
            return this;
        }
        Set<CachedRegion> gone = Collections.newSetFromMap(new IdentityHashMap<>());
        gone.addAll(removed);
        boolean[] touched = new boolean[leaves.length];
        for (CachedRegion r : removed) {
            int l = floor(firstStarts, r.start);
            if (l >= 0) {
                touched[l] = true;
            }
        }
        int target = -1;
        if (added != null && leaves.length > 0) {
            target = Math.max(0, floor(firstStarts, added.start));
            touched[target] = true;
        }
        List<Leaf> next = new ArrayList<>(leaves.length + 1);
        int newSize = size;
        long newBytes = bytes;
        for (int l = 0; l < leaves.length; l++) {
            if (!touched[l]) {
                next.add(leaves[l]);
                continue;
            }
            List<CachedRegion> entries = new ArrayList<>(LEAF + 1);
            for (CachedRegion r : leaves[l].regions) {
                if (gone.contains(r)) {
                    newSize--;
                    newBytes -= r.end - r.start;
                } else {
                    entries.add(r);
                }
            }
            if (l == target) {
                insertSorted(entries, added);
                newSize++;
                newBytes += added.end - added.start;
            }
            if (entries.size() > LEAF) {
                int half = entries.size() / 2;
                next.add(Leaf.of(entries.subList(0, half)));
                next.add(Leaf.of(entries.subList(half, entries.size())));
            } else if (!entries.isEmpty()) {
                next.add(Leaf.of(entries));
            }
        }
        if (added != null && leaves.length == 0) {
            next.add(Leaf.of(List.of(added)));
            newSize++;
            newBytes += added.end - added.start;
        }
        return new RegionIndex(next.toArray(new Leaf[0]), newSize, newBytes);
    }

    private static void insertSorted(List<CachedRegion> entries, CachedRegion added) {
        int i = 0;
        while (i < entries.size() && entries.get(i).start < added.start) {
            i++;
        }
        entries.add(i, added);
    }
}
