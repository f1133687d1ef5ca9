package io.regmem.bench;

import io.regmem.core.BufferPool;
import io.regmem.core.PooledBuffer;
import io.regmem.registration.Access;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.PoolRegistration;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.cache.CachedRegion;
import io.regmem.registration.cache.RegistrationCache;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicInteger;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Threads;

/**
 * The registration cache: a hit among 10,000 cached regions (by address and length, one thread
 * and both cores at once), a key through a registered pool's buffer, and a miss, beside the
 * provider's own uncached registration in the same run.
 */
@State(Scope.Benchmark)
public class RegistrationCacheBenchmark extends BenchDefaults {
    private static final int REGIONS = 10_000;
    private static final int PICKS = 1 << 16;
    private static final int READ = Access.mask(Access.REMOTE_READ);

    private Arena arena;
    private RdmaDevice device;
    private ProtectionDomain pd;
    private RegistrationCache cache;
    /** The same regions in a cache without hints: every hit searches the index. */
    private RegistrationCache searching;
    private MemorySegment[] slices;
    private int[] picks;
    private int[] hotPicks;
    private MemorySegment fresh;
    private BufferPool pool;
    private PoolRegistration poolRegistration;
    private PooledBuffer buffer;
    private RegistrationCache evicting;
    private MemorySegment[] cold;
    private int coldNext;
    /** {@link #uncachedRegistrationFifo}'s registrations, oldest first from {@link #fifoNext}. */
    private MemoryRegion[] fifo;
    private MemorySegment[] fifoMemory;
    private int fifoNext;

    /** 10,000 regions of 4 KiB, 4 KiB apart (so none merge), all cached and idle. */
    @Setup(Level.Trial)
    public void setUp() {
        arena = Arena.ofShared();
        MemorySegment memory = arena.allocate(2L * REGIONS * 4096, 4096);
        device = RdmaDevice.open("soft");
        pd = device.allocPd();
        cache = RegistrationCache.builder(pd).maxRegions(2 * REGIONS).build();
        searching = RegistrationCache.builder(pd).maxRegions(2 * REGIONS).hints(false).build();
        slices = new MemorySegment[REGIONS];
        for (int i = 0; i < REGIONS; i++) {
            slices[i] = memory.asSlice(2L * i * 4096, 4096);
            cache.get(slices[i], Access.REMOTE_READ).close();
            searching.get(slices[i], Access.REMOTE_READ).close();
        }
        SplittableRandom rnd = new SplittableRandom(7);
        picks = new int[PICKS];
        for (int i = 0; i < PICKS; i++) {
            picks[i] = rnd.nextInt(REGIONS);
        }
        // 256 regions spread over the whole index (every 39th), so the index is as deep as with
        // uniform picks, but the regions a hit touches stay in the CPU caches.
        hotPicks = new int[PICKS];
        for (int i = 0; i < PICKS; i++) {
            hotPicks[i] = rnd.nextInt(256) * (REGIONS / 256);
        }
        fresh = arena.allocate(4096, 4096);
        pool = BufferPool.builder().name("bench-cache").build();
        poolRegistration = pd.register(pool, Access.LOCAL_WRITE, Access.REMOTE_READ);
        buffer = pool.allocate(4096);
        // A full cache of REGIONS idle regions walked in order over 2 x REGIONS slices: every get
        // misses (its slice was evicted REGIONS gets ago) and evicts exactly one idle region.
        evicting = RegistrationCache.builder(pd).maxRegions(REGIONS).build();
        MemorySegment coldMemory = arena.allocate(4L * REGIONS * 4096, 4096);
        cold = new MemorySegment[2 * REGIONS];
        for (int i = 0; i < cold.length; i++) {
            cold[i] = coldMemory.asSlice(2L * i * 4096, 4096);
        }
        for (int i = 0; i < REGIONS; i++) {
            pureMissEvicting();
        }
        // The provider work of a pure miss, without the cache: 10,000 live registrations over
        // other memory; each op registers the next slice and deregisters the oldest registration.
        MemorySegment fifoBlock = arena.allocate(4L * REGIONS * 4096, 4096);
        fifoMemory = new MemorySegment[2 * REGIONS];
        for (int i = 0; i < fifoMemory.length; i++) {
            fifoMemory[i] = fifoBlock.asSlice(2L * i * 4096, 4096);
        }
        fifo = new MemoryRegion[REGIONS];
        for (int i = 0; i < REGIONS; i++) {
            fifo[i] = pd.register(fifoMemory[i], Access.REMOTE_READ);
        }
    }

    /** Releases everything. */
    @TearDown(Level.Trial)
    public void tearDown() {
        for (var mr : fifo) {
            mr.close();
        }
        buffer.close();
        poolRegistration.close();
        pool.close();
        cache.close();
        searching.close();
        evicting.close();
        pd.close();
        device.close();
        arena.close();
    }

