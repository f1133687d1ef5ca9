package io.regmem.bench;

import io.regmem.cli.SoftPair;
import io.regmem.core.ScatterList;
import io.regmem.registration.Access;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.DmaMapping;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.rw.RwContext;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Map;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * What the rw benchmarks share: two connected soft devices (MR path forced or not), 2 MiB
 * DMA-mapped at A for the lists, 2 MiB registered at B as the remote side, and one reusable context.
 */
@State(Scope.Thread)
public abstract class RwLoopback extends BenchDefaults {
    static final int PAGE = 4096;

    /** SGE: plain SGEs keyed with the local DMA lkey; MR: fast-reg MRs (rwForceMr). */
    @Param({"SGE", "MR"})
    public String path;

    private Arena arena;
    private SoftPair pair;
    CompletionQueue cqA;
    QueuePair qp;
    private DmaMapping mapping;
    MemoryRegion remote;
    MemorySegment local;
    MemorySegment remoteMemory;
    final RwContext ctx = new RwContext();
    final WorkCompletion[] wcs = {new WorkCompletion(), new WorkCompletion()};

    /** Opens, connects, maps and registers. */
    @Setup(Level.Trial)
    public void setUpLoopback() {
        Map<String, String> options = path.equals("MR") ? Map.of(RdmaDevice.RW_FORCE_MR, "true") : Map.of();
        arena = Arena.ofShared();
        local = arena.allocate(2L * 256 * PAGE, PAGE);
        remoteMemory = arena.allocate(2L * 256 * PAGE, PAGE);
        pair = new SoftPair(options, 1024,
                new QpInitAttributes().maxSendWr(64).maxSendSge(30).signalAll(false).maxRdmaCtxs(2));
        qp = pair.qpA;
        cqA = pair.cqA;
        mapping = pair.devA.dmaMap(local);
        remote = pair.pdB.register(remoteMemory, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        prepare();
    }

    /** The subclass's own set-up, after the loopback's (JMH does not order several @Setup methods). */
    abstract void prepare();

    /** {@code n} page-sized entries on every other page of the local memory (nothing contiguous). */
    ScatterList pages(int n) {
        ScatterList list = new ScatterList(n, false, Integer.MAX_VALUE);
        for (int i = 0; i < n; i++) {
            list.add(local.address() + 2L * i * PAGE, PAGE);
        }
        return list;
    }

    /** Releases everything in the mandatory order. */
    @TearDown(Level.Trial)
    public void tearDownLoopback() {
        pair.disconnect();
        mapping.close();
        remote.close();
        pair.close();
        arena.close();
    }
}
