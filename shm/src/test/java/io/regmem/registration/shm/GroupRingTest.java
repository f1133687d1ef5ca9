package io.regmem.registration.shm;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.regmem.core.internal.Libc;
import io.regmem.core.internal.Mman;
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A group's publication ring: records in order across the wrap, a reader that starts at the tail or
 * the start, a lapped reader that goes on at the latest record, a ring whose fields break the protocol
 * read as broken (never an exception, never a record out of bounds), a writer and two readers on
 * separate threads that never hand over a torn record, and a publication's memfd that nobody but its
 * writer can map writable.
 */
@ExtendWith(NoLeaks.class)
class GroupRingTest {
    private static final int CAPACITY = GroupRing.MIN_CAPACITY;
    private final Arena arena = Arena.ofAuto();
    private final MemorySegment ring = arena.allocate(GroupRing.bytes(CAPACITY), 4096);
    private final MemorySegment src = arena.allocate(4200, 8);
    private final MemorySegment into = arena.allocate(4200, 8);

    private void write(GroupRing.Writer w, long seq, int length) {
        src.set(JAVA_LONG_UNALIGNED, 0, seq);
        src.set(JAVA_LONG_UNALIGNED, length - 8, ~seq);
        w.write(src, length);
    }

    private long read(GroupRing.Reader r) {
        int n = r.next(into);
        if (n < 0) {
            return n;
        }
        assertThat(into.get(JAVA_LONG_UNALIGNED, n - 8)).as("the record's end").isEqualTo(~into.get(JAVA_LONG_UNALIGNED, 0));
        return into.get(JAVA_LONG_UNALIGNED, 0);
    }

    @Test
    void recordsComeInOrderAcrossTheWrapFromTheStartOrFromTheTail() {
        GroupRing.Writer w = new GroupRing.Writer(ring, CAPACITY);
        assertThat(GroupRing.Reader.check(ring.asReadOnly(), ring.byteSize())).isNull();
        GroupRing.Reader fromStart = new GroupRing.Reader(ring.asReadOnly(), true);
        write(w, 0, 100);
        GroupRing.Reader fromTail = new GroupRing.Reader(ring.asReadOnly(), false);
        Random random = new Random(7);
        for (long s = 1; s < 3000; s++) {
            write(w, s, 16 + random.nextInt(4000));
            assertThat(read(fromStart)).isEqualTo(s - 1);
            assertThat(read(fromTail)).isEqualTo(s);
        }
        assertThat(read(fromStart)).isEqualTo(2999);
        assertThat(read(fromStart)).isEqualTo(GroupRing.Reader.NONE);
        assertThat(read(fromTail)).isEqualTo(GroupRing.Reader.NONE);
        assertThat(fromStart.laps()).isZero();
        assertThat(fromStart.ended()).isFalse();
        w.close();
        assertThat(fromStart.ended()).isTrue();
    }

    @Test
    void aLappedReaderGoesOnAtARecordOfTheLastStrideAndReadsOnInOrder() {
        GroupRing.Writer w = new GroupRing.Writer(ring, CAPACITY);
        GroupRing.Reader r = new GroupRing.Reader(ring.asReadOnly(), true);
        for (long s = 0; s < 2000; s++) { // 2000 x 104 bytes: three times round
            write(w, s, 96);
        }
        long first = read(r);
        assertThat(r.laps()).isOne();
        int perStride = CAPACITY / GroupRing.STRIDES / 104;
        assertThat(first).as("where the lapped reader goes on: within the last stride written")
                .isBetween(1999L - 2 * perStride, 1999L);
        for (long s = first + 1; s < 2000; s++) {
            assertThat(read(r)).isEqualTo(s);
        }
        assertThat(read(r)).isEqualTo(GroupRing.Reader.NONE);
        write(w, 2000, 96);
        assertThat(read(r)).isEqualTo(2000);
        assertThat(r.laps()).isOne();
    }

    @Test
    void aReaderBehindByLessThanTheRingLessTwoStridesIsNeverLappedNorReadsPastTheLastRecordAndTheIntentRunsAtMostAStrideAhead() {
        GroupRing.Writer w = new GroupRing.Writer(ring, CAPACITY);
        GroupRing.Reader r = new GroupRing.Reader(ring.asReadOnly(), true);
        long stride = CAPACITY / GroupRing.STRIDES;
        Random random = new Random(11);
        long next = 0;
        for (long s = 0; s < 20_000; s++) {
            write(w, s, 16 + random.nextInt(1000));
            long tail = ring.get(JAVA_LONG, GroupRing.TAIL);
            long intent = ring.get(JAVA_LONG, GroupRing.TAIL_INTENT);
            assertThat(intent).as("the intent after record %d", s).isGreaterThanOrEqualTo(tail).isLessThanOrEqualTo(tail + stride);
            assertThat(ring.get(JAVA_LONG, GroupRing.LATEST)).as("the latest after record %d", s)
                    .isLessThan(tail).isGreaterThanOrEqualTo(tail - 2 * stride - 1024);
            if (random.nextInt(8) == 0) { // the reader catches up now and then, staying well within the ring
                while (next <= s) {
                    assertThat(read(r)).isEqualTo(next++);
                }
                assertThat(read(r)).as("past the last record")
                        .isEqualTo(GroupRing.Reader.NONE);
            }
        }
        assertThat(r.laps()).isZero();
    }

