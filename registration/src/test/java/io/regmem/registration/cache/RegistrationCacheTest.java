package io.regmem.registration.cache;

import io.regmem.registration.testkit.Providers;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.Access;
import io.regmem.registration.CacheStats;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

@ExtendWith(NoLeaks.class)
class RegistrationCacheTest {
    private final Arena arena = Arena.ofShared();
    private final MemorySegment memory = arena.allocate(1 << 20, 4096);
    private final RdmaDevice device = Providers.open();
    private final ProtectionDomain pd = device.allocPd();

    @AfterEach
    void nothingLeaked() {
        pd.close();
        assertThat(device.resources().survivors()).as(device.resources().report()).isEmpty();
        device.close();
        arena.close();
    }

    private MemorySegment at(long offset, long length) {
        return memory.asSlice(offset, length);
    }

    @Test
    void aSecondGetOfACoveredRangeIsAHitOnTheSameRegion() {
        RegistrationCache cache = RegistrationCache.of(pd);
        CachedRegion a = cache.get(at(0, 8192), Access.LOCAL_WRITE, Access.REMOTE_READ);
        CachedRegion b = cache.get(at(100, 50), Access.REMOTE_READ);
        assertThat(b.region()).isSameAs(a.region());
        assertThat(a.region().address()).isEqualTo(memory.address());
        assertThat(a.length()).isEqualTo(8192);
        CacheStats s = cache.stats();
        assertThat(s.gets()).isEqualTo(2);
        assertThat(s.hits()).isEqualTo(1);
        assertThat(s.misses()).isEqualTo(1);
        assertThat(s.regions()).isEqualTo(1);
        assertThat(s.registeredBytes()).isEqualTo(8192);
        a.close();
        b.close();
        assertThat(pd.useCount()).as("idle regions stay registered in the index").isEqualTo(1);
        cache.close();
        assertThat(pd.useCount()).as("close deregisters idle regions").isZero();
    }

    @Test
    void hitsCountedInTheReferenceWordSurviveInvalidationEvictionAndTheHandOver() {
        RegistrationCache cache = RegistrationCache.builder(pd).maxRegions(2).build();
        CachedRegion a = cache.get(at(0, 4096), Access.REMOTE_READ);
        for (int i = 0; i < 5; i++) {
            cache.get(at(0, 4096), Access.REMOTE_READ).close();
        }
        assertThat(cache.stats().hits()).as("pending in the live region").isEqualTo(5);
        assertThat(a.entry.refs()).as("references are untouched by hit counting").isEqualTo(2);

        // 2^31 - 1 hits pending: the next hit sets the word's top bit and hands 2^31 over.
        a.entry.primeHits((1L << 31) - 1 - 5);
        cache.get(at(0, 4096), Access.REMOTE_READ).close();
        assertThat(a.entry.pendingHits()).as("the hand-over cleared the top bit").isZero();
        assertThat(a.entry.refs()).isEqualTo(2);
        assertThat(cache.stats().hits()).isEqualTo(1L << 31);

        cache.get(at(0, 4096), Access.REMOTE_READ).close();
        cache.invalidate(a.address(), 1); // leaves the index while still held: its hits move now
        assertThat(cache.stats().hits()).isEqualTo((1L << 31) + 1);
        a.close();

        // Eviction: three idle regions into a cache of two; the evicted one's hits stay counted.
        for (int r = 0; r < 3; r++) {
            cache.get(at(8192L * (r + 1), 4096), Access.REMOTE_READ).close();
            cache.get(at(8192L * (r + 1), 4096), Access.REMOTE_READ).close();
        }
        CacheStats s = cache.stats();
        assertThat(s.evictions()).isEqualTo(1);
        assertThat(s.hits()).isEqualTo((1L << 31) + 1 + 3);
        assertThat(s.gets()).isEqualTo(s.hits() + s.misses());
        cache.close();
        assertThat(cache.stats().hits()).as("close keeps every hit").isEqualTo((1L << 31) + 4);
    }

