package io.regmem.bench;

import io.regmem.registration.rpc.SendCtx;
import io.regmem.registration.rpc.SendCtxRing;
import java.util.concurrent.TimeUnit;
import org.jctools.queues.SpscArrayQueue;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Group;
import org.openjdk.jmh.annotations.GroupThreads;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.infra.Control;

/**
 * The send-context ring as a sender (consumer: get a slot, as before each Send) and a completion
 * handler (producer: one completion for the newest outstanding slot sweeps everything before it) on
 * two threads, beside the closest library structure, a JCTools {@link SpscArrayQueue} of the same
 * size with an offering and a polling thread. Throughput in operations per microsecond per side; a
 * ring "get" and an SPSC "offer" or "poll" each wait until they succeed, so they count slots and
 * tokens that actually went round (the completion side counts completions, each sweeping several slots).
 */
@State(Scope.Group)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
public class SendCtxRingBenchmark extends BenchDefaults {
    private SendCtxRing ring;
    private SendCtxRing signaledRing;
    /** Stands in for the send CQ: the ids of signaled Sends, in order, one 64-byte entry each. */
    private StandInCq cq;
    private SpscArrayQueue<Object> spsc;
    private final Object token = new Object();

    /**
     * The transport's request limit: 128 is the default (the kernel's slot table), 1024 a transport
     * with more calls in flight. The ring gets maxRequests + 2 slots and the SPSC queue as many entries.
     */
    @Param({"128", "1024"})
    public int maxRequests;

    /** The rings, the stand-in CQ and the peer queue, fresh for each iteration. */
    @Setup(Level.Iteration)
    public void setUp() {
        ring = new SendCtxRing(maxRequests, 3, null, null);
        signaledRing = new SendCtxRing(maxRequests, 3, null, null);
        cq = new StandInCq(256);
        spsc = new SpscArrayQueue<>(maxRequests + 2);
    }

    /** Sender: a slot per Send, waiting (spinning) while the ring is full: one operation = one slot handed out. */
    @Benchmark
    @Group("ring")
    @GroupThreads(1)
    public SendCtx ringGet(Control control) {
        return awaitSlot(ring, control);
    }

    /** The next slot of {@code r}, spinning while it is full; null only when the measurement stops. */
    private static SendCtx awaitSlot(SendCtxRing r, Control control) {
        SendCtx sc;
        while ((sc = r.getLocked()) == null && !control.stopMeasurement) {
            Thread.onSpinWait();
        }
        return sc;
    }

    /** The head of {@code q}, spinning while it is empty; null only when the measurement stops. */
    private static <T> T awaitPoll(SpscArrayQueue<T> q, Control control) {
        T t;
        while ((t = q.poll()) == null && !control.stopMeasurement) {
            Thread.onSpinWait();
        }
        return t;
    }

    /** Completion handler: the newest outstanding slot's completion sweeps the ring up to it. */
    @Benchmark
    @Group("ring")
    @GroupThreads(1)
    public boolean ringComplete() {
        long newest = ring.newestWrId();
        return newest >= 0 && ring.complete(newest);
    }

    /**
     * Sender as the transport runs it: a slot per Send, and the signaling budget decides which Sends
     * are signaled (one in maxRequests / 8 + 1: 17 for 128 requests); a signaled Send's completion appears in the
     * stand-in CQ at once, as if the device finished it immediately. One operation = one slot handed out.
     */
    @Benchmark
    @Group("signaled")
    @GroupThreads(1)
    public SendCtx signaledGet(Control control) {
        SendCtx sc = awaitSlot(signaledRing, control);
        if (sc != null && signaledRing.signal(1, false)) {
            cq.complete(sc.wrId()); // under 10 signaled Sends outstanding (one per batch + 1 slots): the CQ (256) never overflows
        }
        return sc;
    }

    /**
     * Completion handler as the transport runs it: each completion polled from the CQ releases its
     * slot and every slot before it. One operation = one completion.
     */
    @Benchmark
    @Group("signaled")
    @GroupThreads(1)
    public boolean signaledComplete(Control control) {
        long id;
        while ((id = cq.poll()) < 0 && !control.stopMeasurement) {
            Thread.onSpinWait();
        }
        return id >= 0 && signaledRing.complete(id);
    }

    /** Producer side of the peer: offer a token. */
    @Benchmark
    @Group("spsc")
    @GroupThreads(1)
    public boolean spscOffer(Control control) {
        while (!spsc.offer(token) && !control.stopMeasurement) {
            Thread.onSpinWait();
        }
        return true;
    }

    /** Consumer side of the peer: poll a token. */
    @Benchmark
    @Group("spsc")
    @GroupThreads(1)
    public Object spscPoll(Control control) {
        return awaitPoll(spsc, control);
    }
}
