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
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * A small RDMA WRITE posted inline ({@code WorkRequest.inline(segment)}: copied into the send queue at
 * post time, no lkey) beside the same WRITE from a registered buffer, each posted and its completion
 * polled on connected soft QPs. The inline one copies its bytes twice (into the queue, then to the
 * target) and checks no local key. Run with {@code -prof gc}: both must show 0 B/op.
 */
@State(Scope.Thread)
public class InlineSendBenchmark extends BenchDefaults {

    /** Bytes per WRITE (at most the QP's maxInlineData, 1024). */
    @Param({"8", "64", "512"})
    public int size;

    private Arena arena;
    private SoftPair pair;
    private MemoryRegion local;
    private MemoryRegion remote;
    private final WorkRequest registered = new WorkRequest(1);
    private final WorkRequest inline = new WorkRequest(1);
    private final WorkCompletion[] wcs = {new WorkCompletion()};

    /** Two connected soft devices; the source registered for one request, given inline to the other. */
    @Setup(Level.Trial)
    public void setUp() {
        arena = Arena.ofShared();
        MemorySegment src = arena.allocate(4096, 4096);
        MemorySegment dst = arena.allocate(4096, 4096);
        src.fill((byte) 7);
        pair = new SoftPair(Map.of(), 64, new QpInitAttributes().maxInlineData(QpInitAttributes.MAX_INLINE_DATA));
        local = pair.pdA.register(src, Access.LOCAL_WRITE);
        remote = pair.pdB.register(dst, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        registered.wrId(1).opcode(Opcode.RDMA_WRITE).signaled(true).addSge(src.address(), size, local.lkey())
                .remote(dst.address(), remote.rkey());
        inline.wrId(2).opcode(Opcode.RDMA_WRITE).signaled(true).inline(src.asSlice(0, size))
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

    private long postAndPoll(WorkRequest wr) {
        pair.qpA.postSend(wr);
        while (pair.cqA.poll(wcs) == 0) {
            Thread.onSpinWait();
        }
        if (wcs[0].status() != WcStatus.SUCCESS) {
            throw new IllegalStateException("WRITE failed: " + wcs[0]);
        }
        return wcs[0].byteLen();
    }

    /** A WRITE from the registered buffer (its lkey checked at execution). */
    @Benchmark
    public long registeredWrite() {
        return postAndPoll(registered);
    }

    /** The same WRITE inline (copied at post time, no lkey). */
    @Benchmark
    public long inlineWrite() {
        return postAndPoll(inline);
    }
}
