package io.regmem.registration.cache;

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
 * covers its request and is valid when handed out.
 */
class RegistrationCacheConcurrencyTest {

    @Test
    void afterInvalidateReturnsNoGetReturnsAnOldRegion() throws Exception {
        try (Arena arena = Arena.ofShared(); RdmaDevice device = RdmaDevice.open("soft")) {
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
            java.util.concurrent.ConcurrentHashMap<CachedRegion, Long> bornAt = new java.util.concurrent.ConcurrentHashMap<>();
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
                        Long first = bornAt.putIfAbsent(r, epoch[page].get());
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
