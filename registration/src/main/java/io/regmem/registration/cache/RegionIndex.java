package io.regmem.registration.cache;

import io.regmem.registration.internal.SortedLongs;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;

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
    static final RegionIndex EMPTY = new RegionIndex(new Leaf[0], new long[0], 0, 0, 0);

    /** One leaf: sorted, non-overlapping entries. */
    record Leaf(long[] starts, long[] ends, CacheEntry[] regions) {
        static Leaf of(List<CacheEntry> sorted) {
            return of(sorted.toArray(new CacheEntry[0]), 0, sorted.size());
        }

        static Leaf of(CacheEntry[] sorted, int from, int to) {
            int n = to - from;
            long[] s = new long[n];
            long[] e = new long[n];
            CacheEntry[] r = Arrays.copyOfRange(sorted, from, to);
            for (int i = 0; i < n; i++) {
                s[i] = r[i].start;
                e[i] = r[i].end;
            }
            return new Leaf(s, e, r);
        }

        /** A leaf of entries whose bounds are already at hand (no entry is dereferenced). */
        static Leaf of(CacheEntry[] sorted, long[] starts, long[] ends, int from, int to) {
            return new Leaf(Arrays.copyOfRange(starts, from, to), Arrays.copyOfRange(ends, from, to),
                    Arrays.copyOfRange(sorted, from, to));
        }

        int size() {
            return starts.length;
        }
    }

    /** The leaves in address order; only the first {@link #leafCount} are used. */
    private final Leaf[] leaves;
    /** {@code leaves[i].starts[0]}, kept beside the leaves so neither a lookup nor a change chases them. */
    private final long[] firstStarts;
    private final int leafCount;
    private final int size;
    private final long bytes;

    private RegionIndex(Leaf[] leaves, long[] firstStarts, int leafCount, int size, long bytes) {
        this.leaves = leaves;
        this.firstStarts = firstStarts;
        this.leafCount = leafCount;
        this.size = size;
        this.bytes = bytes;
    }

    int size() {
        return size;
    }

    long bytes() {
        return bytes;
    }

    /** The last index i below {@code n} with {@code keys[i] <= key}, or -1 (branch-free). */
    private static int floor(long[] keys, int n, long key) {
        return SortedLongs.floor(keys, n, key);
    }

    /** The region starting at or before {@code address} with the greatest start, or null. Lock-free. */
    CacheEntry floorRegion(long address) {
        int l = floor(firstStarts, leafCount, address);
        if (l < 0) {
            return null;
        }
        Leaf leaf = leaves[l];
        return leaf.regions[floor(leaf.starts, leaf.starts.length, address)];
    }

    /**
     * The regions overlapping {@code [lo, hi)}, or with {@code touching} also those ending at
     * {@code lo} or starting at {@code hi}, in address order.
     */
    List<CacheEntry> overlapping(long lo, long hi, boolean touching) {
        List<CacheEntry> out = new ArrayList<>();
        int l = Math.max(0, floor(firstStarts, leafCount, lo));
        for (; l < leafCount; l++) {
            Leaf leaf = leaves[l];
            int i = Math.max(0, floor(leaf.starts, leaf.starts.length, lo));
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
    List<CacheEntry> all() {
        List<CacheEntry> out = new ArrayList<>(size);
        for (int l = 0; l < leafCount; l++) {
            Collections.addAll(out, leaves[l].regions);
        }
        return out;
    }

    /** The region at a global position (leaf, slot), for the eviction hand. */
    Leaf leaf(int i) {
        return leaves[i];
    }

    int leafCount() {
        return leafCount;
    }

    /**
     * A new index without {@code removed} and with {@code added} (may be null). Only the leaves
     * that change are copied; the others are shared, and the top arrays are copied without
     * touching them. {@code added} must not overlap what stays.
     */
    RegionIndex replace(List<CacheEntry> removed, CacheEntry added) {
        return replace(removed, added, new Scratch());
    }

    /** {@link #replace(List, CacheEntry)} with working space the caller reuses (one writer at a time). */
    RegionIndex replace(List<CacheEntry> removed, CacheEntry added, Scratch scratch) {
        if (removed.isEmpty() && added == null) {
            return this;
        }
        int n = leafCount;
        if (n == 0) {
            return added == null ? this
                    : new RegionIndex(new Leaf[] {Leaf.of(List.of(added))}, new long[] {added.start}, 1, 1,
                            added.end - added.start);
        }
        // The touched leaves, in ascending order, each with a bit per slot (a leaf holds at most
        // 64) for the entries leaving it: a change touches few leaves, so these stay short.
        Scratch sc = scratch;
        sc.touchedCount = 0;
        for (CacheEntry r : removed) {
            int l = floor(firstStarts, leafCount, r.start);
            if (l < 0) {
                continue;
            }
            Leaf leaf = leaves[l];
            int i = floor(leaf.starts, leaf.starts.length, r.start);
            if (i >= 0 && leaf.regions[i] == r) {
                sc.touch(l, 1L << i);
            } // else: not in this index
        }
        int target = -1;
        if (added != null) {
            target = Math.max(0, floor(firstStarts, leafCount, added.start));
            sc.touch(target, 0);
        }
        int touchedCount = sc.touchedCount;
        // A touched leaf becomes at most two; the arrays may end up longer than leafCount.
        Leaf[] outLeaves = new Leaf[n + touchedCount];
        long[] outFirst = new long[n + touchedCount];
        int out = 0;
        int newSize = size;
        long newBytes = bytes;
        int copied = 0; // leaves before this one are placed
        for (int t = 0; t < touchedCount; t++) {
            int l = sc.touchedLeaves[t];
            System.arraycopy(leaves, copied, outLeaves, out, l - copied);
            System.arraycopy(firstStarts, copied, outFirst, out, l - copied);
            out += l - copied;
            copied = l + 1;
            Leaf oldLeaf = leaves[l];
            long mask = sc.leavingSlots[t];
            boolean adds = l == target;
            // An underfull result joins the leaf before it (re-split evenly if both do not fit in
            // one), so leaves stay at least a quarter full however entries come and go.
            int staying = oldLeaf.size() - Long.bitCount(mask) + (adds ? 1 : 0);
            Leaf prev = staying < LEAF / 4 && out > 0 ? outLeaves[--out] : null;
            int p = prev == null ? 0 : prev.size();
            int count = p + staying;
            // Built straight into new (young) arrays: no reference is stored into long-lived
            // working space, whose write barriers made this loop the most expensive part of a miss.
            CacheEntry[] regions = new CacheEntry[count];
            long[] starts = new long[count];
            long[] ends = new long[count];
            if (prev != null) {
                System.arraycopy(prev.regions, 0, regions, 0, p);
                System.arraycopy(prev.starts, 0, starts, 0, p);
                System.arraycopy(prev.ends, 0, ends, 0, p);
            }
            int at = p;
            boolean placed = !adds;
            CacheEntry[] old = oldLeaf.regions;
            long[] oldStarts = oldLeaf.starts;
            long[] oldEnds = oldLeaf.ends;
            for (int i = 0; i < old.length; i++) {
                if (!placed && added.start < oldStarts[i]) {
                    at = entry(regions, starts, ends, at, added, added.start, added.end);
                    placed = true;
                }
                if ((mask & (1L << i)) != 0) {
                    newSize--;
                    newBytes -= oldEnds[i] - oldStarts[i];
                } else {
                    at = entry(regions, starts, ends, at, old[i], oldStarts[i], oldEnds[i]);
                }
            }
            if (!placed) {
                at = entry(regions, starts, ends, at, added, added.start, added.end);
            }
            if (adds) {
                newSize++;
                newBytes += added.end - added.start;
            }
            if (count > LEAF) {
                int half = count / 2;
                out = put(outLeaves, outFirst, out, Leaf.of(regions, starts, ends, 0, half));
                out = put(outLeaves, outFirst, out, Leaf.of(regions, starts, ends, half, count));
            } else if (count > 0) {
                out = put(outLeaves, outFirst, out, new Leaf(starts, ends, regions));
            }
        }
        System.arraycopy(leaves, copied, outLeaves, out, n - copied);
        System.arraycopy(firstStarts, copied, outFirst, out, n - copied);
        out += n - copied;
        return new RegionIndex(outLeaves, outFirst, out, newSize, newBytes);
    }

    /**
     * Working space of {@link #replace}, reused across changes by one writer at a time (the cache
     * calls replace under its lock), so a change allocates only what it publishes.
     */
    static final class Scratch {
        int[] touchedLeaves = new int[8];
        long[] leavingSlots = new long[8];
        int touchedCount;

        /** Marks leaf {@code l} touched (kept in ascending order) with {@code slots} leaving it. */
        void touch(int l, long slots) {
            int at = Arrays.binarySearch(touchedLeaves, 0, touchedCount, l);
            if (at >= 0) {
                leavingSlots[at] |= slots;
                return;
            }
            at = -at - 1;
            if (touchedCount == touchedLeaves.length) {
                touchedLeaves = Arrays.copyOf(touchedLeaves, 2 * touchedCount);
                leavingSlots = Arrays.copyOf(leavingSlots, 2 * touchedCount);
            }
            System.arraycopy(touchedLeaves, at, touchedLeaves, at + 1, touchedCount - at);
            System.arraycopy(leavingSlots, at, leavingSlots, at + 1, touchedCount - at);
            touchedLeaves[at] = l;
            leavingSlots[at] = slots;
            touchedCount++;
        }
    }

    private static int entry(CacheEntry[] entries, long[] starts, long[] ends, int at, CacheEntry r,
            long start, long end) {
        entries[at] = r;
        starts[at] = start;
        ends[at] = end;
        return at + 1;
    }

    private static int put(Leaf[] leaves, long[] firstStarts, int at, Leaf leaf) {
        leaves[at] = leaf;
        firstStarts[at] = leaf.starts[0];
        return at + 1;
    }
}
