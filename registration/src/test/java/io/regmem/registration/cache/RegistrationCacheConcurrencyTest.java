package io.regmem.registration.cache;

import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.Providers;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.Access;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.RdmaDevice;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * Readers hit while another thread invalidates: once invalidate returns, no get returns a region
 * that overlaps the invalidated range and was registered before it; every region a reader gets
 * covers its request and is valid when handed out. Holders on both cores never share a handle, and
 * every release of a held acquisition is accepted (none was taken by another holder's release).
 */
@org.junit.jupiter.api.extension.ExtendWith(NoLeaks.class)
class RegistrationCacheConcurrencyTest {

    @Test
    void holdersOnBothCoresNeverShareAHandleAndEveryReleaseIsAccepted() throws Exception {
        try (Arena arena = Arena.ofShared(); RdmaDevice device = Providers.open()) {
            MemorySegment memory = arena.allocate(4 * 4096, 4096);
            ProtectionDomain pd = device.allocPd();
            RegistrationCache cache = RegistrationCache.of(pd);
            CachedRegion pin = cache.get(memory, Access.REMOTE_READ); // one region for everybody
            java.util.concurrent.ConcurrentHashMap<CachedRegion, Thread> owner = new java.util.concurrent.ConcurrentHashMap<>();
            AtomicReference<Throwable> failure = new AtomicReference<>();
            AtomicLong releases = new AtomicLong();
            int rounds = 200_000;
            Runnable holder = () -> {
                try {
                    CachedRegion[] mine = new CachedRegion[3];
                    for (int i = 0; i < rounds && failure.get() == null; i++) {
                        int n = 1 + (i % 3);
                        for (int k = 0; k < n; k++) {
                            mine[k] = cache.get(memory.asSlice(4096L * (k + 1), 100), Access.REMOTE_READ);
                            Thread was = owner.putIfAbsent(mine[k], Thread.currentThread());
                            if (was != null) {
                                throw new AssertionError(mine[k] + " handed to " + Thread.currentThread() + " while "
                                        + was + " holds it");
                            }
                        }
                        for (int k = 0; k < n; k++) {
                            owner.remove(mine[k]);
                            mine[k].close(); // every release of a held acquisition is accepted
                            releases.incrementAndGet();
                        }
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            };
            Thread a = new Thread(holder);
            Thread b = new Thread(holder);
            a.start();
            b.start();
            a.join();
            b.join();
            if (failure.get() != null) {
                throw new AssertionError(failure.get());
            }
            assertThat(releases.get()).isEqualTo(2 * countReleases(rounds));
            assertThat(pin.region().isValid()).isTrue();
            assertThat(cache.size()).isEqualTo(1);
            pin.close();
            cache.close();
            assertThat(pd.useCount()).isZero();
            pd.close();
        }
    }

    /** Releases one holder makes in {@code rounds} rounds of 1, 2, 3, 1, 2, 3, ... gets. */
    private static long countReleases(int rounds) {
        long n = 0;
        for (int i = 0; i < rounds; i++) {
            n += 1 + (i % 3);
        }
        return n;
    }

    @Test
    void afterInvalidateReturnsNoGetReturnsAnOldRegion() throws Exception {
        try (Arena arena = Arena.ofShared(); RdmaDevice device = Providers.open()) {
            MemorySegment memory = arena.allocate(64 * 4096, 4096);
            ProtectionDomain pd = device.allocPd();
            RegistrationCache cache = RegistrationCache.builder(pd).maxRegions(32).build();
            AtomicBoolean stop = new AtomicBoolean();
            AtomicReference<Throwable> failure = new AtomicReference<>();
            // epoch[page] = how many invalidations of that page have completed
            AtomicLong[] epoch = new AtomicLong[64];
            for (int i = 0; i < 64; i++) {
                epoch[i] = new AtomicLong();
            }
            java.util.concurrent.ConcurrentHashMap<io.regmem.registration.MemoryRegion, Long> bornAt = new java.util.concurrent.ConcurrentHashMap<>();
            AtomicLong readerGets = new AtomicLong();
            Runnable reader = () -> {
                try {
                    java.util.SplittableRandom rnd = new java.util.SplittableRandom(Thread.currentThread().threadId());
                    while (!stop.get()) {
                        int page = rnd.nextInt(64);
                        long seenEpoch = epoch[page].get();
                        CachedRegion r = cache.get(memory.asSlice(page * 4096L, 4096), Access.REMOTE_READ);
                        // R was indexed before its first get returned, so before that reader read `born`.
                        // Invalidation born + 1 may have raced with the insert, but invalidation born + 2
                        // began after it: a get that starts once that one returned must not see R.
                        Long first = bornAt.putIfAbsent(r.region(), epoch[page].get());
                        if (r.address() > memory.address() + page * 4096L || r.length() < 4096) {
                            throw new AssertionError("does not cover: " + r);
                        }
                        if (first != null && seenEpoch >= first + 2) {
                            throw new AssertionError(r + " first seen at epoch " + first + " was returned after "
                                    + "invalidation " + seenEpoch + " of page " + page + " had returned");
                        }
                        r.close();
                        readerGets.incrementAndGet();
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            };
            Thread r1 = new Thread(reader);
            Thread r2 = new Thread(reader);
            r1.start();
            r2.start();
            long deadline = System.nanoTime() + 5_000_000_000L;
            int round = 0;
            while ((readerGets.get() < 50_000 || round < 3000) && System.nanoTime() < deadline && failure.get() == null) {
                int page = round++ % 64;
                cache.invalidate(memory.address() + page * 4096L, 4096);
                epoch[page].incrementAndGet();
            }
            stop.set(true);
            r1.join();
            r2.join();
            if (failure.get() != null) {
                throw new AssertionError(failure.get());
            }
            assertThat(readerGets.get()).as("readers ran while invalidations happened").isGreaterThan(1000);
            cache.close();
            assertThat(pd.useCount()).isZero();
            pd.close();
        }
    }
}
