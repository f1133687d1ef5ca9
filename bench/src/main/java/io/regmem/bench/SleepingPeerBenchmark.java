package io.regmem.bench;

import io.regmem.registration.Access;
import io.regmem.registration.CmId;
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
import java.util.HexFormat;
import java.util.Map;
import java.util.concurrent.TimeUnit;
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
 * An 8-byte READ to a peer whose progress thread sleeps: the target is a child JVM
 * ({@link UcxBenchPeer}) whose device has a progress thread with the {@code backoff} idle strategy and
 * nobody polling, so after 50 µs without work it sleeps on its lanes' futex words until a request
 * wakes it. Each measured invocation (SingleShotTime) comes after a 25 ms pause in which the peer falls
 * asleep: the time is the READ's round trip including the peer's wake-up. The peer in the same run:
 * {@code bench/native/futex-pingpong.c} (the OS's own wake-up between two processes, the same pause),
 * run by {@code bench/sleeping-peer.sh}. Before the measured invocations the trial warms both JVMs up
 * with 20,000 back-to-back READs. Which threads spin: the benchmark thread while it waits for the
 * completion; the peer's thread sleeps.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.SingleShotTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
public class SleepingPeerBenchmark extends BenchDefaults {
    /** The provider of both ends (ucx: its same-host connection takes the lane). */
    @Param({"shm"})
    public String provider;

    /**
     * What sleeps at the peer: {@code thread}, its device's progress thread ({@code backoff}); or
     * {@code channel}, a thread waiting on a completion channel with the connection's CQ armed (no
     * progress thread: it serves the READs itself between sleeps, as a Netty event loop on regmem does).
     */
    @Param({"thread"})
    public String waiter;

    private BenchChild child;
    private Arena arena;
    private RdmaDevice dev;
    private ProtectionDomain pd;
    private CompletionQueue cq;
    private CmId id;
    private QueuePair qp;
    private MemoryRegion mr;
    private long remote;
    private int key;
    private final WorkRequest wr = new WorkRequest(1);
    private final WorkCompletion[] wcs = {new WorkCompletion()};

    @Setup(Level.Trial)
    public void setUp() throws Exception {
        String address = BenchChild.loopbackAddress();
        child = BenchChild.start("peer", true, Map.of(), UcxBenchPeer.class, address,
                waiter.equals("channel") ? "channel" : "backoff", "65536", provider);
        child.expect("LISTENING");
        arena = Arena.ofShared();
        dev = RdmaDevice.open(provider);
        pd = dev.allocPd();
        cq = dev.createCq(64);
        mr = pd.register(arena.allocate(4096, 4096), Access.LOCAL_WRITE);
        id = dev.createCmId();
        qp = id.createQp(pd, new QpInitAttributes().sendCq(cq).recvCq(cq).maxSendWr(16).maxRecvWr(1));
        id.connect(address);
        String[] k = child.expect("KEY ").split(" ");
        while (id.connState() != CmId.ConnState.CONNECTED) {
            Thread.onSpinWait();
        }
        key = qp.importRemoteKey(HexFormat.of().parseHex(k[1]));
        remote = Long.parseLong(k[2]);
        child.drain();
        for (int i = 0; i < 20_000; i++) { // warm both JVMs' code (cold code takes milliseconds)
            read();
        }
    }

    /** The pause before each measured READ: the peer's progress thread falls asleep. */
    @Setup(Level.Iteration)
    public void pause() throws InterruptedException {
        Thread.sleep(25);
    }

    /** One READ of 8 bytes, posted and completed. */
    @Benchmark
    public long read() {
        qp.postSend(wr.reset().wrId(1).opcode(Opcode.RDMA_READ).signaled(true).addSge(mr.address(), 8, mr.lkey())
                .remote(remote, key));
        while (cq.poll(wcs) == 0) {
            Thread.onSpinWait();
        }
        if (wcs[0].status() != WcStatus.SUCCESS) {
            throw new IllegalStateException(wcs[0].toString());
        }
        return wcs[0].byteLen();
    }

    @TearDown(Level.Trial)
    public void tearDown() throws Exception {
        id.disconnect();
        id.destroyQp();
        id.close();
        mr.close();
        cq.close();
        pd.close();
        dev.close();
        arena.close();
        child.close();
    }
}
