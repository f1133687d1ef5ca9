package io.regmem.bench;

import io.regmem.cli.SoftPair;
import io.regmem.registration.Access;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.Opcode;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Map;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * One signaled RDMA WRITE posted on a soft QP and its completion polled, beside
 * {@link MemorySegment#copy} of the same bytes between the same two buffers: the soft provider's
 * overhead over the copy it performs. Run with {@code -prof gc}: the WRITE path must show 0 B/op.
 */
@State(Scope.Thread)
public class SoftWriteBenchmark extends BenchDefaults {

    /** Bytes per WRITE. */
    @Param({"64", "65536", "1048576"})
    public int size;

    private Arena arena;
    private MemorySegment src;
    private MemorySegment dst;
    private SoftPair pair;
    private QueuePair qpA;
    private MemoryRegion local;
    private MemoryRegion remote;
    private final WorkRequest wr = new WorkRequest(1);
    private final WorkCompletion[] wcs = {new WorkCompletion()};

    /** Two connected soft devices and 1 MiB registered at each end. */
    @Setup(Level.Trial)
    public void setUp() {
        arena = Arena.ofShared();
        src = arena.allocate(1 << 20, 4096);
        dst = arena.allocate(1 << 20, 4096);
        src.fill((byte) 7);
        pair = new SoftPair(Map.of(), 64, new QpInitAttributes());
        qpA = pair.qpA;
        local = pair.pdA.register(src, Access.LOCAL_WRITE);
        remote = pair.pdB.register(dst, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        wr.wrId(1).opcode(Opcode.RDMA_WRITE).signaled(true).addSge(src.address(), size, local.lkey())
                .remote(dst.address(), remote.rkey());
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

    /** Post one WRITE and poll its completion. */
    @Benchmark
    public long softRdmaWrite() {
        qpA.postSend(wr);
        while (pair.cqA.poll(wcs) == 0) {
            Thread.onSpinWait();
        }
        if (wcs[0].status() != WcStatus.SUCCESS) {
            throw new IllegalStateException("WRITE failed: " + wcs[0]);
        }
        return wcs[0].byteLen();
    }

    /** The copy the WRITE performs, alone. */
    @Benchmark
    public MemorySegment segmentCopy() {
        MemorySegment.copy(src, 0, dst, 0, size);
        return dst;
    }
}
