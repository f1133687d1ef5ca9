package io.regmem.bench;

import io.aeron.Aeron;
import io.aeron.ExclusivePublication;
import io.aeron.Publication;
import io.aeron.Subscription;
import io.aeron.driver.MediaDriver;
import io.aeron.logbuffer.FragmentHandler;
import java.nio.ByteBuffer;
import org.agrona.concurrent.UnsafeBuffer;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * Aeron IPC's own cost for one 64-byte message, on one thread: an {@code ExclusivePublication.offer}
 * and the {@code Subscription.poll} that hands it to a handler reading its first word. The peer of
 * {@code DatagramBenchmark.multicast} (a datagram's post and its member's poll on one thread): what
 * the two paths cost without the cache-line transfers between cores that a one-way latency adds.
 * An embedded media driver (shared mode, sleeping 1 ms between duty cycles: IPC moves no data
 * through it); one thread runs. Run with {@code -prof gc}: 0 B/op.
 */
@State(Scope.Thread)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "--sun-misc-unsafe-memory-access=allow",
        "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED"})
public class AeronIpcOneThreadBenchmark extends BenchDefaults {
    private static final int SIZE = 64;
    private MediaDriver driver;
    private Aeron aeron;
    private ExclusivePublication publication;
    private Subscription subscription;
    private final UnsafeBuffer message = new UnsafeBuffer(ByteBuffer.allocateDirect(SIZE));
    private long seen;
    private final FragmentHandler handler = (buffer, offset, length, header) -> seen += buffer.getLong(offset);

    @Setup(Level.Trial)
    public void setUp() {
        driver = AeronPingPongBenchmark.embeddedIpcDriver();
        aeron = Aeron.connect(new Aeron.Context().aeronDirectoryName(driver.aeronDirectoryName()));
        publication = aeron.addExclusivePublication("aeron:ipc", 1003);
        subscription = aeron.addSubscription("aeron:ipc", 1003);
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (!publication.isConnected() || !subscription.isConnected()) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("aeron: the IPC stream did not connect within 10 s");
            }
            Thread.onSpinWait();
        }
    }

    /** One message offered and polled. */
    @Benchmark
    public long offerPoll() {
        message.putLong(0, seen);
        long r;
        while ((r = publication.offer(message, 0, SIZE)) < 0) {
            if (r == Publication.CLOSED || r == Publication.NOT_CONNECTED || r == Publication.MAX_POSITION_EXCEEDED) {
                throw new IllegalStateException("aeron: offer failed: " + r);
            }
            subscription.poll(handler, 16); // (back-pressured: the subscription drains)
        }
        while (subscription.poll(handler, 1) == 0) {
            Thread.onSpinWait();
        }
        return seen;
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        aeron.close();
        driver.close();
    }
}
