package io.regmem.core;

import static org.assertj.core.api.Assertions.assertThat;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Queue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicLong;
import java.util.List;
import org.jetbrains.kotlinx.lincheck.Actor;
import org.jetbrains.kotlinx.lincheck.execution.ExecutionScenario;
import org.jetbrains.lincheck.datastructures.ModelCheckingOptions;
import org.jetbrains.lincheck.datastructures.Operation;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Lincheck model checking of a chunk's states under a trim: threads allocate (claiming the address
 * and writing an ownership mark), free what any thread allocated (checking the mark first) and trim,
 * on a pool of 32 KiB chunks of two 16 KiB buffers with no thread caches, so that every free goes
 * to the stash, every trim drains it and takes the chunks that went idle, and the next allocation
 * takes a kept range back. Lincheck switches threads at every shared access, lock and volatile
 * among them, through the slow paths, the trim's lock order (the classes' locks, the chunk lock)
 * and the reuse of a range; each operation returns whether its invariant held (an address handed
 * out twice, a mark changed under its owner), so every interleaving must give what the operations
 * give run one after another: true. Deadlocks and exceptions fail it too. Bounded for CI;
 * {@code -Dregmem.lincheck.scale=K} explores K times as many scenarios.
 */
@ExtendWith(NoLeaks.class)
public class PoolTrimLincheckTest {
    /** Every pool the checker made (one per invocation), closed after the test. */
    private static final Queue<BufferPool> MADE = new ConcurrentLinkedQueue<>();
    private static final long BUF = 16 << 10;

    private final BufferPool pool = BufferPool.builder().name("lincheck-trim").chunkSize(32 << 10).slabSize(32 << 10)
            .largestClass(BUF).threadCacheBytes(0).noDecay().build();
    private final ConcurrentLinkedDeque<PooledBuffer> held = new ConcurrentLinkedDeque<>();
    private final ConcurrentHashMap<Long, Long> claims = new ConcurrentHashMap<>();
    private final AtomicLong marks = new AtomicLong();

    {
        MADE.add(pool);
    }

    /** Allocates, claims the address (false if someone owns it) and marks the buffer. */
    @Operation
    public boolean allocate() {
        PooledBuffer b = pool.allocate(BUF);
        long mark = marks.incrementAndGet();
        if (claims.putIfAbsent(b.address(), mark) != null) {
            return false;
        }
        MemorySegment s = b.segment();
        s.set(ValueLayout.JAVA_LONG, 0, mark);
        s.set(ValueLayout.JAVA_LONG, BUF - 8, mark);
        held.add(b);
        return true;
    }

    /** Frees the oldest held buffer, whoever allocated it: false if its mark changed meanwhile. */
    @Operation
    public boolean free() {
        PooledBuffer b = held.poll();
        if (b == null) {
            return true;
        }
        long mark = claims.get(b.address());
        MemorySegment s = b.segment();
        boolean intact = s.get(ValueLayout.JAVA_LONG, 0) == mark && s.get(ValueLayout.JAVA_LONG, BUF - 8) == mark;
        claims.remove(b.address(), mark); // before the free: the slot may be handed out at once
        b.close();
        return intact;
    }

    @Operation
    public boolean trim() {
        pool.trim();
        return true;
    }

    @Test
    void trimsInterleavedWithAllocationsAndFreesKeepEveryInvariant() throws NoSuchMethodException {
        int scale = Math.max(1, Integer.getInteger("regmem.lincheck.scale", 1));
        Actor allocate = new Actor(PoolTrimLincheckTest.class.getMethod("allocate"), List.of());
        Actor free = new Actor(PoolTrimLincheckTest.class.getMethod("free"), List.of());
        Actor trim = new Actor(PoolTrimLincheckTest.class.getMethod("trim"), List.of());
        // Besides the random scenarios: two chunks filled and freed, then a trim racing the
        // allocations that take their ranges back (and a second trim racing a free).
        ExecutionScenario reuse = new ExecutionScenario(List.of(allocate, allocate, allocate, free, free, free),
                List.of(List.of(trim, allocate, allocate), List.of(allocate, free, trim)), List.of(allocate, allocate, allocate),
                null);
        new ModelCheckingOptions()
                .addCustomScenario(reuse)
                .iterations(5 * scale)
                .invocationsPerIteration(60)
                .threads(2)
                .actorsPerThread(3)
                .actorsBefore(2)
                .sequentialSpecification(Invariants.class)
                .check(PoolTrimLincheckTest.class);
    }

    /**
     * What every operation returns when run one after another: its invariant holds. (Without it,
     * Lincheck would compare with this class run sequentially, which a bug breaks alike.)
     */
    public static final class Invariants {
        public boolean allocate() {
            return true;
        }

        public boolean free() {
            return true;
        }

        public boolean trim() {
            return true;
        }
    }

    @AfterEach
    void closeEveryPool() {
        for (BufferPool p; (p = MADE.poll()) != null; ) {
            p.closeAndReport(); // buffers left held by a scenario are reported, not logged
        }
        assertThat(BufferPool.openPools()).isEmpty();
    }
}