    @Test
    void aHintToARegionThatLeftTheIndexIsNeverReturned() {
        RegistrationCache cache = RegistrationCache.of(pd);
        CachedRegion old = cache.get(at(0, 4096), Access.REMOTE_READ); // the search's result becomes the page's hint
        cache.get(at(0, 4096), Access.REMOTE_READ).close(); // a hint hit
        cache.invalidate(old.address(), 4096);
        CachedRegion fresh = cache.get(at(0, 4096), Access.REMOTE_READ);
        assertThat(fresh).as("the old region is still held, but left the index").isNotSameAs(old);
        assertThat(fresh.region().isValid()).isTrue();
        assertThat(cache.stats().misses()).isEqualTo(2);
        // Again from a hint hit: invalidation clears the hint it finds naming the region.
        cache.get(at(0, 4096), Access.REMOTE_READ).close();
        cache.invalidate(fresh.address(), 4096);
        CachedRegion third = cache.get(at(0, 4096), Access.REMOTE_READ);
        assertThat(third.region()).isNotSameAs(fresh.region()).isNotSameAs(old);
        old.close();
        fresh.close();
        third.close();
        CacheStats s = cache.stats();
        assertThat(s.hits()).isEqualTo(2);
        assertThat(s.gets()).isEqualTo(s.hits() + s.misses());
        cache.close();
    }

    @Test
    void pagesWhoseHintsShareASlotStillFindTheirOwnRegions() {
        // 16 regions at most: 32 hint slots, so pages 0 and 32 share one; each get overwrites the other's hint.
        RegistrationCache cache = RegistrationCache.builder(pd).maxRegions(16).build();
        CachedRegion a = cache.get(at(0, 4096), Access.REMOTE_READ);
        CachedRegion c = cache.get(at(32 * 4096, 4096), Access.REMOTE_READ);
        for (int i = 0; i < 10; i++) {
            boolean even = i % 2 == 0;
            try (CachedRegion x = cache.get(at(even ? 0 : 32 * 4096, 4096), Access.REMOTE_READ)) {
                assertThat(x.region()).isSameAs((even ? a : c).region());
            }
        }
        // A hint that covers the range but lacks the rights: the index has nothing better, so a miss.
        try (CachedRegion w = cache.get(at(32 * 4096, 4096), Access.LOCAL_WRITE, Access.REMOTE_WRITE)) {
            assertThat(w.region()).isNotSameAs(c.region());
            assertThat(cache.indexed()).as("c left the index (its holders keep it)").contains(a.entry, w.entry).doesNotContain(c.entry);
        }
        CacheStats s = cache.stats();
        assertThat(s.hits()).isEqualTo(10);
        assertThat(s.misses()).isEqualTo(3);
        a.close();
        c.close();
        cache.close();
    }

    @Test
    void withoutHintsHitsSearchAndAnswerTheSame() {
        RegistrationCache cache = RegistrationCache.builder(pd).hints(false).build();
        CachedRegion a = cache.get(at(0, 8192), Access.REMOTE_READ);
        try (CachedRegion x = cache.get(at(4096, 100), Access.REMOTE_READ)) {
            assertThat(x.region()).isSameAs(a.region());
        }
        a.close();
        assertThat(cache.stats().hits()).isEqualTo(1);
        cache.close();
    }

    @Test
    void aFullCacheEvictsInBatchesDownToOneSixtyFourthBelowItsLimitAndNeverARegionInUse() {
        RegistrationCache cache = RegistrationCache.builder(pd).maxRegions(128).build(); // batches of 2 below
        CachedRegion held = cache.get(at(0, 4096), Access.REMOTE_READ);
        for (int i = 1; i < 128; i++) {
            cache.get(at(4096L * i, 4096), Access.REMOTE_READ).close();
        }
        assertThat(cache.size()).isEqualTo(128);
        assertThat(cache.stats().evictions()).isZero();
        cache.get(at(4096L * 128, 4096), Access.REMOTE_READ).close(); // 129 > 128: down to 126
        assertThat(cache.size()).isEqualTo(126);
        assertThat(cache.stats().evictions()).isEqualTo(3);
        cache.get(at(4096L * 129, 4096), Access.REMOTE_READ).close();
        cache.get(at(4096L * 130, 4096), Access.REMOTE_READ).close();
        assertThat(cache.stats().evictions()).as("the next two misses fit").isEqualTo(3);
        assertThat(cache.size()).isEqualTo(128);
        assertThat(cache.indexed()).as("the region in use stays").contains(held.entry);
        assertThat(held.region().isValid()).isTrue();
        held.close();
        cache.close();
        assertThat(pd.useCount()).isZero();
    }

