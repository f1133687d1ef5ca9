package io.regmem.registration.shm;

import static java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED;

import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import org.jetbrains.lincheck.datastructures.Operation;
import org.jetbrains.lincheck.datastructures.StressOptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Lincheck on a group's publication ring in its roles: one writer thread writes records of two sizes,
 * each carrying the next sequence number at its start and its end; one reader thread (at the ring's
 * tail, read-only; readers share nothing but the ring, so one stands for each: GroupRingTest runs two
 * at once) takes the next record. The ring has 4 KiB here (smaller than a device makes one) and starts
 * near its end, so that the records wrap (padding, then the start) within a few operations; they never
 * lap the reader (a lap is not linearizable by design: a reader may go on at the latest record as soon
 * as the writer starts to overwrite its position, which GroupRingTest checks). Every run must be
 * linearizable against the same operations run one after another: records arrive whole, once, in
 * order, across the wrap. Stress mode, bounded for CI.
 */
@ExtendWith(NoLeaks.class)
public class GroupRingLincheckTest {
    private static final int CAPACITY = 4096;
    /** One allocation per instance (Lincheck makes tens of thousands): the ring, then the two buffers. */
    private final MemorySegment all = Arena.ofAuto().allocate(GroupRing.bytes(CAPACITY) + 2 * 1024, 64);
    private final MemorySegment memory = all.asSlice(0, GroupRing.bytes(CAPACITY));
    private final GroupRing.Writer writer = new GroupRing.Writer(memory, CAPACITY);
    private final GroupRing.Reader first;
    private final MemorySegment source = all.asSlice(GroupRing.bytes(CAPACITY), 1024);
    private final MemorySegment into1 = all.asSlice(GroupRing.bytes(CAPACITY) + 1024, 1024);
    private long sent;

    /** The ring 3,952 bytes on, near its end (so that the operations' records wrap), the reader at its tail. */
    public GroupRingLincheckTest() {
        for (int i = 0; i < 19; i++) {
            write(200);
        }
        first = new GroupRing.Reader(memory.asReadOnly(), false);
    }

    private void write(int length) {
        source.set(JAVA_LONG_UNALIGNED, 0, sent);
        source.set(JAVA_LONG_UNALIGNED, length - 8, -sent - 1);
        sent++;
        writer.write(source, length);
    }

    /** Writer: a record of 16 bytes. */
    @Operation(nonParallelGroup = "writer")
    public void writeSmall() {
        write(16);
    }

    /** Writer: a record of 400 bytes (six of them and the padding at the end stay within the ring: no lap). */
    @Operation(nonParallelGroup = "writer")
    public void writeLarge() {
        write(400);
    }

    private static long read(GroupRing.Reader r, MemorySegment into) {
        int n = r.next(into);
        if (n < 0) {
            return n;
        }
        long seq = into.get(JAVA_LONG_UNALIGNED, 0);
        return into.get(JAVA_LONG_UNALIGNED, n - 8) == -seq - 1 ? seq : -1000 - seq; // a torn record: another value
    }

    /** The reader: the next record's number, or -1 if none. */
    @Operation(nonParallelGroup = "reader")
    public long read() {
        return read(first, into1);
    }

    @Test
    void isLinearizable() {
        int scale = Math.max(1, Integer.getInteger("regmem.lincheck.scale", 1));
        new StressOptions()
                .iterations(Integer.getInteger("regmem.lincheck.iterations", 20 * scale))
                .invocationsPerIteration(Integer.getInteger("regmem.lincheck.invocations", 2000))
                .threads(2)
                .actorsPerThread(6)
                .check(GroupRingLincheckTest.class);
    }
}