    @Test
    void everyRecordStartsOnACacheLineOfItsOwn() {
        GroupRing.Writer w = new GroupRing.Writer(ring, CAPACITY);
        GroupRing.Reader r = new GroupRing.Reader(ring.asReadOnly(), true);
        Random random = new Random(11);
        for (long s = 0; s < 3000; s++) {
            int length = 1 + random.nextInt(300);
            long at = w.claim(length); // where the bytes go: 8 past the record's start
            assertThat((at - 8) % GroupRing.ALIGN).as("record %d of %d bytes starts on a line", s, length).isZero();
            src.set(JAVA_LONG_UNALIGNED, 0, s);
            MemorySegment.copy(src, 0, ring, at, length);
            w.commit();
            assertThat(ring.get(JAVA_LONG, GroupRing.TAIL) % GroupRing.ALIGN).isZero();
            assertThat(r.next(into)).isEqualTo(length);
        }
        assertThat(r.laps()).isZero();
    }

    @Test
    void aClaimNeverCommittedIsNeverReadAndTheNextClaimTakesItsPlace() {
        GroupRing.Writer w = new GroupRing.Writer(ring, CAPACITY);
        GroupRing.Reader r = new GroupRing.Reader(ring.asReadOnly(), true);
        write(w, 0, 100);
        long at = w.claim(100); // (the source failed under the copy: half written, never committed)
        ring.asSlice(at, 100).fill((byte) 0x5A);
        assertThat(read(r)).isEqualTo(0);
        assertThat(read(r)).as("the claim left is not a record").isEqualTo(GroupRing.Reader.NONE);
        write(w, 1, 40);
        assertThat(read(r)).isEqualTo(1);
        assertThat(read(r)).isEqualTo(GroupRing.Reader.NONE);
        assertThat(r.laps()).isZero();
        assertThatThrownBy(w::commit).as("a commit without a claim").isInstanceOf(IllegalStateException.class);
    }

    @Test
    void aClaimLeftOverRecordsAReaderHasNotTakenKeepsThemUnreadable() {
        GroupRing.Writer w = new GroupRing.Writer(ring, CAPACITY);
        GroupRing.Reader r = new GroupRing.Reader(ring.asReadOnly(), true);
        long s = 0;
        while (ring.get(JAVA_LONG, GroupRing.TAIL) + 1008 <= CAPACITY - 500) {
            write(w, s++, 1000); // (the reader takes none: the ring fills up to about 500 bytes before its end)
        }
        long at = w.claim(4000); // no room before the end: padded there, written over the reader's first records
        ring.asSlice(at, 4000).fill((byte) 0x5A);
        write(w, 777, 16); // a small record after it: its claim must not make the overwritten records valid again
        assertThat(read(r)).as("the overwritten records are lapped, not read").isEqualTo(777);
        assertThat(r.laps()).isOne();
    }

    @Test
    void aRingWhoseFieldsBreakTheProtocolReadsAsBrokenNeverOutOfBounds() {
        List<java.util.function.Consumer<MemorySegment>> breaks = new ArrayList<>();
        breaks.add(m -> m.set(JAVA_INT, GroupRing.HEADER, -5));                    // a negative length
        breaks.add(m -> m.set(JAVA_INT, GroupRing.HEADER, CAPACITY));              // a record past the end
        breaks.add(m -> m.set(JAVA_INT, GroupRing.HEADER + 4, 77));                // an unknown type
        breaks.add(m -> {                                                          // padding that does not reach the end
            m.set(JAVA_INT, GroupRing.HEADER, 8);
            m.set(JAVA_INT, GroupRing.HEADER + 4, 2);
        });
        breaks.add(m -> m.set(JAVA_LONG, GroupRing.TAIL, 13));                    // a tail that is not aligned
        breaks.add(m -> m.set(JAVA_LONG, GroupRing.TAIL, 136));                   // 8-aligned, not on a line
        breaks.add(m -> {                                                          // lapped, and a latest behind the reader
            m.set(JAVA_LONG, GroupRing.TAIL_INTENT, 10L * CAPACITY);
            m.set(JAVA_LONG, GroupRing.LATEST, -8);
        });
        breaks.add(m -> {                                                          // lapped, and a latest past the tail
            m.set(JAVA_LONG, GroupRing.TAIL_INTENT, 10L * CAPACITY);
            m.set(JAVA_LONG, GroupRing.LATEST, 20L * CAPACITY);
        });
        for (var b : breaks) {
            ring.fill((byte) 0);
            GroupRing.Writer w = new GroupRing.Writer(ring, CAPACITY);
            GroupRing.Reader r = new GroupRing.Reader(ring.asReadOnly(), true);
            write(w, 0, 64);
            b.accept(ring);
            assertThat(r.next(into)).isEqualTo(GroupRing.Reader.BROKEN);
        }
        ring.fill((byte) 0);
        new GroupRing.Writer(ring, CAPACITY);
        ring.set(JAVA_LONG, 8, 12345);
        assertThat(GroupRing.Reader.check(ring, ring.byteSize())).contains("capacity");
        ring.set(JAVA_INT, 0, 0);
        assertThat(GroupRing.Reader.check(ring, ring.byteSize())).contains("not a publication ring");
        assertThat(GroupRing.Reader.check(ring, 100)).contains("not a publication ring");
    }