    @Test
    void thePdSumsItsCachesCountersAndKeepsThoseOfClosedOnes() {
        assertThat(pd.cacheStats()).isEqualTo(CacheStats.ZERO);
        RegistrationCache one = RegistrationCache.of(pd);
        RegistrationCache two = RegistrationCache.of(pd);
        one.get(at(0, 4096), Access.REMOTE_READ).close();
        one.get(at(0, 4096), Access.REMOTE_READ).close();
        two.get(at(8192, 8192), Access.REMOTE_READ).close();
        CacheStats s = pd.cacheStats();
        assertThat(s.gets()).isEqualTo(3);
        assertThat(s.hits()).isEqualTo(1);
        assertThat(s.misses()).isEqualTo(2);
        assertThat(s.regions()).isEqualTo(2);
        assertThat(s.registeredBytes()).isEqualTo(4096 + 8192);
        one.close();
        one.close();
        s = pd.cacheStats();
        assertThat(s.gets()).as("a closed cache's counters stay, once").isEqualTo(3);
        assertThat(s.invalidations()).isEqualTo(1);
        assertThat(s.regions()).as("only open caches index regions").isEqualTo(1);
        assertThat(s.registeredBytes()).isEqualTo(8192);
        two.close();
        assertThat(pd.cacheStats().regions()).isZero();
    }

