package io.regmem.bench;

import io.aeron.Aeron;
import io.aeron.ExclusivePublication;
import io.aeron.Subscription;
import io.aeron.driver.MediaDriver;
import io.aeron.driver.ThreadingMode;
import io.aeron.logbuffer.FragmentHandler;
import java.nio.ByteBuffer;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.agrona.concurrent.SleepingMillisIdleStrategy;
import org.agrona.concurrent.UnsafeBuffer;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * The peer of {@link PingPongBenchmark} and of the RPC round trip: Aeron IPC ping-pong
 * ({@code aeron:ipc}, Aeron 1.47.0 with an embedded media driver) of {@code size}-byte messages.
 * The benchmark thread offers a ping on one stream and polls the other for the pong; an echo thread
 * polls the ping stream and offers each message back. Two busy-spinning threads, as regmem's
 * ping-pongs; the driver's one thread (shared mode) sleeps 1 ms between duty cycles (IPC data never
 * passes through it). Sampled: p50, p99 and p99.9 of the round trip.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "-Xms1g", "-Xmx1g",
        "--sun-misc-unsafe-memory-access=allow", "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED"})
public class AeronPingPongBenchmark extends BenchDefaults {
    private static final String CHANNEL = "aeron:ipc";
    private static final int PING_STREAM = 1001;
    private static final int PONG_STREAM = 1002;

    /** Bytes per message. */
    @Param({"64"})
    public int size;

    private MediaDriver driver;
    private Aeron aeron;
    private ExclusivePublication ping;
    private Subscription pongs;
    private Thread echo;
    private final AtomicBoolean stop = new AtomicBoolean();
    private UnsafeBuffer message;
    private int received;
    private FragmentHandler onPong;

    /**
     * An embedded media driver for IPC benchmarks: shared mode, sleeping 1 ms between duty cycles (IPC
     * moves no data through it, so it takes no core from the threads measured).
     */
    static MediaDriver embeddedIpcDriver() {
        return MediaDriver.launchEmbedded(new MediaDriver.Context()
                .threadingMode(ThreadingMode.SHARED)
                .sharedIdleStrategy(new SleepingMillisIdleStrategy(1))
                .dirDeleteOnStart(true)
                .dirDeleteOnShutdown(true));
    }

    @Setup(Level.Trial)
    public void setUp() {
        driver = embeddedIpcDriver();
        aeron = Aeron.connect(new Aeron.Context().aeronDirectoryName(driver.aeronDirectoryName()));
        ping = aeron.addExclusivePublication(CHANNEL, PING_STREAM);
        Subscription pings = aeron.addSubscription(CHANNEL, PING_STREAM);
        ExclusivePublication pong = aeron.addExclusivePublication(CHANNEL, PONG_STREAM);
        pongs = aeron.addSubscription(CHANNEL, PONG_STREAM);
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (!ping.isConnected() || !pong.isConnected() || !pings.isConnected() || !pongs.isConnected()) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("aeron: the IPC streams did not connect within 10 s");
            }
            Thread.onSpinWait();
        }
        message = new UnsafeBuffer(ByteBuffer.allocateDirect(size));
        onPong = (buffer, offset, length, header) -> received = length;
        FragmentHandler echoOne = (buffer, offset, length, header) -> {
            while (pong.offer(buffer, offset, length) < 0) {
                Thread.onSpinWait(); // (back pressure: the pinger has not read the last pong yet)
            }
        };
        echo = Thread.ofPlatform().name("aeron-echo").start(() -> {
            while (!stop.get()) {
                if (pings.poll(echoOne, 1) == 0) {
                    Thread.onSpinWait();
                }
            }
        });
    }

    @TearDown(Level.Trial)
    public void tearDown() throws InterruptedException {
        stop.set(true);
        echo.join();
        aeron.close();
        driver.close();
    }

    /** One round trip: a ping of {@code size} bytes and its pong. */
    @Benchmark
    public int roundTrip() {
        while (ping.offer(message, 0, size) < 0) {
            Thread.onSpinWait();
        }
        received = 0;
        while (pongs.poll(onPong, 1) == 0) {
            Thread.onSpinWait();
        }
        return received;
    }
}
