package io.regmem.bench;

import io.regmem.registration.Access;
import io.regmem.registration.CmId;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.Opcode;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.SharedReceiveQueue;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * One 64-byte SEND and the receive it consumes, on connected soft QPs: the receive posted to the
 * receiving QP's own queue, or to a shared receive queue the QP takes it from (the SRQ's lock taken
 * to post, to take and to free the slot). Each operation posts the receive, posts the SEND, and polls
 * both completions. Run with {@code -prof gc}: both must show 0 B/op.
 */
@State(Scope.Thread)
public class SharedReceiveQueueBenchmark extends BenchDefaults {
    private static int names;

    /** Where the receive is posted: the QP's own receive queue, or a shared receive queue. */
    @Param({"own", "srq"})
    public String queue;

    private Arena arena;
    private RdmaDevice devA;
    private RdmaDevice devB;
    private ProtectionDomain pdA;
    private ProtectionDomain pdB;
    private CompletionQueue cqA;
    private CompletionQueue cqB;
    private SharedReceiveQueue srq;
    private CmId listener;
    private CmId idA;
    private CmId idB;
    private MemoryRegion src;
    private MemoryRegion sink;
    private final WorkRequest send = new WorkRequest(1);
    private final WorkRequest recv = new WorkRequest(1);
    private final WorkCompletion[] wcs = {new WorkCompletion()};

    /** Two connected soft devices; B's QP takes its receives from the SRQ when {@link #queue} says so. */
    @Setup(Level.Trial)
    public void setUp() {
        arena = Arena.ofShared();
        MemorySegment a = arena.allocate(4096, 4096);
        MemorySegment b = arena.allocate(4096, 4096);
        devA = RdmaDevice.open("soft");
        devB = RdmaDevice.open("soft");
        pdA = devA.allocPd();
        pdB = devB.allocPd();
        cqA = devA.createCq(64);
        cqB = devB.createCq(64);
        boolean shared = queue.equals("srq");
        srq = shared ? pdB.createSrq(16, 1) : null;
        listener = devB.createCmId();
        String name = "srq-bench-" + (++names) + "-" + System.nanoTime();
        listener.listen(name);
        idA = devA.createCmId();
        idA.createQp(pdA, QpInitAttributes.of(cqA).maxSendWr(16).maxRecvWr(16));
        idA.connect(name);
        idB = listener.getRequest();
        idB.createQp(pdB, QpInitAttributes.of(cqB).maxSendWr(16).maxRecvWr(16).srq(srq));
        idB.accept();
        src = pdA.register(a, Access.LOCAL_WRITE);
        sink = pdB.register(b, Access.LOCAL_WRITE);
        send.wrId(1).opcode(Opcode.SEND).signaled(true).addSge(a.address(), 64, src.lkey());
        recv.wrId(2).addSge(b.address(), 64, sink.lkey());
    }

    /** Tears down in the mandatory order. */
    @TearDown(Level.Trial)
    public void tearDown() {
        idA.disconnect();
        while (cqA.poll(wcs) + cqB.poll(wcs) > 0) {
            Thread.onSpinWait(); // flushes of the disconnect
        }
        idA.destroyQp();
        idB.destroyQp();
        idA.close();
        idB.close();
        listener.close();
        if (srq != null) {
            srq.close();
        }
        src.close();
        sink.close();
        cqA.close();
        cqB.close();
        pdA.close();
        pdB.close();
        devA.close();
        devB.close();
        arena.close();
    }

    private void await(CompletionQueue cq) {
        while (cq.poll(wcs) == 0) {
            Thread.onSpinWait();
        }
        if (wcs[0].status() != WcStatus.SUCCESS) {
            throw new IllegalStateException("failed: " + wcs[0]);
        }
    }

    /** Post a receive, SEND into it, poll both completions. */
    @Benchmark
    public long sendIntoAReceive() {
        if (srq != null) {
            srq.postRecv(recv);
        } else {
            idB.qp().postRecv(recv);
        }
        idA.qp().postSend(send);
        await(cqA);
        await(cqB);
        return wcs[0].byteLen();
    }
}
