package io.regmem.bench;

import io.regmem.registration.shm.Ring;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import org.agrona.concurrent.MessageHandler;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.ringbuffer.OneToOneRingBuffer;
import org.agrona.concurrent.ringbuffer.RingBufferDescriptor;
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

/**
 * The shm lane's ring ({@link Ring}: single producer, single consumer, variable records, nothing the
 * other side writes trusted) beside the closest library structure, Agrona's {@code OneToOneRingBuffer}
 * (which trusts its counters and record lengths), both over 2 MiB of off-heap memory: one producer
 * thread writes records of {@code size} bytes (a sequence number in the first 8) and one consumer
 * thread reads them (and checks the sequence), each spinning; both write every byte of a record; the score is the time per record on
 * each side (a full ring makes the producer retry, an empty one the consumer). The regmem ring
 * publishes every record, as the lane does for a lone request. (Agrona's buffers need
 * {@code jdk.internal.misc} exported: the fork adds it.)
 */
@State(Scope.Group)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "-Xms1g", "-Xmx1g",
        "--sun-misc-unsafe-memory-access=allow", "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED"})
public class ShmRingBenchmark extends BenchDefaults {
    private static final int CAPACITY = 2 << 20;

    /** Payload bytes per record. */
    @Param({"64", "1024"})
    public int size;

    private Arena arena;
    private Ring producer;
    /** Keeps the two ends' objects off one cache line (in the lane they live in two processes). */
    @SuppressWarnings("unused")
    private long[] gap;
    private Ring consumer;
    private MemorySegment payload;
    private OneToOneRingBuffer agrona;
    private UnsafeBuffer source;
    private long sent;
    /** Padding: the producer's counter and the consumer's on different cache lines. */
    @SuppressWarnings("unused")
    private long p1, p2, p3, p4, p5, p6, p7, p8, p9, p10, p11, p12, p13, p14, p15;
    private long received;
    private final MessageHandler handler = (type, buffer, index, length) -> {
        if (buffer.getLong(index) != received) {
            throw new IllegalStateException("out of order: " + buffer.getLong(index) + " where " + received + " was due");
        }
        received++;
    };

    @Setup(Level.Trial)
    public void setUp() {
        arena = Arena.ofShared();
        MemorySegment m = arena.allocate(Ring.size(CAPACITY), 4096);
        producer = new Ring(m);
        gap = new long[32];
        consumer = new Ring(m);
        payload = arena.allocate(size, 8);
        agrona = new OneToOneRingBuffer(new UnsafeBuffer(ByteBuffer.allocateDirect(CAPACITY
                + RingBufferDescriptor.TRAILER_LENGTH)));
        source = new UnsafeBuffer(ByteBuffer.allocateDirect(size));
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        arena.close();
    }

    @Benchmark
    @Group("regmem")
    @GroupThreads(1)
    public boolean regmemWrite() {
        long at = producer.claim(1, size);
        if (at < 0) {
            return false;
        }
        MemorySegment.copy(payload, 0, producer.segment(), at, size); // the record's bytes, as Agrona's write copies them
        producer.segment().set(ValueLayout.JAVA_LONG, at, sent++);
        producer.publish();
        return true;
    }

    @Benchmark
    @Group("regmem")
    @GroupThreads(1)
    public boolean regmemRead() {
        if (!consumer.next()) {
            return false;
        }
        if (consumer.segment().get(ValueLayout.JAVA_LONG, consumer.payload) != received) {
            throw new IllegalStateException("out of order at " + received);
        }
        received++;
        consumer.consume();
        consumer.release();
        return true;
    }

    @Benchmark
    @Group("agrona")
    @GroupThreads(1)
    public boolean agronaWrite() {
        source.putLong(0, sent);
        if (!agrona.write(1, source, 0, size)) {
            return false;
        }
        sent++;
        return true;
    }

    @Benchmark
    @Group("agrona")
    @GroupThreads(1)
    public int agronaRead() {
        return agrona.read(handler, 1);
    }
}
