package io.regmem.bench;

import io.regmem.core.BufferPool;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.rpc.Rep;
import io.regmem.registration.rpc.Req;
import io.regmem.registration.rpc.RpcBuffer;
import java.util.concurrent.ArrayBlockingQueue;
import org.jctools.queues.MpmcArrayQueue;
import org.jctools.queues.MpscArrayQueue;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Threads;

/**
 * Taking a request from an {@link RpcBuffer} and putting it back (get + put: the free list plus
 * the ownership compare-and-sets), on one thread and on both cores, beside the same round trip of a
 * token through a JCTools {@link MpmcArrayQueue} and a JDK {@link ArrayBlockingQueue} of the same
 * capacity; and taking a reply and giving it back (the receive poster's pop, a push), beside a
 * token's poll + offer through a JCTools {@link MpscArrayQueue}, which the reply list was before its
 * bitmap. Run with {@code -prof gc}: 0 B/op.
 */
@State(Scope.Benchmark)
public class RpcBufferBenchmark extends BenchDefaults {
    private static final int REQUESTS = 128;

    private RdmaDevice device;
    private ProtectionDomain pd;
    private BufferPool pool;
    private RpcBuffer buffer;
    private MpmcArrayQueue<Object> mpmc;
    private ArrayBlockingQueue<Object> abq;
    private MpscArrayQueue<Object> mpsc;

    /** A soft device, a pool, 128 requests, and the peers filled with 128 tokens. */
    @Setup(Level.Trial)
    public void setUp() {
        device = RdmaDevice.open("soft");
        pd = device.allocPd();
        pool = BufferPool.builder().name("bench-rpc").build();
        buffer = RpcBuffer.builder(pd, pool).maxRequests(REQUESTS).build();
        mpmc = new MpmcArrayQueue<>(REQUESTS);
        abq = new ArrayBlockingQueue<>(REQUESTS);
        mpsc = new MpscArrayQueue<>(REQUESTS + 40);
        for (int i = 0; i < REQUESTS; i++) {
            mpmc.offer(Integer.valueOf(i));
            abq.offer(Integer.valueOf(i));
            mpsc.offer(Integer.valueOf(i));
        }
    }

    /** Releases everything. */
    @TearDown(Level.Trial)
    public void tearDown() {
        buffer.destroy();
        pool.close();
        pd.close();
        device.close();
    }

    /** get + put of a request. */
    @Benchmark
    public Req reqGetPut() {
        Req r = buffer.get();
        buffer.put(r);
        return r;
    }

    /** The same on both cores at once. */
    @Benchmark
    @Threads(2)
    public Req reqGetPutTwoThreads() {
        return reqGetPut();
    }

    /** The receive poster takes a free reply and it is given back (repGet + repPut). */
    @Benchmark
    public Rep repGetPut() {
        Rep r = buffer.repGet();
        buffer.repPut(r);
        return r;
    }

    /** poll + offer of a token through a JCTools MPSC queue (the reply list's structure before its bitmap). */
    @Benchmark
    public Object mpscPollOffer() {
        Object o = mpsc.poll();
        mpsc.offer(o);
        return o;
    }

    /** poll + offer of a token through a JCTools MPMC queue. */
    @Benchmark
    public Object mpmcPollOffer() {
        Object o = mpmc.poll();
        mpmc.offer(o);
        return o;
    }

    /** The same on both cores at once. */
    @Benchmark
    @Threads(2)
    public Object mpmcPollOfferTwoThreads() {
        return mpmcPollOffer();
    }

    /** poll + offer of a token through an ArrayBlockingQueue. */
    @Benchmark
    public Object abqPollOffer() {
        Object o = abq.poll();
        abq.offer(o);
        return o;
    }

    /** The same on both cores at once. */
    @Benchmark
    @Threads(2)
    public Object abqPollOfferTwoThreads() {
        return abqPollOffer();
    }
}