    @Test
    void moreRightsOrAWiderRangeIsAMiss() {
        RegistrationCache cache = RegistrationCache.of(pd);
        CachedRegion a = cache.get(at(0, 4096), Access.REMOTE_READ);
        CachedRegion wider = cache.get(at(0, 8192), Access.REMOTE_READ);
        assertThat(wider.region()).isNotSameAs(a.region());
        assertThat(cache.size()).as("the overlapped region left the index").isEqualTo(1);
        assertThat(a.region().isValid()).as("but it lives on for its user").isTrue();
        CachedRegion stronger = cache.get(at(0, 4096), Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        assertThat(stronger.access()).isEqualTo(Access.mask(Access.LOCAL_WRITE, Access.REMOTE_WRITE));
        a.close();
        assertThat(a.region().isDestroyed()).as("deregistered when its last user gave it back").isTrue();
        wider.close();
        stronger.close();
        cache.close();
    }

    @Test
    void mergingJoinsAdjacentRegionsOfTheSameScopeAndRights() {
        RegistrationCache cache = RegistrationCache.builder(pd).merge(true).build();
        CachedRegion left = cache.get(at(0, 4096), Access.REMOTE_READ);
        CachedRegion right = cache.get(at(4096, 4096), Access.REMOTE_READ);
        assertThat(right.address()).isEqualTo(memory.address());
        assertThat(right.length()).isEqualTo(8192);
        assertThat(cache.stats().merges()).isEqualTo(1);
        CachedRegion third = cache.get(at(1000, 5000), Access.REMOTE_READ);
        assertThat(third.region()).isSameAs(right.region());
        third.close();
        right.close();
        assertThat(left.region().isValid()).isTrue();
        left.close();
        try (Arena other = Arena.ofShared()) {
            CachedRegion foreign = cache.get(other.allocate(4096), Access.REMOTE_READ);
            assertThat(foreign.length()).as("another scope never merges").isEqualTo(4096);
            foreign.close();
            cache.close();
        }
    }

    @Test
    void anAdjacentRegionWithOtherRightsStaysWhenMergingIsOn() {
        RegistrationCache cache = RegistrationCache.builder(pd).merge(true).build();
        CachedRegion left = cache.get(at(0, 4096), Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        left.close();
        CachedRegion right = cache.get(at(4096, 4096), Access.REMOTE_READ);
        assertThat(right.address()).as("not merged: other rights").isEqualTo(memory.address() + 4096);
        assertThat(cache.size()).as("the adjacent region was neither merged nor dropped").isEqualTo(2);
        assertThat(left.region().isValid()).isTrue();
        assertThat(cache.stats().merges()).isZero();
        CachedRegion again = cache.get(at(0, 4096), Access.REMOTE_WRITE);
        assertThat(again.region()).isSameAs(left.region());
        again.close();
        right.close();
        cache.close();
    }

    @Test
    void invalidationRevokesAtOnceAndDeregistersAfterTheLastPut() {
        RegistrationCache cache = RegistrationCache.of(pd);
        CachedRegion held = cache.get(at(0, 4096), Access.REMOTE_READ);
        CachedRegion other = cache.get(at(8192, 4096), Access.REMOTE_READ);
        other.close();
        assertThat(cache.invalidate(memory.address() + 4095, 2)).isEqualTo(1);
        assertThat(held.region().isValid()).as("its rkey stops working at once").isFalse();
        assertThat(held.region().isDestroyed()).as("still held").isFalse();
        assertThat(cache.size()).isEqualTo(1);
        CachedRegion fresh = cache.get(at(0, 4096), Access.REMOTE_READ);
        assertThat(fresh.region()).isNotSameAs(held.region());
        held.close();
        assertThat(held.region().isDestroyed()).isTrue();
        fresh.close();
        assertThat(cache.stats().invalidations()).isEqualTo(1);
        cache.close();
    }

    @Test
    void aTrackedArenaInvalidatesItsRegionsWhenItCloses() {
        RegistrationCache cache = RegistrationCache.of(pd);
        Arena tracked = cache.track(Arena.ofShared());
        CachedRegion r = cache.get(tracked.allocate(4096), Access.REMOTE_READ);
        CachedRegion mine = cache.get(at(0, 4096), Access.REMOTE_READ);
        r.close();
        tracked.close();
        assertThat(r.region().isDestroyed()).isTrue();
        assertThat(cache.size()).isEqualTo(1);
        assertThat(mine.region().isValid()).isTrue();
        mine.close();
        cache.close();
    }

    @Test
    void aHitOnDeadMemoryIsAMiss() {
        RegistrationCache cache = RegistrationCache.of(pd);
        Arena untracked = Arena.ofShared();
        MemorySegment seg = untracked.allocate(4096);
        cache.get(seg, Access.REMOTE_READ).close();
        untracked.close();
        Arena again = Arena.ofShared();
        MemorySegment reused = again.allocate(4096);
        CachedRegion r = cache.get(reused, Access.REMOTE_READ);
        assertThat(r.region().isValid()).isTrue();
        r.close();
        cache.close();
        again.close();
    }

    @Test
    void idleRegionsAreEvictedInClockOrderAndHeldOnesNever() {
        RegistrationCache cache = RegistrationCache.builder(pd).maxRegions(4).build();
        List<CachedRegion> held = new ArrayList<>();
        held.add(cache.get(at(0, 4096), Access.REMOTE_READ));
        for (int i = 1; i < 10; i++) {
            cache.get(at(i * 8192L, 4096), Access.REMOTE_READ).close();
        }
        assertThat(cache.size()).isLessThanOrEqualTo(4);
        assertThat(cache.stats().evictions()).isGreaterThanOrEqualTo(6);
        assertThat(held.getFirst().region().isValid()).as("a region in use is never evicted").isTrue();
        CachedRegion again = cache.get(at(0, 4096), Access.REMOTE_READ);
        assertThat(again.region()).as("still indexed").isSameAs(held.getFirst().region());
        again.close();
        held.getFirst().close();
        assertThat(pd.useCount()).isEqualTo(cache.size());
        RegistrationCache bytes = RegistrationCache.builder(pd).maxBytes(8192).build();
        for (int i = 0; i < 5; i++) {
            bytes.get(at(i * 8192L, 4096), Access.LOCAL_WRITE).close();
        }
        assertThat(bytes.stats().registeredBytes()).isLessThanOrEqualTo(8192);
        bytes.close();
        cache.close();
    }

    @Test
    void eachAcquisitionIsReleasedOnceAndADoubleReleaseNeverDropsAnotherHoldersReference() {
        RegistrationCache cache = RegistrationCache.of(pd);
        CachedRegion first = cache.get(at(0, 4096), Access.REMOTE_READ);
        CachedRegion second = cache.get(at(0, 4096), Access.REMOTE_READ); // another holder, a hit
        assertThat(second.region()).isSameAs(first.region());
        assertThat(second).as("each acquisition has its own handle").isNotSameAs(first);
        first.close();
        for (int i = 0; i < 3; i++) {
            assertThatThrownBy(first::close).isInstanceOf(RdmaException.class).hasMessageContaining("released twice");
        }
        // The second holder's region is still registered, indexed and usable, even once invalidated.
        assertThat(second.region().isValid()).isTrue();
        assertThat(cache.size()).isEqualTo(1);
        cache.invalidate(second.address(), 1);
        assertThat(second.region().isDestroyed()).as("the second holder still holds it").isFalse();
        assertThatThrownBy(first::close).isInstanceOf(RdmaException.class);
        assertThat(second.region().isDestroyed()).isFalse();
        second.close();
        assertThat(second.region().isDestroyed()).as("the last holder's release deregisters it").isTrue();
        assertThatThrownBy(second::close).isInstanceOf(RdmaException.class).hasMessageContaining("released twice");

        // A handle given back is handed out again only after the region's others: a stale release of
        // the old acquisition, right after the next get, is refused.
        CachedRegion a = cache.get(at(8192, 4096), Access.REMOTE_READ);
        a.close();
        CachedRegion b = cache.get(at(8192, 4096), Access.REMOTE_READ);
        assertThat(b).isNotSameAs(a);
        assertThatThrownBy(a::close).isInstanceOf(RdmaException.class);
        assertThat(b.isHeld()).isTrue();
        b.close();
        // One user getting and giving back in a loop cycles through the region's eight handles.
        java.util.Set<CachedRegion> seen = java.util.Collections.newSetFromMap(new java.util.IdentityHashMap<>());
        for (int i = 0; i < 20; i++) {
            CachedRegion c = cache.get(at(8192, 4096), Access.REMOTE_READ);
            assertThat(c.isHeld()).isTrue();
            seen.add(c);
            c.close();
            assertThat(c.isHeld()).isFalse();
        }
        assertThat(seen).as("handed out in rotation").hasSize(8);
        cache.close();
        assertThat(pd.useCount()).isZero();
    }

    /**
     * A held region that an overlapping registration pushed out of the index still covers memory
     * its users and their peers can reach: an invalidation of that memory must revoke it too. (The
     * API fuzz found it: before, only indexed regions were revoked, and the pushed-out one kept
     * working after invalidate returned.)
     */
    @Test
    void anInvalidationAlsoRevokesHeldRegionsThatAnOverlappingRegistrationPushedOutOfTheIndex() {
        RegistrationCache cache = RegistrationCache.of(pd);
        CachedRegion old = cache.get(at(0, 8192), Access.REMOTE_READ);
        CachedRegion wider = cache.get(at(4096, 8192), Access.REMOTE_READ); // overlaps: old leaves the index
        assertThat(wider.region()).isNotSameAs(old.region());
        assertThat(cache.size()).isEqualTo(1);
        assertThat(old.region().isValid()).as("pushed out but held: still usable").isTrue();
        assertThat(cache.invalidate(at(0, 100).address(), 100)).as("the pushed-out region counts").isEqualTo(1);
        assertThat(old.region().isValid()).as("revoked by the invalidation of its memory").isFalse();
        assertThat(wider.region().isValid()).as("does not overlap [0, 100)").isTrue();
        old.close();
        assertThat(old.region().isDestroyed()).isTrue();
        wider.close();
        // Pushed out, then released by its last holder: nothing is left to revoke.
        CachedRegion a = cache.get(at(64 * 4096, 4096), Access.REMOTE_READ);
        CachedRegion b = cache.get(at(64 * 4096 + 2048, 4096), Access.REMOTE_READ);
        a.close();
        assertThat(a.region().isDestroyed()).isTrue();
        assertThat(cache.invalidate(at(64 * 4096, 4096).address(), 4096)).as("b only: a is gone").isEqualTo(1);
        b.close();
        cache.close();
        assertThat(pd.useCount()).isZero();
    }

    /** A hit refused because the region's memory died gives its lease back with its reference. */
    @Test
    void aRefusedHitGivesItsLeaseBack() {
        RegistrationCache cache = RegistrationCache.of(pd);
        Arena doomed = Arena.ofShared();
        MemorySegment seg = doomed.allocate(4096, 4096);
        cache.get(seg, Access.REMOTE_READ).close();
        CacheEntry entry = cache.indexed().getFirst();
        doomed.close(); // freed without telling the cache: hits on it are refused
        for (int i = 0; i < 3 * CacheEntry.LEASES; i++) {
            assertThatThrownBy(() -> cache.get(seg, Access.REMOTE_READ)).isInstanceOf(RdmaException.class);
            assertThat(entry.leases()).as("no lease kept by a refused hit").isZero();
        }
        cache.close();
        assertThat(pd.useCount()).isZero();
    }

    @Test
    void moreHoldersThanPooledHandlesEachReleaseOnce() {
        RegistrationCache cache = RegistrationCache.of(pd);
        List<CachedRegion> holders = new ArrayList<>();
        for (int i = 0; i < 20; i++) {
            holders.add(cache.get(at(0, 4096), Access.REMOTE_READ));
        }
        assertThat(new java.util.HashSet<>(holders.stream().map(System::identityHashCode).toList())).hasSize(20);
        for (CachedRegion h : holders) {
            h.close();
            assertThatThrownBy(h::close).isInstanceOf(RdmaException.class);
        }
        assertThat(holders.getFirst().region().isValid()).isTrue();
        cache.close();
        assertThat(pd.useCount()).isZero();
    }

    @Test
    void misuseIsRefused() {
        RegistrationCache cache = RegistrationCache.of(pd);
        RegistrationCache other = RegistrationCache.of(pd);
        CachedRegion r = cache.get(at(0, 64), Access.REMOTE_READ);
        assertThatThrownBy(() -> other.put(r)).isInstanceOf(RdmaException.class).hasMessageContaining("another cache");
        r.close();
        assertThatThrownBy(r::close).isInstanceOf(RdmaException.class).hasMessageContaining("released twice")
                .satisfies(e -> assertThat(((RdmaException) e).errno()).isEqualTo(Errno.EINVAL));
        assertThatThrownBy(() -> cache.put(r)).isInstanceOf(RdmaException.class).hasMessageContaining("released twice");
        assertThat(r.region().isValid()).as("the second release changed nothing").isTrue();
        assertThat(cache.size()).isEqualTo(1);
        assertThatThrownBy(() -> cache.get(MemorySegment.ofArray(new byte[8]), Access.REMOTE_READ))
                .isInstanceOf(RdmaException.class).satisfies(e -> assertThat(((RdmaException) e).errno()).isEqualTo(Errno.EINVAL));
        assertThatThrownBy(() -> RegistrationCache.builder(pd).maxRegions(0).build()).isInstanceOf(RdmaException.class);
        cache.close();
        other.close();
        assertThatThrownBy(() -> cache.get(at(0, 64), Access.REMOTE_READ)).isInstanceOf(RdmaException.class)
                .hasMessageContaining("after close");
    }

    @Test
    void millionsOfMapUnmapCyclesKeepNoState() {
        RegistrationCache cache = RegistrationCache.builder(pd).maxRegions(16).build();
        for (int i = 0; i < 200_000; i++) {
            long off = (i % 64) * 4096L;
            CachedRegion r = cache.get(at(off, 4096), Access.REMOTE_READ);
            r.close();
            if (i % 3 == 0) {
                cache.invalidate(memory.address() + off, 4096);
            }
        }
        assertThat(cache.size()).isLessThanOrEqualTo(16);
        assertThat(pd.useCount()).isEqualTo(cache.size());
        assertThat(device.resources().count()).isEqualTo(1 + cache.size());
        cache.close();
    }
}
