package io.regmem.bench;

import io.netty.buffer.AdaptiveByteBufAllocator;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.PooledByteBufAllocator;
import io.regmem.core.BufferPool;
import io.regmem.core.PooledBuffer;
import io.regmem.core.SafetyMode;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * Same-thread allocate + touch + free of one buffer, beside its peers in the same run:
 * Netty's pooled direct allocator and its 4.2 default (the adaptive one), a confined {@link Arena} per buffer, {@link ByteBuffer#allocateDirect},
 * and a slicing allocator over one arena's 64 MiB segment (a bump allocator that frees nothing
 * one by one: it starts again from the first byte when full, as an arena-per-batch design would). Each benchmark writes one long into the buffer so that no implementation
 * can skip the memory. Run with {@code -prof gc}: regmem must show 0 B/op.
 */
@State(Scope.Thread)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "-Xms1g", "-Xmx1g",
        // Netty in its fastest configuration: Unsafe, no-cleaner direct buffers, no leak sampling.
        "--sun-misc-unsafe-memory-access=allow", "--add-opens=java.base/java.nio=ALL-UNNAMED",
        "--add-opens=java.base/jdk.internal.misc=ALL-UNNAMED", "-Dio.netty.tryReflectionSetAccessible=true",
        "-Dio.netty.leakDetection.level=disabled"})
public class AllocatorBenchmark extends BenchDefaults {

    /** Bytes per buffer. */
    @Param({"64", "4096", "65536"})
    public int size;

    private BufferPool fast;
    private BufferPool checked;
    private PooledByteBufAllocator netty;
    private AdaptiveByteBufAllocator nettyAdaptive;
    private Arena slab;
    private MemorySegment slabSegment;
    private SegmentAllocator slicing;

    /** Builds the pools and allocators once per trial. */
    @Setup(Level.Trial)
    public void setUp() {
        fast = BufferPool.builder().name("bench-fast").safetyMode(SafetyMode.FAST).build();
        checked = BufferPool.builder().name("bench-checked").safetyMode(SafetyMode.CHECKED).build();
        netty = new PooledByteBufAllocator(true);
        nettyAdaptive = new AdaptiveByteBufAllocator(true, true);
        slab = Arena.ofShared();
        slabSegment = slab.allocate(64L << 20, 4096);
        resetSlicing();
    }

    /** Starts slicing the same 64 MiB again from its first byte: a bump allocator's "free everything". */
    private void resetSlicing() {
        slicing = SegmentAllocator.slicingAllocator(slabSegment);
    }

    /** Closes the pools and the arena. */
    @TearDown(Level.Trial)
    public void tearDown() {
        fast.close();
        checked.close();
        slab.close();
    }

    /** regmem, {@link SafetyMode#FAST}. */
    @Benchmark
    public long regmemFast() {
        PooledBuffer b = fast.allocate(size);
        b.segment().set(ValueLayout.JAVA_LONG, 0, size);
        long a = b.address();
        b.close();
        return a;
    }

    /** regmem, {@link SafetyMode#CHECKED} (the default). */
    @Benchmark
    public long regmemChecked() {
        PooledBuffer b = checked.allocate(size);
        b.segment().set(ValueLayout.JAVA_LONG, 0, size);
        long a = b.address();
        b.close();
        return a;
    }

    /** Netty's {@code PooledByteBufAllocator}, direct buffers. */
    @Benchmark
    public long nettyPooledDirect() {
        ByteBuf b = netty.directBuffer(size);
        b.setLong(0, size);
        long a = b.memoryAddress();
        b.release();
        return a;
    }

    /** Netty 4.2's default, {@code AdaptiveByteBufAllocator}, direct buffers. */
    @Benchmark
    public long nettyAdaptiveDirect() {
        ByteBuf b = nettyAdaptive.directBuffer(size);
        b.setLong(0, size);
        long a = b.memoryAddress();
        b.release();
        return a;
    }

    /** A confined arena per buffer: {@code malloc} and {@code free} underneath. */
    @Benchmark
    public long arenaConfined() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment s = arena.allocate(size, 64);
            s.set(ValueLayout.JAVA_LONG, 0, size);
            return s.address();
        }
    }

    /** {@link ByteBuffer#allocateDirect}, released by the GC. */
    @Benchmark
    public long byteBufferAllocateDirect() {
        ByteBuffer b = ByteBuffer.allocateDirect(size);
        b.putLong(0, size);
        return b.capacity();
    }

    /** A bump pointer over one segment, restarted when full. */
    @Benchmark
    public long slicingAllocatorOverOneArena() {
        MemorySegment s;
        try {
            s = slicing.allocate(size, 64);
        } catch (IndexOutOfBoundsException full) {
            resetSlicing(); // amortized over 64 MiB of allocations
            s = slicing.allocate(size, 64);
        }
        s.set(ValueLayout.JAVA_LONG, 0, size);
        return s.address();
    }
}
