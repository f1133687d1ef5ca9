package io.regmem.bench;

import io.netty.buffer.AdaptiveByteBufAllocator;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.PooledByteBufAllocator;
import io.regmem.core.BufferPool;
import io.regmem.core.PooledBuffer;
import io.regmem.core.SafetyMode;
import java.lang.foreign.ValueLayout;
import org.jctools.queues.SpscArrayQueue;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Group;
import org.openjdk.jmh.annotations.GroupThreads;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.infra.Control;

/**
 * Allocate on one thread, free on another: a producer allocates and writes a buffer and hands it
 * over a JCTools SPSC queue; a consumer frees it. The score of the producer method is the cost per
 * buffer of allocation plus hand-off; the consumer's is the cost of free plus hand-off. The queue is
 * the same for regmem and Netty, so the difference is the allocators'.
 */
@State(Scope.Group)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "-Xms1g", "-Xmx1g",
        // Netty in its fastest configuration: Unsafe, no-cleaner direct buffers, no leak sampling.
        "--sun-misc-unsafe-memory-access=allow", "--add-opens=java.base/java.nio=ALL-UNNAMED",
        "--add-opens=java.base/jdk.internal.misc=ALL-UNNAMED", "-Dio.netty.tryReflectionSetAccessible=true",
        "-Dio.netty.leakDetection.level=disabled"})
public class CrossThreadBenchmark extends BenchDefaults {

    /** Bytes per buffer. */
    @Param({"4096"})
    public int size;

    private BufferPool pool;
    private PooledByteBufAllocator netty;
    private SpscArrayQueue<PooledBuffer> regmemQueue;
    private SpscArrayQueue<ByteBuf> nettyQueue;
    private AdaptiveByteBufAllocator nettyAdaptive;
    private SpscArrayQueue<ByteBuf> adaptiveQueue;

    /** Builds the pool, the Netty allocator and the hand-off queues. */
    @Setup(Level.Trial)
    public void setUp() {
        pool = BufferPool.builder().name("bench-cross").safetyMode(SafetyMode.CHECKED).build();
        netty = new PooledByteBufAllocator(true);
        regmemQueue = new SpscArrayQueue<>(1024);
        nettyQueue = new SpscArrayQueue<>(1024);
        nettyAdaptive = new AdaptiveByteBufAllocator(true, true);
        adaptiveQueue = new SpscArrayQueue<>(1024);
    }

    /** Frees whatever is still in the hand-off queues. */
    @TearDown(Level.Iteration)
    public void drain() {
        PooledBuffer b;
        while ((b = regmemQueue.poll()) != null) {
            b.close();
        }
        ByteBuf n;
        while ((n = nettyQueue.poll()) != null) {
            n.release();
        }
        while ((n = adaptiveQueue.poll()) != null) {
            n.release();
        }
    }

    /** Drains and closes the pool. */
    @TearDown(Level.Trial)
    public void tearDown() {
        drain();
        pool.close();
    }

    /** Producer: allocate from regmem, write, hand over. */
    @Benchmark
    @Group("regmem")
    @GroupThreads(1)
    public void regmemAllocate(Control control) {
        PooledBuffer b = pool.allocate(size);
        b.segment().set(ValueLayout.JAVA_LONG, 0, size);
        while (!regmemQueue.offer(b)) {
            if (control.stopMeasurement) {
                b.close();
                return;
            }
            Thread.onSpinWait();
        }
    }

    /** Consumer: take a regmem buffer and free it on this thread. */
    @Benchmark
    @Group("regmem")
    @GroupThreads(1)
    public void regmemFree(Control control) {
        PooledBuffer b;
        while ((b = regmemQueue.poll()) == null) {
            if (control.stopMeasurement) {
                return;
            }
            Thread.onSpinWait();
        }
        b.close();
    }

    /** Producer: allocate from Netty, write, hand over. */
    @Benchmark
    @Group("netty")
    @GroupThreads(1)
    public void nettyAllocate(Control control) {
        ByteBuf b = netty.directBuffer(size);
        b.setLong(0, size);
        while (!nettyQueue.offer(b)) {
            if (control.stopMeasurement) {
                b.release();
                return;
            }
            Thread.onSpinWait();
        }
    }

    /** Consumer: take a Netty buffer and release it on this thread. */
    @Benchmark
    @Group("netty")
    @GroupThreads(1)
    public void nettyFree(Control control) {
        ByteBuf b;
        while ((b = nettyQueue.poll()) == null) {
            if (control.stopMeasurement) {
                return;
            }
            Thread.onSpinWait();
        }
        b.release();
    }

    /** Producer: allocate from Netty's adaptive allocator (4.2's default), write, hand over. */
    @Benchmark
    @Group("nettyAdaptive")
    @GroupThreads(1)
    public void nettyAdaptiveAllocate(Control control) {
        ByteBuf b = nettyAdaptive.directBuffer(size);
        b.setLong(0, size);
        while (!adaptiveQueue.offer(b)) {
            if (control.stopMeasurement) {
                b.release();
                return;
            }
            Thread.onSpinWait();
        }
    }

    /** Consumer: take an adaptive-allocator buffer and release it on this thread. */
    @Benchmark
    @Group("nettyAdaptive")
    @GroupThreads(1)
    public void nettyAdaptiveFree(Control control) {
        ByteBuf b;
        while ((b = adaptiveQueue.poll()) == null) {
            if (control.stopMeasurement) {
                return;
            }
            Thread.onSpinWait();
        }
        b.release();
    }
}
