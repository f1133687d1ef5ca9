package io.regmem.bench;

import io.regmem.cli.SoftPair;
import io.regmem.registration.Access;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.Opcode;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Threads;

/**
 * Independent connections in parallel: every benchmark thread drives a connected soft pair of its
 * own (two devices, a QP each, 4 KiB registered at each end) with one signaled 4 KiB RDMA WRITE and
 * the poll of its completion. {@code onePair} runs one thread, {@code twoPairs} two: with no lock
 * shared between connections, two pairs on this two-core machine should reach well over one pair's
 * throughput (the target is 1.6x). Throughput in operations per microsecond, summed over threads.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
public class SoftScalingBenchmark extends BenchDefaults {
    private static final int SIZE = 4096;

    private Arena arena;
    private SoftPair pair;
    private MemoryRegion local;
    private MemoryRegion remote;
    private final WorkRequest wr = new WorkRequest(1);
    private final WorkCompletion[] wcs = {new WorkCompletion()};

    /** This thread's own pair; the remote key is exchanged once. */
    @Setup(Level.Trial)
    public void setUp() {
        arena = Arena.ofShared();
        MemorySegment src = arena.allocate(SIZE, 4096);
        MemorySegment dst = arena.allocate(SIZE, 4096);
        src.fill((byte) 7);
        pair = new SoftPair(Map.of(), 64, new QpInitAttributes());
        local = pair.pdA.register(src, Access.LOCAL_WRITE);
        remote = pair.pdB.register(dst, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        int key = pair.qpA.importRemoteKey(remote.exportRemoteKey());
        wr.wrId(1).opcode(Opcode.RDMA_WRITE).signaled(true).addSge(src.address(), SIZE, local.lkey())
                .remote(dst.address(), key);
    }

    /** Tears down in the mandatory order. */
    @TearDown(Level.Trial)
    public void tearDown() {
        pair.disconnect();
        local.close();
        remote.close();
        pair.close();
        arena.close();
    }

    private long writeAndPoll() {
        pair.qpA.postSend(wr);
        while (pair.cqA.poll(wcs) == 0) {
            Thread.onSpinWait();
        }
        if (wcs[0].status() != WcStatus.SUCCESS) {
            throw new IllegalStateException("WRITE failed: " + wcs[0]);
        }
        return wcs[0].byteLen();
    }

    /** One pair, one thread. */
    @Benchmark
    @Threads(1)
    public long onePair() {
        return writeAndPoll();
    }

    /** Two pairs, each on its own thread. */
    @Benchmark
    @Threads(2)
    public long twoPairs() {
        return writeAndPoll();
    }
}
