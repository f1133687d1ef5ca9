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
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.util.Map;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * An RDMA atomic's round trip on soft QPs (one signaled FETCH_AND_ADD posted and its completion
 * polled), beside an 8-byte RDMA WRITE's on the same QPs and the hardware atomic it performs
 * ({@code VarHandle.getAndAdd} on the registered segment). Run with {@code -prof gc}: 0 B/op.
 */
@State(Scope.Thread)
public class AtomicBenchmark extends BenchDefaults {
    private static final VarHandle LONG = ValueLayout.JAVA_LONG.varHandle();

    private Arena arena;
    private MemorySegment src;
    private MemorySegment dst;
    private SoftPair pair;
    private QueuePair qpA;
    private MemoryRegion local;
    private MemoryRegion remote;
    private final WorkRequest add = new WorkRequest(1);
    private final WorkRequest write = new WorkRequest(1);
    private final WorkCompletion[] wcs = {new WorkCompletion()};

    /** Two connected soft devices, 4 KiB registered at each end. */
    @Setup(Level.Trial)
    public void setUp() {
        arena = Arena.ofShared();
        src = arena.allocate(4096, 4096);
        dst = arena.allocate(4096, 4096);
        pair = new SoftPair(Map.of(), 64, new QpInitAttributes());
        qpA = pair.qpA;
        local = pair.pdA.register(src, Access.LOCAL_WRITE);
        remote = pair.pdB.register(dst, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_ATOMIC);
        add.wrId(1).opcode(Opcode.ATOMIC_FETCH_AND_ADD).signaled(true).atomic(1, 0).addSge(src.address(), 8, local.lkey())
                .remote(dst.address(), remote.rkey());
        write.wrId(2).opcode(Opcode.RDMA_WRITE).signaled(true).addSge(src.address() + 64, 8, local.lkey())
                .remote(dst.address() + 64, remote.rkey());
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

    private long roundTrip(WorkRequest wr) {
        qpA.postSend(wr);
        while (pair.cqA.poll(wcs) == 0) {
            Thread.onSpinWait();
        }
        if (wcs[0].status() != WcStatus.SUCCESS) {
            throw new IllegalStateException(wr.opcode() + " failed: " + wcs[0]);
        }
        return wcs[0].byteLen();
    }

    /** Post one FETCH_AND_ADD and poll its completion. */
    @Benchmark
    public long softFetchAndAdd() {
        return roundTrip(add);
    }

    /** Post one 8-byte WRITE and poll its completion. */
    @Benchmark
    public long softWrite8() {
        return roundTrip(write);
    }

    /** The atomic the FETCH_AND_ADD performs, alone. */
    @Benchmark
    public long varHandleGetAndAdd() {
        return (long) LONG.getAndAdd(dst, 128L, 1L);
    }
}
