package io.regmem.registration.cache;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;
import net.jqwik.api.lifecycle.AddLifecycleHook;

/**
 * The two-level index against a TreeMap model, over enough regions to split leaves many times:
 * after every change, floor lookups, overlap queries, order, size and bytes agree.
 */
@AddLifecycleHook(NoLeaks.class)
class RegionIndexTest {

    private static CacheEntry region(long slot, long pages) {
        MemorySegment s = MemorySegment.ofAddress(0x1000_0000L + slot * 4096).reinterpret(pages * 4096);
        return new CacheEntry(null, null, s, 4);
    }

    @Property(tries = 60)
    void agreesWithASortedMapModel(@ForAll @Size(min = 1, max = 600) List<@IntRange(min = 0, max = 3000) Integer> ops) {
        RegionIndex ix = RegionIndex.EMPTY;
        TreeMap<Long, CacheEntry> model = new TreeMap<>();
        for (int op : ops) {
            long slot = op % 1500;
            if (op < 2000) {
                // add a one- or two-page region at slot unless it overlaps; replacing what it overlaps otherwise
                CacheEntry r = region(slot, 1 + op % 2);
                List<CacheEntry> over = ix.overlapping(r.start, r.end, false);
                List<CacheEntry> modelOver = new ArrayList<>();
                for (CacheEntry m : model.values()) {
                    if (m.start < r.end && m.end > r.start) {
                        modelOver.add(m);
                    }
                }
                assertThat(over).containsExactlyElementsOf(modelOver);
                ix = ix.replace(over, r);
                over.forEach(m -> model.remove(m.start));
                model.put(r.start, r);
            } else if (op >= 2900) {
                // remove a run of regions at once (the identity-set path of replace)
                long lo = 0x1000_0000L + slot * 4096;
                long hi = lo + 200L * 4096;
                List<CacheEntry> run = ix.overlapping(lo, hi, false);
                ix = ix.replace(run, null);
                run.forEach(m -> model.remove(m.start));
            } else if (!model.isEmpty()) {
                Map.Entry<Long, CacheEntry> victim = model.ceilingEntry(0x1000_0000L + slot * 4096);
                if (victim == null) {
                    victim = model.firstEntry();
                }
                ix = ix.replace(List.of(victim.getValue()), null);
                model.remove(victim.getKey());
            }
            check(ix, model, slot);
        }
    }

    private static void check(RegionIndex ix, TreeMap<Long, CacheEntry> model, long probeSlot) {
        assertThat(ix.size()).isEqualTo(model.size());
        assertThat(ix.bytes()).isEqualTo(model.values().stream().mapToLong(r -> r.end - r.start).sum());
        assertThat(ix.all()).containsExactlyElementsOf(model.values());
        for (long probe : new long[] {0x1000_0000L + probeSlot * 4096, 0x1000_0000L + probeSlot * 4096 + 100, 0, Long.MAX_VALUE}) {
            Map.Entry<Long, CacheEntry> floor = model.floorEntry(probe);
            assertThat(ix.floorRegion(probe)).isSameAs(floor == null ? null : floor.getValue());
        }
        for (int l = 0; l < ix.leafCount(); l++) {
            // every leaf but the first stays at least a quarter full, so removals cannot leave
            // thousands of near-empty leaves for every change to copy
            assertThat(ix.leaf(l).size()).as("leaf %d of %d", l, ix.leafCount())
                    .isBetween(l == 0 ? 1 : RegionIndex.LEAF / 4, RegionIndex.LEAF);
        }
    }

    @org.junit.jupiter.api.Test
    void removalsKeepLeavesAtLeastAQuarterFull() {
        RegionIndex ix = RegionIndex.EMPTY;
        TreeMap<Long, CacheEntry> model = new TreeMap<>();
        for (int i = 0; i < 20 * RegionIndex.LEAF; i++) {
            CacheEntry r = region(2L * i, 1);
            ix = ix.replace(List.of(), r);
            model.put(r.start, r);
        }
        // Remove seven of every eight regions, one at a time, as idle eviction would.
        int i = 0;
        for (CacheEntry r : new ArrayList<>(model.values())) {
            if (i++ % 8 != 0) {
                ix = ix.replace(List.of(r), null);
                model.remove(r.start);
                check(ix, model, 2L * i);
            }
        }
        assertThat(ix.leafCount()).as("%d regions", ix.size()).isLessThanOrEqualTo(ix.size() / (RegionIndex.LEAF / 4) + 1);
    }

    @Property(tries = 3)
    void twelveThousandRegionsInRandomOrderThenEvictionChurnThenRemoval(@ForAll long seed) {
        java.util.SplittableRandom rnd = new java.util.SplittableRandom(seed);
        RegionIndex ix = RegionIndex.EMPTY;
        TreeMap<Long, CacheEntry> model = new TreeMap<>();
        int n = 12_000; // about 200-400 leaves
        List<Integer> order = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            order.add(i);
        }
        java.util.Collections.shuffle(order, new java.util.Random(seed));
        RegionIndex.Scratch scratch = new RegionIndex.Scratch();
        for (int k = 0; k < n; k++) {
            CacheEntry r = region(2L * order.get(k), 1);
            ix = ix.replace(List.of(), r, scratch);
            model.put(r.start, r);
            if (k % 1000 == 999) {
                check(ix, model, 2L * order.get(k));
            }
        }
        assertThat(ix.leafCount()).isGreaterThan(12_000 / RegionIndex.LEAF);
        // FIFO-like churn (an evicting cache): remove the oldest batch, add new ones above
        long next = 2L * n;
        for (int round = 0; round < 200; round++) {
            List<CacheEntry> batch = new ArrayList<>();
            for (int j = 0; j < 1 + rnd.nextInt(40) && !model.isEmpty(); j++) {
                batch.add(model.pollFirstEntry().getValue());
            }
            CacheEntry add = region(next, 1);
            next += 2;
            ix = ix.replace(batch, add, scratch);
            model.put(add.start, add);
            if (round % 20 == 0) {
                check(ix, model, next - 2);
            }
        }
        // Then remove nearly everything at random.
        List<CacheEntry> rest = new ArrayList<>(model.values());
        java.util.Collections.shuffle(rest, new java.util.Random(seed + 1));
        for (int k = 0; k < rest.size() - 3; k++) {
            ix = ix.replace(List.of(rest.get(k)), null, scratch);
            model.remove(rest.get(k).start);
            if (k % 500 == 0) {
                check(ix, model, rest.get(k).start);
            }
        }
        check(ix, model, 0);
        assertThat(ix.leafCount()).isLessThanOrEqualTo(2);
    }

    @Property(tries = 20)
    void touchingQueriesIncludeNeighbours(@ForAll @IntRange(min = 1, max = 200) int n) {
        RegionIndex ix = RegionIndex.EMPTY;
        List<CacheEntry> all = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            CacheEntry r = region(2L * i, 1); // one page, one page apart
            ix = ix.replace(List.of(), r);
            all.add(r);
        }
        for (int i = 0; i < n; i++) {
            CacheEntry r = all.get(i);
            // the gap page between r and the next: touching finds both neighbours, overlap finds none
            long lo = r.end;
            long hi = r.end + 4096;
            assertThat(ix.overlapping(lo, hi, false)).isEmpty();
            assertThat(ix.overlapping(lo, hi, true)).containsExactlyElementsOf(all.subList(i, Math.min(n, i + 2)));
        }
        assertThat(ix.leafCount()).isGreaterThanOrEqualTo(n / RegionIndex.LEAF);
    }
}
