package io.regmem.bench;

import io.regmem.cli.SoftPair;
import io.regmem.registration.CmId;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.RdmaDevice;
import java.lang.foreign.Arena;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * A SEND/RECV ping-pong over the public verbs API ({@link VerbsEcho}): the benchmark thread posts a
 * SEND of {@code size} bytes and polls its CQ until the answer's receive completes; the echo side (a
 * thread of this JVM, or a child process for {@code ucx-process}) polls, SENDs back and posts the
 * receive again. One busy-polling thread per end, device options as {@link #options} says (the
 * {@code -process} pairs), no progress threads. The peer in the same run: {@link AeronPingPongBenchmark}
 * (Aeron IPC, two busy-spinning threads). Sampled: p50, p99 and p99.9 of the round trip.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
public class PingPongBenchmark extends BenchDefaults {
    /**
     * soft: two soft devices of this JVM; ucx: two ucx devices of this JVM; ucx-process and shm-process:
     * the echo in a child JVM, on that provider.
     */
    @Param({"soft", "ucx", "ucx-process", "shm-process"})
    public String pair;

    /** Bytes per message. */
    @Param({"64"})
    public int size;

    /**
     * Device options of both ends of the {@code -process} pairs, {@code k=v;k=v} (for example
     * {@code inlineThreshold=65536;ringBytes=262144}); empty: the defaults.
     */
    @Param({""})
    public String options;

    /** {@code k=v;k=v} as a map (empty for an empty string). */
    static Map<String, String> options(String spec) {
        return BenchTransports.options(spec, ";");
    }

    private SoftPair devices;
    private Arena arena;
    private VerbsEcho mine;
    private VerbsEcho theirs;
    private Thread echo;
    private final AtomicBoolean stop = new AtomicBoolean();
    private BenchChild child;
    private RdmaDevice dev;
    private CmId id;
    private CompletionQueue cq;
    private ProtectionDomain pd;

    /** Queue sizes of both ends: room for the unsignaled SENDs between two signaled ones. */
    static QpInitAttributes attributes(CompletionQueue cq) {
        QpInitAttributes a = new QpInitAttributes().maxSendWr(4 * VerbsEcho.SIGNAL_EVERY).maxRecvWr(VerbsEcho.RECVS)
                .signalAll(false);
        return cq == null ? a : a.sendCq(cq).recvCq(cq); // (null: SoftPair fills the CQs in)
    }

    @Setup(Level.Trial)
    public void setUp() throws Exception {
        arena = Arena.ofShared();
        if (pair.endsWith("-process")) {
            String provider = pair.substring(0, pair.indexOf('-'));
            String address = BenchChild.loopbackAddress();
            child = BenchChild.start("echo process", false, Map.of(), PingPongPeer.class, address, provider, options);
            child.expect("LISTENING");
            dev = RdmaDevice.open(provider, options(options));
            pd = dev.allocPd();
            cq = dev.createCq(256);
            id = dev.createCmId();
            var qp = id.createQp(pd, attributes(cq));
            mine = new VerbsEcho(pd, qp, cq, arena);
            id.connect(address);
            child.expect("READY");
            while (id.connState() != CmId.ConnState.CONNECTED) {
                Thread.onSpinWait();
            }
            child.drain();
            return;
        }
        devices = new SoftPair(pair, Map.of(), 256, attributes(null), attributes(null));
        mine = new VerbsEcho(devices.pdA, devices.qpA, devices.cqA, arena);
        theirs = new VerbsEcho(devices.pdB, devices.qpB, devices.cqB, arena);
        echo = Thread.ofPlatform().name("ping-pong-echo").start(() -> theirs.echo(stop::get));
    }

    @TearDown(Level.Trial)
    public void tearDown() throws Exception {
        stop.set(true);
        if (child != null) {
            child.endInput();
            id.disconnect();
            mine.close();
            id.destroyQp();
            id.close();
            cq.close();
            pd.close();
            dev.close();
            child.close();
        } else {
            echo.join();
            devices.disconnect();
            mine.close();
            theirs.close();
            devices.close();
        }
        arena.close();
    }

    /** One round trip: a SEND of {@code size} bytes and the answer's receive. */
    /**
     * A poll of the benchmark thread's CQ that finds nothing (no ping is out): what a spinning end pays
     * per look, and so, on average, half of it before it sees a message.
     */
    @Benchmark
    @BenchmarkMode(Mode.AverageTime)
    public int idlePoll() {
        return mine.pollOnce();
    }

    @Benchmark
    public int roundTrip() {
        mine.ping(size);
        return mine.awaitMessage();
    }
}
