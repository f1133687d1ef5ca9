package io.regmem.bench;

import io.netty.buffer.AdaptiveByteBufAllocator;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.PooledByteBufAllocator;
import io.regmem.core.BufferPool;
import io.regmem.netty.RegmemByteBufAllocator;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * Allocate + write + release of a direct ByteBuf through Netty's {@link ByteBufAllocator} interface,
 * on one thread: regmem's allocator (a CHECKED pool, the default) beside Netty's adaptive (4.2's
 * default) and pooled allocators. The write is {@code writeBytes} of {@code size} bytes from a heap
 * array plus a {@code writeLong}, so no allocator can skip the memory. Run with {@code -prof gc}:
 * regmem must show 0 B/op. Netty's leak detection is off for all three (its sampling allocates).
 */
@State(Scope.Thread)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "-Xms1g", "-Xmx1g",
        "--sun-misc-unsafe-memory-access=allow", "--add-opens=java.base/java.nio=ALL-UNNAMED",
        "--add-opens=java.base/jdk.internal.misc=ALL-UNNAMED", "-Dio.netty.tryReflectionSetAccessible=true",
        "-Dio.netty.leakDetection.level=disabled"})
public class NettyAllocatorBenchmark extends BenchDefaults {

    /** Bytes written per buffer. */
    @Param({"64", "4096", "65536"})
    public int size;

    /** Which allocator: regmem, nettyAdaptive, nettyPooled. */
    @Param({"regmem", "nettyAdaptive", "nettyPooled"})
    public String allocator;

    private BufferPool pool;
    private ByteBufAllocator alloc;
    private byte[] payload;

    /** Builds the allocator under test once per trial. */
    @Setup(Level.Trial)
    public void setUp() {
        payload = new byte[size];
        pool = BufferPool.builder().name("bench-netty").build();
        alloc = switch (allocator) {
            case "regmem" -> new RegmemByteBufAllocator(pool);
            case "nettyAdaptive" -> new AdaptiveByteBufAllocator(true, true);
            case "nettyPooled" -> new PooledByteBufAllocator(true);
            default -> throw new IllegalArgumentException(allocator);
        };
    }

    /** Closes the pool. */
    @TearDown(Level.Trial)
    public void tearDown() {
        pool.close();
    }

    /** One buffer: allocate, write {@code size + 8} bytes, release. */
    @Benchmark
    public int allocateWriteRelease() {
        ByteBuf b = alloc.directBuffer(size + 8);
        b.writeBytes(payload).writeLong(size);
        int w = b.writerIndex();
        b.release();
        return w;
    }
}