    /** Per-thread position in the pick sequence. */
    @State(Scope.Thread)
    public static class Cursor {
        private static final AtomicInteger THREADS = new AtomicInteger();
        private final int thread = THREADS.getAndIncrement();
        /** Threads start at different points of the pick sequence. */
        int next = thread * (PICKS / 2 + 17);
        /** For the two-thread benchmarks: this thread's own regions are those of this parity. */
        final int parity = thread & 1;
    }

    /** One hit: get the region covering slice {@code i}, read its key, give it back. */
    private int hit(RegistrationCache in, int i) {
        CachedRegion r = in.get(slices[i], READ);
        int key = r.lkey();
        r.close();
        return key;
    }

    /**
     * A hit: find the covering region among 10,000 (through the page's hint, which a program that
     * reuses its buffers finds filled), take and give back a reference.
     */
    @Benchmark
    public int cacheHit(Cursor c) {
        return hit(cache, picks[c.next++ & (PICKS - 1)]);
    }

    /**
     * A hit among the same 10,000 regions, picking uniformly among 256 of them spread over the
     * whole index: the same search depth, but the entries stay in the CPU caches. The gap to
     * {@link #cacheHit} is memory latency, not index work.
     */
    @Benchmark
    public int cacheHitHotSet(Cursor c) {
        return hit(cache, hotPicks[c.next++ & (PICKS - 1)]);
    }

    /** {@link #cacheHit} without hints: a two-level binary search over the 10,000 regions every time. */
    @Benchmark
    public int cacheHitSearch(Cursor c) {
        return hit(searching, picks[c.next++ & (PICKS - 1)]);
    }

    /** {@link #cacheHitHotSet} without hints. */
    @Benchmark
    public int cacheHitHotSetSearch(Cursor c) {
        return hit(searching, hotPicks[c.next++ & (PICKS - 1)]);
    }

    /**
     * {@link #cacheHit} on both cores at once, each thread on its own half of the regions (even or
     * odd), as threads with their own buffers are: what is shared is the index, read-only.
     */
    @Benchmark
    @Threads(2)
    public int cacheHitTwoThreads(Cursor c) {
        return hit(cache, (picks[c.next++ & (PICKS - 1)] & ~1) | c.parity);
    }

    /** {@link #cacheHitHotSet} on both cores, each thread on its own 128 of the 256 regions. */
    @Benchmark
    @Threads(2)
    public int cacheHitHotSetTwoThreads(Cursor c) {
        return hit(cache, (hotPicks[c.next++ & (PICKS - 1)] & ~1) | c.parity);
    }

    /**
     * Both threads on the same 256 regions: every hit's reference count may sit in the other
     * core's cache, so this measures moving that line between cores (as any shared reference count
     * would), not the index.
     */
    @Benchmark
    @Threads(2)
    public int cacheHitHotSetSharedTwoThreads(Cursor c) {
        return cacheHitHotSet(c);
    }

    /** A pooled buffer's key through its registered pool: a field read, no lookup. */
    @Benchmark
    public int pooledBufferKey() {
        return poolRegistration.lkey(buffer);
    }

    /** A miss (register through the cache), then invalidate it again, with 10,000 regions cached. */
    @Benchmark
    public int cacheMissAndInvalidate() {
        CachedRegion r = cache.get(fresh, Access.mask(Access.REMOTE_READ));
        int key = r.lkey();
        r.close();
        cache.invalidate(fresh.address(), 4096);
        return key;
    }

    /**
     * A pure miss in steady state: the cache is full (10,000 idle regions), the asked memory is not
     * cached, so the get registers it, publishes it and evicts one idle region (deregistering it).
     * Its provider work is one registration plus one deregistration, the same as
     * {@link #uncachedRegistration()}; the difference is the cache's own overhead.
     */
    @Benchmark
    public int pureMissEvicting() {
        MemorySegment s = cold[coldNext];
        coldNext = coldNext + 1 == cold.length ? 0 : coldNext + 1;
        CachedRegion r = evicting.get(s, Access.mask(Access.REMOTE_READ));
        int key = r.lkey();
        r.close();
        return key;
    }

    /**
     * The provider's side of {@link #pureMissEvicting} alone: with 10,000 registrations live,
     * register fresh memory and deregister the oldest registration (cold, as an evicted region is).
     * {@code pureMissEvicting} minus this is the cache's own overhead on a miss.
     */
    @Benchmark
    public int uncachedRegistrationFifo() {
        int slot = fifoNext % REGIONS;
        MemorySegment s = fifoMemory[(fifoNext + REGIONS) % fifoMemory.length];
        fifoNext = fifoNext + 1 == fifoMemory.length ? 0 : fifoNext + 1;
        fifo[slot].close();
        var mr = pd.register(s, Access.REMOTE_READ);
        fifo[slot] = mr;
        return mr.lkey();
    }

    /** The provider's own registration and deregistration, uncached, of the same (warm) memory each time. */
    @Benchmark
    public int uncachedRegistration() {
        var mr = pd.register(fresh, Access.REMOTE_READ);
        int key = mr.lkey();
        mr.close();
        return key;
    }
}
