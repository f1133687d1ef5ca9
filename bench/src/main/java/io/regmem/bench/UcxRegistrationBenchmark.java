package io.regmem.bench;

import io.regmem.registration.Access;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.cache.CachedRegion;
import io.regmem.registration.cache.RegistrationCache;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.SplittableRandom;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * What the registration cache saves on UCX: registering and deregistering a region of Java memory
 * ({@code ucp_mem_map} and the remote key's {@code ucp_rkey_pack}, then {@code ucp_mem_unmap} after
 * the grace period), over 1,024 different regions in turn, beside a cache hit on the same device
 * among 1,024 cached regions (find, take a reference, read the key, give it back), in one run; and
 * the floor of any hit that counts its holders: a reference taken and given back on one word with
 * the compare-and-set pattern a hit uses, and nothing else (no lookup, no checks).
 */
@State(Scope.Benchmark)
public class UcxRegistrationBenchmark extends BenchDefaults {
    private static final int REGIONS = 1024;
    private static final int PICKS = 1 << 16;
    private static final VarHandle REFS;

    static {
        try {
            REFS = MethodHandles.lookup().findVarHandle(UcxRegistrationBenchmark.class, "refs", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** The floor's reference word. */
    private volatile long refs = 1;

    /** Bytes per region. */
    @Param({"4096", "1048576"})
    public int size;

    private Arena arena;
    private RdmaDevice device;
    private ProtectionDomain pd;
    private RegistrationCache cache;
    private MemorySegment[] slices;
    private int[] picks;
    private int next;

    /** 1,024 regions of {@code size} bytes, a page apart, all cached. */
    @Setup(Level.Trial)
    public void setUp() {
        arena = Arena.ofShared();
        device = RdmaDevice.open("ucx");
        pd = device.allocPd();
        long stride = size + 4096L;
        MemorySegment memory = arena.allocate(stride * REGIONS, 4096);
        slices = new MemorySegment[REGIONS];
        cache = RegistrationCache.builder(pd).maxRegions(2 * REGIONS).build();
        for (int i = 0; i < REGIONS; i++) {
            slices[i] = memory.asSlice(i * stride, size);
            cache.get(slices[i], Access.LOCAL_WRITE, Access.REMOTE_READ, Access.REMOTE_WRITE).close();
        }
        SplittableRandom rnd = new SplittableRandom(11);
        picks = new int[PICKS];
        for (int i = 0; i < PICKS; i++) {
            picks[i] = rnd.nextInt(REGIONS);
        }
    }

    /** Releases everything. */
    @TearDown(Level.Trial)
    public void tearDown() {
        cache.close();
        pd.close();
        device.close();
        arena.close();
    }

    /** A registration without the cache: {@code ucp_mem_map} + key packing, then deregistration. */
    @Benchmark
    public int registerAndDeregister() {
        MemoryRegion mr = pd.register(slices[next++ & (REGIONS - 1)], Access.LOCAL_WRITE, Access.REMOTE_READ, Access.REMOTE_WRITE);
        int key = mr.rkey();
        mr.close();
        return key;
    }

    /** A hit on the same device: the region is registered already. */
    @Benchmark
    public int cacheHit() {
        CachedRegion r = cache.get(slices[picks[next++ & (PICKS - 1)]], Access.mask(Access.REMOTE_READ));
        int key = r.rkey();
        r.close();
        return key;
    }

    /** The floor of a counted hit: one compare-and-set taking a reference, one giving it back. */
    @Benchmark
    public long referenceFloor() {
        long r;
        do {
            r = (long) REFS.getVolatile(this);
        } while (!REFS.compareAndSet(this, r, r + 1));
        do {
            r = (long) REFS.getVolatile(this);
        } while (!REFS.compareAndSet(this, r, r - 1));
        return r;
    }
}
