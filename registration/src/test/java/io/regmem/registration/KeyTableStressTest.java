package io.regmem.registration;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.Providers;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The key table under load: two threads register and deregister regions as fast as they can (so
 * slots are freed, reused and their generation bytes wrap), while a third looks up keys, new and
 * stale ones, lock-free. No key may ever resolve to a region it was not issued to, nor to a
 * region whose deregistration has returned.
 */
@ExtendWith(NoLeaks.class)
class KeyTableStressTest {

    /**
     * One slot in 256 would give a key whose top byte is a provider's handle tag (ucx reads such a
     * raw rkey as the handle of a key its QP imported, and refuses it): the table never issues one.
     */
    @Test
    void noIssuedKeyLooksLikeAProvidersImportedKeyHandle() {
        KeyTable table = new KeyTable();
        for (int i = 0; i < 20_000; i++) {
            int slot = table.allocate();
            int key = table.key(slot, table.generation(slot));
            assertThat(key >>> 24).as("key %08x of slot %d", key, slot)
                    .isNotEqualTo(io.regmem.registration.spi.ProviderQp.HANDLE_TAG_BYTE);
        }
    }

    @Test
    void lookupsNeverResolveAKeyToARegionItWasNotIssuedFor() throws Exception {
        try (Arena arena = Arena.ofShared(); RdmaDevice device = Providers.open()) {
            MemorySegment memory = arena.allocate(1 << 16, 4096);
            ProtectionDomain pd = device.allocPd();
            ConcurrentHashMap<MemoryRegion, Integer> issued = new ConcurrentHashMap<>(); // identity keys
            /** Recently issued keys for the looker to try: live, stale and reissued ones. */
            AtomicIntegerArray recent = new AtomicIntegerArray(1024);
            AtomicBoolean stop = new AtomicBoolean();
            AtomicReference<Throwable> failure = new AtomicReference<>();
            AtomicLong registrations = new AtomicLong();
            AtomicLong resolved = new AtomicLong();
            Runnable registrar = () -> {
                try {
                    java.util.SplittableRandom rnd = new java.util.SplittableRandom(Thread.currentThread().threadId());
                    MemoryRegion[] mine = new MemoryRegion[32];
                    while (!stop.get()) {
                        int k = rnd.nextInt(mine.length);
                        if (mine[k] != null) {
                            MemoryRegion gone = mine[k];
                            gone.close();
                            // Deregistered: from now on its key must not resolve to it.
                            int key = issued.remove(gone);
                            if (device.keys.lookup(key, false) == gone || device.keys.lookup(key, true) == gone) {
                                throw new AssertionError(gone + " still resolves by its key after close returned");
                            }
                        }
                        MemoryRegion mr = pd.register(memory.asSlice(rnd.nextInt(16) * 4096L, 4096), Access.LOCAL_WRITE,
                                Access.REMOTE_READ);
                        issued.put(mr, mr.lkey());
                        mine[k] = mr;
                        recent.set(rnd.nextInt(recent.length()), mr.lkey());
                        registrations.incrementAndGet();
                    }
                    for (MemoryRegion mr : mine) {
                        if (mr != null) {
                            issued.remove(mr);
                            mr.close();
                        }
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            };
            Runnable looker = () -> {
                try {
                    java.util.SplittableRandom rnd = new java.util.SplittableRandom(7);
                    while (!stop.get()) {
                        int key = recent.get(rnd.nextInt(recent.length()));
                        if (rnd.nextInt(8) == 0) {
                            key ^= 1 << rnd.nextInt(32); // a forged neighbour of a real key
                        }
                        MemoryRegion r = device.keys.lookup(key, rnd.nextBoolean());
                        if (r != null) {
                            resolved.incrementAndGet();
                            Integer was = issued.get(r);
                            // r may have been closed just now (then it is gone from the map): its own key
                            // is fixed, and that is the only key it may answer to.
                            if (r.lkey() != key || (was != null && was != key)) {
                                throw new AssertionError("key 0x" + Integer.toHexString(key) + " resolved to " + r
                                        + ", issued 0x" + Integer.toHexString(r.lkey()));
                            }
                        }
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            };
            Thread[] threads = {new Thread(registrar), new Thread(registrar), new Thread(looker)};
            for (Thread t : threads) {
                t.start();
            }
            long until = System.nanoTime() + 3_000_000_000L;
            while (System.nanoTime() < until && failure.get() == null && registrations.get() < 600_000) {
                Thread.sleep(10);
            }
            stop.set(true);
            for (Thread t : threads) {
                t.join();
            }
            if (failure.get() != null) {
                throw new AssertionError(failure.get());
            }
            assertThat(registrations.get()).as("slots were reused many times over").isGreaterThan(20_000);
            assertThat(resolved.get()).as("lookups that found live regions").isPositive();
            assertThat(issued).isEmpty();
            pd.close();
        }
    }
}
