package io.regmem.registration.shm;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The shared ring ({@link Ring}): records arrive whole and in order across threads over a real
 * shared mapping, filler at the end is skipped, a full ring refuses a claim and changes nothing, and
 * whatever a hostile peer writes into the shared memory, the other end only ever raises
 * {@link Ring.Violation} or reads inside the ring.
 */
@ExtendWith(NoLeaks.class)
class RingTest {
    private static final long CAPACITY = 1 << 16;

    /** A ring over a sealed memfd mapped twice (as two processes would): the producer's view and the consumer's. */
    private static MemorySegment[] twoViews(Arena arena) {
        int fd = SharedFile.create("ring-test", Ring.size(CAPACITY));
        try {
            return new MemorySegment[] {SharedFile.map(fd, Ring.size(CAPACITY), arena),
                SharedFile.map(fd, Ring.size(CAPACITY), arena)};
        } finally {
            SharedFile.close(fd);
        }
    }

    @Test
    void recordsArriveWholeAndInOrderAcrossThreadsAndMappings() throws Exception {
        try (Arena arena = Arena.ofShared()) {
            MemorySegment[] v = twoViews(arena);
            Ring producer = new Ring(v[0]);
            Ring consumer = new Ring(v[1]);
            int records = 200_000;
            AtomicReference<Throwable> failure = new AtomicReference<>();
            Thread p = Thread.ofPlatform().start(() -> {
                try {
                    SplittableRandom r = new SplittableRandom(1);
                    for (int i = 0; i < records; i++) {
                        int len = 8 + 8 * r.nextInt(0, 300);
                        long at;
                        while ((at = producer.claim(1 + (i & 3), len)) < 0) {
                            producer.publish();
                            Thread.onSpinWait();
                        }
                        for (int k = 0; k < len; k += 8) {
                            v[0].set(JAVA_LONG, at + k, (long) i * 1_000_003L + k);
                        }
                        if ((i & 7) == 0) {
                            producer.publish();
                        }
                    }
                    producer.publish();
                } catch (Throwable t) {
                    failure.set(t);
                }
            });
            SplittableRandom r = new SplittableRandom(1);
            for (int i = 0; i < records; i++) {
                int len = 8 + 8 * r.nextInt(0, 300);
                long deadline = System.nanoTime() + 30_000_000_000L;
                while (!consumer.next()) {
                    assertThat(System.nanoTime()).as("record %d in time", i).isLessThan(deadline);
                    assertThat(failure.get()).isNull();
                    Thread.onSpinWait();
                }
                assertThat(consumer.type).isEqualTo(1 + (i & 3));
                assertThat(consumer.length).isEqualTo(len);
                for (int k = 0; k < len; k += 8) {
                    if (v[1].get(JAVA_LONG, consumer.payload + k) != (long) i * 1_000_003L + k) {
                        throw new AssertionError("record " + i + " byte " + k + " damaged");
                    }
                }
                consumer.consume();
                if ((i & 3) == 0) {
                    consumer.release();
                }
            }
            consumer.release();
            p.join();
            assertThat(failure.get()).isNull();
            assertThat(consumer.next()).isFalse();
            assertThat(producer.drained()).isTrue();
        }
    }

    @Test
    void aFullRingRefusesAClaimAndChangesNothing() {
        try (Arena arena = Arena.ofShared()) {
            MemorySegment[] v = twoViews(arena);
            Ring producer = new Ring(v[0]);
            Ring consumer = new Ring(v[1]);
            int len = producer.maxPayload;
            int claimed = 0;
            while (producer.claim(7, len) >= 0) {
                claimed++;
            }
            producer.publish();
            // The largest record is a quarter of the ring, header included; the fourth would leave no
            // room for the header slot after it (zeroed as the next record's "not yet").
            assertThat(claimed).isEqualTo(3);
            assertThat(producer.fits(len)).isFalse();
            int small = 0;
            while (producer.claim(8, 8) >= 0) {
                small++;
            }
            assertThat(small).as("16-byte records fill the last quarter but its last header slot").isEqualTo((int) (CAPACITY / 4 / 16) - 1);
            assertThat(producer.fits(8)).isFalse();
            assertThat(producer.claim(8, 8)).as("a refused claim changes nothing").isEqualTo(-1);
            for (int i = 0; i < claimed; i++) {
                assertThat(consumer.next()).isTrue();
                assertThat(consumer.length).isEqualTo(len);
                consumer.consume();
            }
            assertThat(consumer.next()).as("records claimed are not the consumer's before publish").isFalse();
            producer.publish();
            for (int i = 0; i < small; i++) {
                assertThat(consumer.next()).isTrue();
                assertThat(consumer.type).isEqualTo(8);
                assertThat(consumer.length).isEqualTo(8);
                consumer.consume();
            }
            assertThat(consumer.next()).isFalse();
            consumer.release();
            assertThat(producer.fits(len)).isTrue();
            // Wraps with filler: the next big records go round the end.
            for (int i = 0; i < 10; i++) {
                assertThat(producer.claim(9, len)).isGreaterThanOrEqualTo(0);
                producer.publish();
                assertThat(consumer.next()).isTrue();
                assertThat(consumer.type).isEqualTo(9);
                consumer.consume();
                consumer.release();
            }
        }
    }