    @Test
    void aWriterAndTwoReadersOnTheirOwnThreadsNeverHandOverATornRecord() throws Exception {
        GroupRing.Writer w = new GroupRing.Writer(ring, CAPACITY);
        AtomicBoolean done = new AtomicBoolean();
        long records = 2_000_000;
        List<Thread> readers = new ArrayList<>();
        long[][] seen = new long[2][3]; // records, laps, records out of order or torn
        for (int k = 0; k < 2; k++) {
            int me = k;
            GroupRing.Reader r = new GroupRing.Reader(ring.asReadOnly(), true);
            MemorySegment mine = Arena.ofAuto().allocate(4200, 8);
            readers.add(Thread.ofPlatform().start(() -> {
                long last = -1;
                while (true) {
                    boolean end = done.get();
                    int n = r.next(mine);
                    if (n < 0) {
                        if (end) {
                            break;
                        }
                        Thread.onSpinWait();
                        continue;
                    }
                    long s = mine.get(JAVA_LONG_UNALIGNED, 0);
                    boolean whole = n >= 16 && mine.get(JAVA_LONG_UNALIGNED, n - 8) == ~s
                            && mine.get(JAVA_LONG_UNALIGNED, 8) == s * 31;
                    if (!whole || s <= last) {
                        seen[me][2]++;
                    }
                    last = s;
                    seen[me][0]++;
                }
                seen[me][1] = r.laps();
            }));
        }
        Random random = new Random(11);
        for (long s = 0; s < records; s++) {
            int length = 24 + 8 * random.nextInt(64);
            src.set(JAVA_LONG_UNALIGNED, 0, s);
            src.set(JAVA_LONG_UNALIGNED, 8, s * 31);
            src.set(JAVA_LONG_UNALIGNED, length - 8, ~s);
            w.write(src, length);
        }
        done.set(true);
        for (Thread t : readers) {
            t.join(60_000);
            assertThat(t.isAlive()).isFalse();
        }
        for (long[] s : seen) {
            assertThat(s[2]).as("records torn or out of order").isZero();
            assertThat(s[0]).as("records read").isPositive();
        }
    }

    @Test
    void aPublicationsMemfdCannotBeMappedWritableByAnyoneButItsWriter() {
        long size = GroupRing.bytes(CAPACITY);
        int fd = SharedFile.createPublication("regmem-group-test", size);
        try (Arena a = Arena.ofShared()) {
            MemorySegment mine = SharedFile.map(fd, size, a);
            assertThat(SharedFile.verifyPublication(fd)).as("not sealed yet").isEqualTo(-1);
            SharedFile.sealPublication(fd);
            assertThat(SharedFile.verifyPublication(fd)).isEqualTo(size);
            mine.set(JAVA_LONG, 0, 42); // the writer's own mapping stays writable
            try (Arena c = Arena.ofConfined()) {
                long at = Mman.mmap(c.allocate(Libc.CAPTURE), 0L, size, Mman.PROT_READ | Mman.PROT_WRITE, Mman.MAP_SHARED, fd, 0L);
                assertThat(at).as("a second writable mapping is refused (EPERM)").isEqualTo(-1L);
            }
            try (Arena r = Arena.ofShared()) {
                MemorySegment theirs = SharedFile.mapReadOnly(fd, size, r);
                assertThat(theirs.get(JAVA_LONG, 0)).isEqualTo(42);
                assertThatThrownBy(() -> theirs.set(JAVA_LONG, 0, 1)).isInstanceOf(IllegalArgumentException.class);
            }
        } finally {
            SharedFile.close(fd);
        }
    }
}
