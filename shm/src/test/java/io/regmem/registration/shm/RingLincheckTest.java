package io.regmem.registration.shm;

import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import org.jetbrains.lincheck.datastructures.Operation;
import org.jetbrains.lincheck.datastructures.StressOptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Lincheck on the lane's ring in its roles: one producer thread writes records of two sizes (each
 * carrying the next sequence number) and publishes them, one consumer thread takes the oldest
 * record and gives its room back; the producer's operations never run in parallel with each other,
 * nor do the consumer's. Every run must be linearizable against the same operations run one after
 * another on one ring: records arrive whole, once, in order, and a write is refused only when the
 * ring really has no room (4 KiB of data, so it fills and wraps within a few operations). Stress
 * mode (real threads over real shared memory: the ring's accesses go through memory segments, which
 * model checking does not see). Bounded for CI; {@code -Dregmem.lincheck.scale} scales it as for the
 * other Lincheck tests.
 */
@ExtendWith(NoLeaks.class)
public class RingLincheckTest {
    private final MemorySegment memory = Arena.ofAuto().allocate(Ring.size(4096), 4096);
    private final Ring producer = new Ring(memory);
    private final Ring consumer = new Ring(memory);
    /** The producer's next sequence number (the producer's own). */
    private long sent;

    private boolean offer(int length) {
        long at = producer.claim(1, length);
        if (at < 0) {
            return false;
        }
        memory.set(JAVA_LONG, at, sent++);
        if (length >= 16) {
            memory.set(JAVA_LONG, at + length - 8, -sent); // the record's last bytes too
        }
        producer.publish();
        return true;
    }

    /** Producer: a record of 16 bytes; false if the ring is full. */
    @Operation(nonParallelGroup = "producer")
    public boolean offerSmall() {
        return offer(16);
    }

    /** Producer: a record of 1,000 bytes (a quarter of the ring, header included, is at most 1,016). */
    @Operation(nonParallelGroup = "producer")
    public boolean offerLarge() {
        return offer(1000);
    }

    /** Consumer: the oldest record's sequence number (its last bytes checked), or -1 if none; its room given back. */
    @Operation(nonParallelGroup = "consumer")
    public long poll() {
        if (!consumer.next()) {
            return -1;
        }
        long seq = memory.get(JAVA_LONG, consumer.payload);
        long last = memory.get(JAVA_LONG, consumer.payload + consumer.length - 8);
        consumer.consume();
        consumer.release();
        return last == -(seq + 1) ? seq : -2 - seq; // a torn record shows as another value
    }

    @Test
    void isLinearizable() {
        // The budget's properties as the registration module's LincheckBudget reads them (its package is
        // the registration module's own, out of this module's reach).
        int scale = Math.max(1, Integer.getInteger("regmem.lincheck.scale", 1));
        new StressOptions()
                .iterations(Integer.getInteger("regmem.lincheck.iterations", 20 * scale))
                .invocationsPerIteration(Integer.getInteger("regmem.lincheck.invocations", 2000))
                .threads(2)
                .actorsPerThread(6)
                .check(RingLincheckTest.class);
    }
}
