package io.regmem.bench;

import io.regmem.registration.Access;
import io.regmem.registration.CmId;
import io.regmem.registration.CompletionChannel;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.Opcode;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * The wake-up a completion channel costs: an 8-byte SEND from A to a responder thread at B, which
 * answers with an 8-byte SEND, on two soft devices in this JVM. The responder either spins polling
 * its CQ ({@code spin}: the floor, a core burnt while idle) or sleeps in
 * {@link CompletionChannel#getEvent} after arming its CQ ({@code channel}: idle costs no core; the
 * event is raised by the thread whose progress completed the receive, which unparks it). The
 * difference is the wake-up latency, measured with A pausing {@code idleMicros} before each request
 * (outside the measurement: a per-invocation setup, fine at these op times) so that the responder
 * is asleep when it comes. Run with {@code -prof gc}: both must show 0 B/op.
 */
@State(Scope.Benchmark)
public class CompletionChannelBenchmark extends BenchDefaults {

    /** How the responder waits for a request. */
    @Param({"spin", "channel"})
    public String mode;

    /**
     * How long A waits, before each request and outside the measurement, so that the responder is
     * asleep when it arrives (0: back to back; the responder rarely sleeps).
     */
    @Param({"0", "200"})
    public int idleMicros;

    private Arena arena;
    private RdmaDevice devA;
    private RdmaDevice devB;
    private CompletionQueue cqA;
    private CompletionQueue cqB;
    private CompletionChannel chB;
    private CmId listener;
    private CmId idA;
    private CmId idB;
    private QueuePair qpA;
    private QueuePair qpB;
    private ProtectionDomain pdA;
    private ProtectionDomain pdB;
    private MemoryRegion mrA;
    private MemoryRegion mrB;
    private MemorySegment memA;
    private MemorySegment memB;
    private Thread responder;
    private volatile boolean stop;
    private final WorkRequest send = new WorkRequest(1);
    private final WorkRequest recv = new WorkRequest(1);
    private final WorkCompletion[] wcs = {new WorkCompletion()};
    private static int names;

    /** Two connected soft devices, a receive posted at each end, the responder started. */
    @Setup(Level.Trial)
    public void setUp() {
        arena = Arena.ofShared();
        memA = arena.allocate(8192, 4096);
        memB = arena.allocate(8192, 4096);
        devA = RdmaDevice.open("soft");
        devB = RdmaDevice.open("soft");
        pdA = devA.allocPd();
        pdB = devB.allocPd();
        cqA = devA.createCq(64);
        chB = devB.createCompletionChannel();
        cqB = devB.createCq(64, chB);
        mrA = pdA.register(memA, Access.LOCAL_WRITE);
        mrB = pdB.register(memB, Access.LOCAL_WRITE);
        listener = devB.createCmId();
        String name = "wakeup-" + (++names);
        listener.listen(name);
        idA = devA.createCmId();
        qpA = idA.createQp(pdA, QpInitAttributes.of(cqA));
        idA.connect(name);
        idB = listener.getRequest();
        qpB = idB.createQp(pdB, QpInitAttributes.of(cqB));
        idB.accept();
        qpA.postRecv(recv.reset().wrId(1).addSge(memA.address() + 4096, 8, mrA.lkey()));
        qpB.postRecv(new WorkRequest(1).wrId(1).addSge(memB.address() + 4096, 8, mrB.lkey()));
        send.opcode(Opcode.SEND).signaled(true).addSge(memA.address(), 8, mrA.lkey());
        boolean channel = mode.equals("channel");
        responder = Thread.ofPlatform().name("wakeup-responder").start(() -> respond(channel));
    }

    /** B: waits for each request, posts its receive again and answers with a SEND. */
    private void respond(boolean channel) {
        WorkCompletion[] got = {new WorkCompletion()};
        WorkRequest answer = new WorkRequest(1).wrId(2).opcode(Opcode.SEND).signaled(true)
                .addSge(memB.address(), 8, mrB.lkey());
        WorkRequest again = new WorkRequest(1).wrId(1).addSge(memB.address() + 4096, 8, mrB.lkey());
        while (!stop) {
            if (channel) {
                cqB.requestNotify(false);
            }
            int n = cqB.poll(got);
            if (n == 0) {
                if (channel) {
                    CompletionQueue cq = chB.getEvent(100, TimeUnit.MILLISECONDS);
                    if (cq != null) {
                        cq.ackEvents(1);
                    }
                } else {
                    Thread.onSpinWait();
                }
                continue;
            }
            if (got[0].opcode() == Opcode.RECV && got[0].status() == WcStatus.SUCCESS) {
                qpB.postRecv(again);
                qpB.postSend(answer);
            }
        }
    }

    /** Stops the responder and tears down in the mandatory order. */
    @TearDown(Level.Trial)
    public void tearDown() throws InterruptedException {
        stop = true;
        responder.join(10_000);
        idA.disconnect();
        while (cqB.poll(wcs) > 0 || cqA.poll(wcs) > 0) {
            // flushed
        }
        idA.destroyQp();
        idB.destroyQp();
        idA.close();
        idB.close();
        listener.close();
        mrA.close();
        mrB.close();
        cqA.close();
        cqB.ackEvents((int) cqB.unackedEvents());
        cqB.close();
        chB.close();
        pdA.close();
        pdB.close();
        devA.close();
        devB.close();
        arena.close();
    }

    /** The pause before each request (not measured). */
    @Setup(Level.Invocation)
    public void idle() {
        long until = System.nanoTime() + idleMicros * 1000L;
        while (System.nanoTime() < until) {
            Thread.onSpinWait();
        }
    }

    /** A's SEND, and B's answer received at A (its receive posted again). */
    @Benchmark
    public long roundTrip() {
        qpA.postSend(send);
        boolean sent = false;
        boolean answered = false;
        while (!sent || !answered) {
            if (cqA.poll(wcs) == 0) {
                Thread.onSpinWait();
                continue;
            }
            if (wcs[0].status() != WcStatus.SUCCESS) {
                throw new IllegalStateException("round trip failed: " + wcs[0]);
            }
            if (wcs[0].opcode() == Opcode.RECV) {
                answered = true;
                qpA.postRecv(recv);
            } else {
                sent = true;
            }
        }
        return wcs[0].byteLen();
    }
}
