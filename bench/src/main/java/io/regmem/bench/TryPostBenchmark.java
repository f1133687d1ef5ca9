package io.regmem.bench;

import io.regmem.cli.SoftPair;
import io.regmem.core.RdmaException;
import io.regmem.registration.Access;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.Opcode;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.Map;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.ringbuffer.OneToOneRingBuffer;
import org.agrona.concurrent.ringbuffer.RingBufferDescriptor;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * Back-pressure as a return value: a post into a full send queue of a soft QP, through
 * {@code tryPostSend} (returns {@code BACK_PRESSURED}) and through {@code postSend} (throws
 * {@code ENOMEM}, caught), beside Agrona's {@code OneToOneRingBuffer.write} into a full ring (returns
 * false); and one 64 B WRITE posted with {@code tryPostSend} and its completion polled. Run with
 * {@code -prof gc}: the {@code tryPostSend} paths must show 0 B/op.
 */
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "-Xms1g", "-Xmx1g",
        "--sun-misc-unsafe-memory-access=allow", "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED"})
public class TryPostBenchmark extends BenchDefaults {

    /** A connected soft pair with a send queue of 16, 64 B registered at each end, one WRITE request. */
    abstract static class Pair {
        Arena arena;
        SoftPair pair;
        MemoryRegion local;
        MemoryRegion remote;
        final WorkRequest wr = new WorkRequest(1);
        final WorkCompletion[] one = {new WorkCompletion()};

        void open() {
            arena = Arena.ofShared();
            MemorySegment src = arena.allocate(4096, 4096);
            MemorySegment dst = arena.allocate(4096, 4096);
            pair = new SoftPair(Map.of(), 64, new QpInitAttributes().maxSendWr(16));
            local = pair.pdA.register(src, Access.LOCAL_WRITE);
            remote = pair.pdB.register(dst, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
            wr.wrId(1).opcode(Opcode.RDMA_WRITE).signaled(true).addSge(src.address(), 64, local.lkey())
                    .remote(dst.address(), remote.rkey());
        }

        void close() {
            while (pair.qpA.outstandingSends() > 0) {
                pair.cqA.poll(one);
            }
            pair.disconnect();
            local.close();
            remote.close();
            pair.close();
            arena.close();
        }
    }

    /** The pair with its send queue full (nothing is polled), and a full Agrona ring of 4 KiB. */
    @State(Scope.Thread)
    public static class Full extends Pair {
        OneToOneRingBuffer ring;
        final UnsafeBuffer record = new UnsafeBuffer(ByteBuffer.allocateDirect(64));

        @Setup(Level.Trial)
        public void setUp() {
            open();
            while (pair.qpA.tryPostSend(wr) > 0) {
                // fills the queue
            }
            ring = new OneToOneRingBuffer(new UnsafeBuffer(ByteBuffer.allocateDirect(4096 + RingBufferDescriptor.TRAILER_LENGTH)));
            while (ring.write(1, record, 0, 64)) {
                // fills the ring
            }
        }

        @TearDown(Level.Trial)
        public void tearDown() {
            close();
        }
    }

    /** The pair with its send queue empty. */
    @State(Scope.Thread)
    public static class Empty extends Pair {
        @Setup(Level.Trial)
        public void setUp() {
            open();
        }

        @TearDown(Level.Trial)
        public void tearDown() {
            close();
        }
    }

    /** tryPostSend into the full queue: BACK_PRESSURED. */
    @Benchmark
    public int tryPostSendFull(Full s) {
        return s.pair.qpA.tryPostSend(s.wr);
    }

    /** postSend into the full queue: ENOMEM thrown and caught (what a caller without tryPostSend pays). */
    @Benchmark
    public int postSendFullThrows(Full s) {
        try {
            s.pair.qpA.postSend(s.wr);
            return 1;
        } catch (RdmaException e) {
            return -e.errno().ordinal();
        }
    }

    /** Agrona's one-to-one ring, full: write returns false. */
    @Benchmark
    public boolean agronaRingWriteFull(Full s) {
        return s.ring.write(1, s.record, 0, 64);
    }

    /** A 64 B WRITE posted with tryPostSend and its completion polled. */
    @Benchmark
    public long tryPostSendAndPoll(Empty s) {
        if (s.pair.qpA.tryPostSend(s.wr) != 1) {
            throw new IllegalStateException("back-pressured with an empty queue");
        }
        while (s.pair.cqA.poll(s.one) == 0) {
            Thread.onSpinWait();
        }
        return s.one[0].byteLen();
    }
}