    @Test
    void aConsumerThatMovesItsHeadWronglyIsAViolationForTheProducer() {
        try (Arena arena = Arena.ofShared()) {
            MemorySegment[] v = twoViews(arena);
            Ring producer = new Ring(v[0]);
            producer.claim(1, 64);
            producer.publish();
            v[1].set(JAVA_LONG, Ring.HEAD, 4096); // beyond the tail
            assertThatThrownBy(producer::drained).isInstanceOf(Ring.Violation.class).hasMessageContaining("head moved");
        }
    }

    @Test
    void fillerAllRoundTheRingAndAnOverlongRecordAreViolationsNeverAHang() {
        try (Arena arena = Arena.ofShared()) {
            MemorySegment[] v = twoViews(arena);
            for (long at = 0; at < CAPACITY; at += 8) {
                v[0].set(JAVA_LONG, Ring.HEADER + at, 8L); // filler of 8 bytes in every slot
            }
            assertThatThrownBy(new Ring(v[1])::next).isInstanceOf(Ring.Violation.class).hasMessageContaining("filler all round");
            v[0].set(JAVA_LONG, Ring.HEADER, 1L << 32 | (CAPACITY / 4 + 64));
            assertThatThrownBy(new Ring(v[1])::next).isInstanceOf(Ring.Violation.class).hasMessageContaining("at most");
            v[0].set(JAVA_LONG, Ring.HEADER, 1L << 32 | 4);
            assertThatThrownBy(new Ring(v[1])::next).isInstanceOf(Ring.Violation.class).hasMessageContaining("claims 4 bytes");
            v[0].set(JAVA_LONG, Ring.HEADER, 0L);
            assertThat(new Ring(v[1]).next()).as("a zero header is \"not yet\"").isFalse();
        }
    }

    @Test
    void garbageFromAHostileProducerNeverTakesTheConsumerOutsideTheRing() throws Exception {
        try (Arena arena = Arena.ofShared()) {
            MemorySegment[] v = twoViews(arena);
            SplittableRandom r = new SplittableRandom(42);
            int violations = 0;
            int records = 0;
            for (int round = 0; round < 20_000; round++) {
                Ring consumer = new Ring(v[1]);
                // The hostile producer writes anything anywhere: record headers, payloads, some of it
                // plausible (small lengths, known types, filler).
                if (r.nextBoolean()) { // the first record's header: absurd, or plausible (filler included)
                    v[0].set(JAVA_LONG, Ring.HEADER, r.nextBoolean() ? r.nextLong()
                            : (long) r.nextInt(0, 3) << 32 | 8 * r.nextLong(0, CAPACITY / 8 + 64));
                }
                for (int k = 0; k < 16; k++) {
                    long at = r.nextInt(4) == 0 ? Ring.HEADER + 8 * r.nextLong(0, 64)
                            : 8 * r.nextLong(0, Ring.size(CAPACITY) / 8);
                    long value = switch (r.nextInt(5)) {
                        case 0 -> r.nextLong();
                        case 1 -> r.nextLong(0, 2 * CAPACITY);
                        case 2, 3 -> (long) r.nextInt(0, 6) << 32 | (r.nextInt(-8, 4096) & 0xffff_ffffL);
                        default -> 0;
                    };
                    v[0].set(JAVA_LONG, at, value);
                }
                try {
                    for (int n = 0; n < 1000 && consumer.next(); n++) {
                        records++;
                        assertThat(consumer.payload).isBetween(Ring.HEADER, Ring.size(CAPACITY));
                        assertThat(consumer.payload + consumer.length).isLessThanOrEqualTo(Ring.size(CAPACITY));
                        if (consumer.length > 0) {
                            v[1].get(JAVA_BYTE, consumer.payload + consumer.length - 1); // the last byte is in reach
                        }
                        consumer.consume();
                    }
                    consumer.release();
                } catch (Ring.Violation expected) {
                    violations++;
                }
            }
            assertThat(violations).as("garbage was caught").isGreaterThan(1000);
            assertThat(records).as("some garbage looked like records, and stayed inside").isGreaterThan(0);
        }
    }
}
