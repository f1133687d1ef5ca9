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
import java.lang.foreign.MemorySegment;
import java.util.HexFormat;
import java.util.Map;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * RDMA WRITE on the ucx provider between two processes (this JVM and a {@link UcxBenchPeer} child,
 * whose UCX is restricted to {@code transport}), every WRITE from the same local buffer to the same
 * remote address as {@code ucx_perftest}'s puts: the round trip of one WRITE of {@code size} bytes
 * (post it, poll until its completion: the target executed it and answered), and, with up to 16
 * WRITEs in flight, the time per WRITE once the pipe is full (bytes / time = bandwidth). One
 * busy-polling thread per process, as {@code ucx_perftest} runs: this side's benchmark thread (no
 * progress thread), the child's progress thread (which executes what arrives; its main thread
 * blocks on its input). The native peers, {@code ucx_perftest} on the same transport, run beside it
 * from {@code bench/ucx-compare.sh}.
 */
@State(Scope.Benchmark)
public class UcxPutBenchmark extends BenchDefaults {
    private static final int WINDOW = 16;

    /**
     * UCX_TLS of the child with '+' for ',' (JMH splits parameter values on commas): shared memory or
     * TCP; or {@code shm}: both ends on the shm provider (the same-host lane) instead of ucx.
     */
    @Param({"sysv+posix+cma", "tcp", "shm"})
    public String transport;

    /**
     * How WRITEs travel: as messages the target checks, executes and answers (the default, checked
     * path), or ({@code --param mode=oneSided}, the device option oneSided=true, UCX 1.19 or later)
     * as UCX puts and gets the target does not check.
     */
    @Param({"message"})
    public String mode;

    /** The rndvThreshold of both ucx devices (this side's WRITEs go by it, the child's READ answers). */
    @Param({"65536"})
    public String rndvThreshold;

    /** Bytes per WRITE. */
    @Param({"8", "65536", "1048576"})
    public int size;

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
    private final WorkCompletion[] wcs = new WorkCompletion[WINDOW];
    private int inFlight;
    private long next;

    @Setup(Level.Trial)
    public void setUp() throws Exception {
        for (int i = 0; i < WINDOW; i++) {
            wcs[i] = new WorkCompletion();
        }
        String address = BenchChild.loopbackAddress();
        child = BenchChild.start("peer", true, transport.equals("shm") ? Map.of() : Map.of("UCX_TLS", transport.replace('+', ',')),
                UcxBenchPeer.class, address,
                mode.equals("oneSided") ? "backoff" : "busy", rndvThreshold, // one-sided WRITEs need no target progress
                transport.equals("shm") ? "shm" : "ucx");
        child.expect("LISTENING");
        arena = Arena.ofShared();
        dev = transport.equals("shm") ? RdmaDevice.open("shm")
                : RdmaDevice.open("ucx", Map.of("oneSided", Boolean.toString(mode.equals("oneSided")),
                        "rndvThreshold", rndvThreshold));
        pd = dev.allocPd();
        cq = dev.createCq(1024);
        MemorySegment memory = arena.allocate(16 << 20, 4096);
        mr = pd.register(memory, Access.LOCAL_WRITE);
        id = dev.createCmId();
        qp = id.createQp(pd, new QpInitAttributes().sendCq(cq).recvCq(cq).maxSendWr(256).maxRecvWr(16));
        id.connect(address);
        String[] k = child.expect("KEY ").split(" ");
        while (id.connState() != CmId.ConnState.CONNECTED) {
            Thread.onSpinWait();
        }
        key = qp.importRemoteKey(HexFormat.of().parseHex(k[1]));
        remote = Long.parseLong(k[2]);
        child.drain();
    }

    @TearDown(Level.Trial)
    public void tearDown() throws Exception {
        while (inFlight > 0) {
            inFlight -= cq.poll(wcs);
        }
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

    /** One WRITE from the start of the local region to the start of the remote one, as ucx_perftest puts. */
    private void post(boolean signaled) {
        wr.reset().wrId(next++).opcode(Opcode.RDMA_WRITE).signaled(signaled)
                .addSge(mr.address(), size, mr.lkey()).remote(remote, key);
        qp.postSend(wr);
    }

    /** One WRITE, posted and completed: a round trip to the target and back. */
    @Benchmark
    public long writeRoundTrip() {
        post(true);
        while (cq.poll(wcs) == 0) {
            Thread.onSpinWait();
        }
        if (wcs[0].status() != WcStatus.SUCCESS) {
            throw new IllegalStateException(wcs[0].toString());
        }
        return wcs[0].byteLen();
    }

    /**
     * One ATOMIC_FETCH_AND_ADD on the peer's first 8 bytes, posted and completed (the value found
     * lands in the local region's last 8 bytes): an atomic's round trip, beside {@link #writeRoundTrip}
     * (compare at {@code size=8}; the size does not apply to it).
     */
    @Benchmark
    public long atomicRoundTrip() {
        wr.reset().wrId(next++).opcode(Opcode.ATOMIC_FETCH_AND_ADD).signaled(true).atomic(1, 0)
                .addSge(mr.address() + mr.length() - 8, 8, mr.lkey()).remote(remote, key);
        qp.postSend(wr);
        while (cq.poll(wcs) == 0) {
            Thread.onSpinWait();
        }
        if (wcs[0].status() != WcStatus.SUCCESS) {
            throw new IllegalStateException(wcs[0].toString());
        }
        return wcs[0].byteLen();
    }

    /** One more READ of {@code size} bytes from the peer into a pipe of {@value #WINDOW} (a get in oneSided mode). */
    @Benchmark
    public int readStreamed() {
        while (inFlight >= WINDOW) {
            reap();
        }
        wr.reset().wrId(next++).opcode(Opcode.RDMA_READ).signaled(true)
                .addSge(mr.address(), size, mr.lkey()).remote(remote, key);
        qp.postSend(wr);
        inFlight++;
        return inFlight;
    }

    private void reap() {
        int n = cq.poll(wcs);
        for (int i = 0; i < n; i++) {
            if (wcs[i].status() != WcStatus.SUCCESS) {
                throw new IllegalStateException(wcs[i].toString());
            }
        }
        inFlight -= n;
    }

    /** One more WRITE into a pipe of {@value #WINDOW}: the time per WRITE once it is full. */
    @Benchmark
    public int writeStreamed() {
        while (inFlight >= WINDOW) {
            reap();
        }
        post(true);
        inFlight++;
        return inFlight;
    }
}
