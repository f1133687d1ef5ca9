package io.regmem.bench;

import io.regmem.core.BufferPool;
import io.regmem.core.PooledBuffer;
import io.regmem.registration.Access;
import io.regmem.registration.PoolRegistration;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.cache.CachedRegion;
import io.regmem.registration.cache.RegistrationCache;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.SplittableRandom;
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

    private Arena arena;
    private RdmaDevice device;
    private ProtectionDomain pd;
    private RegistrationCache cache;
    private MemorySegment[] slices;
    private int[] picks;
    private MemorySegment fresh;
    private BufferPool pool;
    private PoolRegistration poolRegistration;
    private PooledBuffer buffer;

    /** 10,000 regions of 4 KiB, 4 KiB apart (so none merge), all cached and idle. */
    @Setup(Level.Trial)
    public void setUp() {
        arena = Arena.ofShared();
        MemorySegment memory = arena.allocate(2L * REGIONS * 4096, 4096);
        device = RdmaDevice.open("soft");
        pd = device.allocPd();
        cache = RegistrationCache.builder(pd).maxRegions(2 * REGIONS).build();
        slices = new MemorySegment[REGIONS];
        for (int i = 0; i < REGIONS; i++) {
            slices[i] = memory.asSlice(2L * i * 4096, 4096);
            cache.get(slices[i], Access.REMOTE_READ).close();
        }
        SplittableRandom rnd = new SplittableRandom(7);
        picks = new int[PICKS];
        for (int i = 0; i < PICKS; i++) {
            picks[i] = rnd.nextInt(REGIONS);
        }
        fresh = arena.allocate(4096, 4096);
        pool = BufferPool.builder().name("bench-cache").build();
        poolRegistration = pd.register(pool, Access.LOCAL_WRITE, Access.REMOTE_READ);
        buffer = pool.allocate(4096);
    }

    /** Releases everything. */
    @TearDown(Level.Trial)
    public void tearDown() {
        buffer.close();
        poolRegistration.close();
        pool.close();
        cache.close();
        pd.close();
        device.close();
        arena.close();
    }

    /** Per-thread position in the pick sequence. */
    @State(Scope.Thread)
    public static class Cursor {
        int next;
    }

    /** A hit: find the covering region among 10,000, take and give back a reference. */
    @Benchmark
    public int cacheHit(Cursor c) {
        CachedRegion r = cache.get(slices[picks[c.next++ & (PICKS - 1)]], Access.mask(Access.REMOTE_READ));
        int key = r.lkey();
        r.close();
        return key;
    }

    /** The same, on both cores at once. */
    @Benchmark
    @Threads(2)
    public int cacheHitTwoThreads(Cursor c) {
        return cacheHit(c);
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

    /** The provider's own registration and deregistration, uncached. */
    @Benchmark
    public int uncachedRegistration() {
        var mr = pd.register(fresh, Access.REMOTE_READ);
        int key = mr.lkey();
        mr.close();
        return key;
    }
}
