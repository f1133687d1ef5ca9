package io.regmem.bench;

import io.regmem.cli.FlightRecording;
import io.regmem.core.BufferPool;
import io.regmem.core.PooledBuffer;
import io.regmem.registration.Access;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.cache.CachedRegion;
import io.regmem.registration.cache.RegistrationCache;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import jdk.jfr.Configuration;
import jdk.jfr.Recording;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * What regmem's JFR events cost on the hot paths: 4 KiB allocate + write + free and a
 * registration-cache hit, with no recording ({@code none}), with JFR's default recording running and
 * regmem's events disabled as they are by default ({@code default}), and with that recording plus
 * every regmem event enabled ({@code regmem}). Neither path commits an event, so the three should
 * agree within noise.
 */
@State(Scope.Benchmark)
public class FlightRecorderBenchmark extends BenchDefaults {
    @Param({"none", "default", "regmem"})
    public String recording;

    private Recording jfr;
    private BufferPool pool;
    private Arena arena;
    private RdmaDevice device;
    private ProtectionDomain pd;
    private RegistrationCache cache;
    private MemorySegment cached;

    @Setup(Level.Trial)
    public void setUp() throws Exception {
        if (!recording.equals("none")) {
            jfr = new Recording(Configuration.getConfiguration("default"));
            if (recording.equals("regmem")) {
                for (String name : FlightRecording.EVENTS) {
                    jfr.enable(name).withThreshold(Duration.ZERO);
                }
            }
            jfr.setToDisk(false);
            jfr.setMaxSize(64L << 20);
            jfr.start();
        }
        pool = BufferPool.builder().name("bench-jfr").build();
        arena = Arena.ofShared();
        device = RdmaDevice.open("soft");
        pd = device.allocPd();
        cache = RegistrationCache.builder(pd).build();
        cached = arena.allocate(4096, 4096);
        cache.get(cached, Access.REMOTE_READ).close();
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        cache.close();
        pd.close();
        device.close();
        arena.close();
        pool.close();
        if (jfr != null) {
            jfr.close();
        }
    }

    /** Allocate 4 KiB, write 8 bytes, free: the allocator's hot path. */
    @Benchmark
    public long allocateWriteFree() {
        PooledBuffer b = pool.allocate(4096);
        b.segment().set(ValueLayout.JAVA_LONG, 0, 42L);
        long a = b.address();
        b.close();
        return a;
    }

    /** A registration-cache hit and its release. */
    @Benchmark
    public int cacheHit() {
        CachedRegion r = cache.get(cached, Access.REMOTE_READ);
        int key = r.lkey();
        r.close();
        return key;
    }
}
