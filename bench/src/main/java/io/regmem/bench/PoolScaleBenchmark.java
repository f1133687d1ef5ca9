package io.regmem.bench;

import io.regmem.core.BufferPool;
import io.regmem.core.PooledBuffer;
import io.regmem.core.SafetyMode;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * A pool at storage scale: the first carve of {@link #SLOTS} 4 KiB buffers from a fresh CHECKED pool
 * (every allocation takes a slot never used before), and the free of all of them, each timed per
 * buffer on one thread; then the heap the pool holds per live buffer and per idle slot, measured
 * after full GCs and printed ({@code PoolScaleBenchmark heap: ...}). 4e6 buffers are 16 GiB of mapped,
 * untouched memory.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.SingleShotTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 1)
@Measurement(iterations = 3)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "-Xms2g", "-Xmx2g"})
public class PoolScaleBenchmark {
    /** Buffers per iteration. */
    public static final int SLOTS = 4_000_000;

    /** The safety mode. */
    @Param({"CHECKED"})
    public SafetyMode mode;

    private final PooledBuffer[] held = new PooledBuffer[SLOTS];
    private BufferPool pool;

    /** A fresh pool per iteration, so that every allocation is a first carve. */
    @Setup(Level.Iteration)
    public void setUp() {
        pool = BufferPool.builder().name("scale").safetyMode(mode).maxBytes(20L << 30).build();
    }

    /** Frees what the iteration left and closes the pool; the first time, measures the heap. */
    @TearDown(Level.Iteration)
    public void tearDown() {
        for (int i = 0; i < SLOTS; i++) {
            if (held[i] != null) {
                held[i].close();
                held[i] = null;
            }
        }
        pool.close();
    }

    /** Allocates every buffer: each a slot never used before. */
    @Benchmark
    @OperationsPerInvocation(SLOTS)
    public void firstCarveAllocate() {
        for (int i = 0; i < SLOTS; i++) {
            held[i] = pool.allocate(4096);
        }
    }

    /** Allocates every buffer, then frees them all (the pair per buffer: first carve and first free). */
    @Benchmark
    @OperationsPerInvocation(SLOTS)
    public void firstCarveAllocateAndFree() {
        for (int i = 0; i < SLOTS; i++) {
            held[i] = pool.allocate(4096);
        }
        for (int i = 0; i < SLOTS; i++) {
            held[i].close();
            held[i] = null;
        }
    }

    /** The heap per live buffer and per idle slot at {@link #SLOTS} slots, printed once per fork. */
    @Benchmark
    @OperationsPerInvocation(SLOTS)
    public void heapPerSlot() {
        pool.allocate(4096).close();
        long base = heap();
        for (int i = 0; i < SLOTS; i++) {
            held[i] = pool.allocate(4096);
        }
        long live = heap();
        for (int i = 0; i < SLOTS; i++) {
            held[i].close();
            held[i] = null;
        }
        long idle = heap();
        System.out.printf("PoolScaleBenchmark heap: %,d slots of 4 KiB, %s: %.1f B per live buffer, %.2f B per idle "
                + "slot (first carve, slab share in both)%n", SLOTS, mode, (double) (live - idle) / SLOTS,
                (double) (idle - base) / SLOTS);
    }

    private static long heap() {
        Runtime rt = Runtime.getRuntime();
        long best = Long.MAX_VALUE;
        for (int i = 0; i < 4; i++) {
            System.gc();
            best = Math.min(best, rt.totalMemory() - rt.freeMemory());
        }
        return best;
    }
}
