package io.regmem.bench;

import io.regmem.registration.uring.IoCompletionHandler;
import io.regmem.registration.uring.IoRing;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * The ring's own cost per operation, with no device behind it: prepare 32 {@code NOP}s, submit them
 * with one system call, wait for and reap their completions. Shows the submit and reap path
 * allocating nothing ({@code -prof gc}: 0 B/op) and what one I/O costs the ring beyond the device.
 */
@State(Scope.Thread)
public class UringNopBenchmark extends BenchDefaults {
    private static final int BATCH = 32;
    private IoRing ring;
    private int reaped;
    private final IoCompletionHandler count = (userData, result) -> reaped++;

    @Setup(Level.Trial)
    public void setUp() {
        ring = IoRing.open(BATCH);
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        ring.close();
    }

    /** 32 NOPs prepared, submitted together, reaped: the time per NOP. */
    @Benchmark
    @OperationsPerInvocation(BATCH)
    public int nopBatch() {
        for (int i = 0; i < BATCH; i++) {
            ring.nop(i);
        }
        reaped = 0;
        while (reaped < BATCH) {
            ring.await(BATCH - reaped, count);
        }
        return reaped;
    }

    /** One NOP: prepare, submit and wait, reap (a round trip through the kernel). */
    @Benchmark
    public int nopOne() {
        ring.nop(1);
        reaped = 0;
        while (reaped == 0) {
            ring.await(1, count);
        }
        return reaped;
    }
}
