package io.regmem.registration.cache;

import io.regmem.registration.testkit.Providers;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.Access;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AddLifecycleHook;

/**
 * Random chains of get, put and invalidate against a naive model (the list of what each user
 * holds): every answer covers its request with at least its rights; indexed regions never overlap
 * each other nor a range invalidated after they were indexed; the PD counts exactly the regions
 * that are indexed or held; and at the end nothing is left registered.
 */
@AddLifecycleHook(NoLeaks.class)
class RegistrationCacheModelTest {
    private static final int PAGES = 64;
    private static final long PAGE = 4096;

    /** One action: kind 0 get, 1 put, 2 invalidate; a page range; rights; which held region. */
    record Action(int kind, int firstPage, int pages, int rights, int pick) {
    }

    @Provide
    Arbitrary<List<Action>> actions() {
        Arbitrary<Action> a = Arbitraries.integers().between(0, 9).flatMap(k -> Arbitraries.integers().between(0, PAGES - 1)
                .flatMap(first -> Arbitraries.integers().between(1, 6).flatMap(n -> Arbitraries.of(
                        Access.mask(Access.REMOTE_READ), Access.mask(Access.LOCAL_WRITE, Access.REMOTE_WRITE),
                        Access.mask(Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ))
                        .flatMap(rights -> Arbitraries.integers().between(0, 1000)
                                .map(pick -> new Action(k < 5 ? 0 : k < 8 ? 1 : 2, first, n, rights, pick))))));
        return a.list().ofMinSize(1).ofMaxSize(80);
    }

    @Property(tries = 120)
    void cacheAgreesWithTheModel(@ForAll("actions") List<Action> actions, @ForAll boolean merge, @ForAll boolean hints) {
        try (Arena arena = Arena.ofShared(); RdmaDevice device = Providers.open()) {
            MemorySegment memory = arena.allocate((PAGES + 8) * PAGE, PAGE);
            ProtectionDomain pd = device.allocPd();
            RegistrationCache cache = RegistrationCache.builder(pd).merge(merge).hints(hints).maxRegions(12).build();
            List<CachedRegion> held = new ArrayList<>();
            for (Action a : actions) {
                long off = a.firstPage() * PAGE;
                long len = a.pages() * PAGE;
                switch (a.kind()) {
                    case 0 -> {
                        MemorySegment want = memory.asSlice(off, len);
                        CachedRegion r = cache.get(want, a.rights());
                        assertThat(r.address()).isLessThanOrEqualTo(want.address());
                        assertThat(r.address() + r.length()).isGreaterThanOrEqualTo(want.address() + len);
                        assertThat(r.access() & a.rights()).isEqualTo(a.rights());
                        assertThat(r.region().isValid()).isTrue();
                        held.add(r);
                    }
                    case 1 -> {
                        if (!held.isEmpty()) {
                            held.remove(a.pick() % held.size()).close();
                        }
                    }
                    default -> {
                        long address = memory.address() + off;
                        cache.invalidate(address, len);
                        for (CacheEntry r : cache.indexed()) {
                            assertThat(r.end <= address || r.start >= address + len)
                                    .as("%s survived an invalidation it overlaps", r).isTrue();
                        }
                    }
                }
                checkIndex(cache, held, pd);
            }
            held.forEach(CachedRegion::close);
            cache.close();
            assertThat(pd.useCount()).isZero();
            pd.close();
        }
    }

    private static void checkIndex(RegistrationCache cache, List<CachedRegion> held, ProtectionDomain pd) {
        List<CacheEntry> indexed = cache.indexed();
        for (int i = 1; i < indexed.size(); i++) {
            CacheEntry prev = indexed.get(i - 1);
            assertThat(prev.end).as("indexed regions overlap").isLessThanOrEqualTo(indexed.get(i).start);
        }
        IdentityHashMap<CacheEntry, Boolean> live = new IdentityHashMap<>();
        indexed.forEach(r -> live.put(r, true));
        held.forEach(r -> live.put(r.entry, true));
        for (CacheEntry r : live.keySet()) {
            assertThat(r.region.isDestroyed()).as("%s is indexed or held but deregistered", r).isFalse();
        }
        assertThat(pd.useCount()).as("registered regions = indexed or held").isEqualTo(live.size());
    }
}
