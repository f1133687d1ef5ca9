package io.regmem.core;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import java.util.TreeMap;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AfterProperty;

/**
 * Random allocate/free sequences checked against a simple model: the list of live buffers.
 * After every step: no two live buffers overlap, every buffer lies inside its chunk and inside
 * memory the pool reserved, the stats agree with the model, and close reports exactly the
 * buffers the model still holds.
 */
class BufferPoolModelTest {

    /** One step: allocate {@code size} bytes, or free the live buffer at {@code index % live}. */
    record Op(boolean allocate, long size, int index) {
    }

    @Provide
    Arbitrary<List<Op>> ops() {
        Arbitrary<Long> sizes = Arbitraries.oneOf(
                Arbitraries.longs().between(1, 256),
                Arbitraries.longs().between(257, 70_000),
                Arbitraries.longs().between(70_001, 600_000),
                Arbitraries.longs().between((1 << 18) + 1, 3 << 18)); // above largestClass (256 KiB)
        Arbitrary<Op> op = Arbitraries.integers().between(0, 9).flatMap(k -> k < 6
                ? sizes.map(s -> new Op(true, s, 0))
                : Arbitraries.integers().between(0, 1000).map(i -> new Op(false, 0, i)));
        return op.list().ofMinSize(1).ofMaxSize(120);
    }

    @Property(tries = 150)
    void poolAgreesWithTheModel(@ForAll("ops") List<Op> ops, @ForAll SafetyMode mode) {
        BufferPool pool = BufferPool.builder().safetyMode(mode).chunkSize(1 << 20).largestClass(1 << 18)
                .slabSize(64 << 10).maxBufferSize(1 << 20).build();
        List<PooledBuffer> live = new ArrayList<>();
        try {
            for (Op op : ops) {
                if (op.allocate()) {
                    PooledBuffer b = pool.allocate(op.size());
                    assertThat(b.length()).isEqualTo(op.size());
                    assertThat(b.capacity()).isGreaterThanOrEqualTo(op.size());
                    live.add(b);
                } else if (!live.isEmpty()) {
                    live.remove(op.index() % live.size()).close();
                }
                checkInvariants(pool, live);
            }
        } finally {
            LeakReport report = pool.closeAndReport();
            assertThat(report.buffers()).isEqualTo(live.size());
            assertThat(report.bytes()).isEqualTo(live.stream().mapToLong(PooledBuffer::capacity).sum());
        }
    }

    private static void checkInvariants(BufferPool pool, List<PooledBuffer> live) {
        TreeMap<Long, PooledBuffer> byAddress = new TreeMap<>();
        for (PooledBuffer b : live) {
            assertThat(byAddress.put(b.address(), b)).as("two live buffers at one address").isNull();
            Chunk c = b.chunk();
            assertThat(b.address()).isGreaterThanOrEqualTo(c.address());
            assertThat(b.address() + b.capacity()).isLessThanOrEqualTo(c.address() + c.size());
            assertThat(b.address() % pool.alignment()).isZero();
            if (b.capacity() <= pool.largestClass()) {
                assertThat(pool.chunks()).contains(c);
            }
        }
        long end = Long.MIN_VALUE;
        for (PooledBuffer b : byAddress.values()) {
            assertThat(b.address()).as("overlap at %s", b).isGreaterThanOrEqualTo(end);
            end = b.address() + b.capacity();
        }
        PoolStats s = pool.stats();
        assertThat(s.liveBuffers()).isEqualTo(live.size());
        assertThat(s.inUseBytes()).isEqualTo(live.stream().mapToLong(PooledBuffer::capacity).sum());
        assertThat(s.allocations() - s.frees()).isEqualTo(live.size());
        long large = live.stream().filter(b -> b.capacity() > pool.largestClass()).count();
        assertThat(s.largeBuffers()).isEqualTo(large);
        long largeBytes = live.stream().filter(b -> b.capacity() > pool.largestClass()).mapToLong(PooledBuffer::capacity).sum();
        assertThat(s.reservedBytes()).isEqualTo(s.chunks() * pool.chunkSize() + largeBytes);
        assertThat(s.inUseBytes()).isLessThanOrEqualTo(s.reservedBytes());
    }

    @AfterProperty
    void noPoolLeftOpen() {
        assertThat(BufferPool.openPools()).isEmpty();
    }
}
