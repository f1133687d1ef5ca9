package io.regmem.registration.shm;

import io.regmem.registration.udp.LocalGroups;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;

/**
 * One QP's publication to a multicast group on this host: a one-writer, many-reader broadcast ring in
 * shared memory, the protocol of Agrona's {@code BroadcastTransmitter} and {@code CopyBroadcastReceiver}
 * (and of Aeron IPC's publications): the writer never waits for a reader; each reader keeps its own
 * position, copies a record out and then checks that the writer did not overwrite it meanwhile; a reader
 * that the writer laps starts again at the record that began the last stride the writer opened (a
 * sixteenth of the ring; the datagrams it missed show as a gap in their sequence numbers, counted
 * {@code LOST}).
 *
 * <pre>
 *   0 i32 magic "RGPB"   4 i32 version 1   8 i64 capacity (a power of two)   16 i32 closed (1: the writer ended)
 *  64 i64 tail intent (at or past where the writer's record ends, stored before it writes)
 *  72 i64 tail (where the records end, stored after it wrote)
 *  80 i64 latest (where the first record of the last stride starts)
 * 256 the records: i32 length, i32 type (1 datagram, 2 padding to the ring's end), the bytes; each starts
 *     on a cache line ({@link #ALIGN})
 * </pre>
 *
 * <p>A record on lines of its own: a member copying one out never holds a line the writer's next
 * record goes into, and a 64-byte datagram's record (header, datagram header and tag) takes two lines
 * where an 8-aligned one took three in most places.
 *
 * <p>The three counters share one cache line, as in Agrona's broadcast buffer: only the writer stores
 * them, and a reader that polls the tail has the intent and the latest in the same transfer. Unlike
 * Agrona's, the intent runs up to a stride (a sixteenth of the ring) ahead of the records and is stored,
 * with the latest, once a stride: most records store only the tail into that line, whose every store
 * takes it from the members polling it. The price: a reader more than the ring less a stride behind
 * may count as lapped even where the records it missed are still there.
 *
 * <p>The writer is the publishing process (the memfd's only writable mapping: sealed
 * {@code F_SEAL_FUTURE_WRITE} once mapped); a reader maps it read-only and checks every field it reads
 * (a record that does not fit, a counter that goes back, an unknown type: the ring is broken, and left).
 */
final class GroupRing {
    static final int MAGIC = 0x42504752; // "RGPB", little-endian
    static final int VERSION = 3;
    /** Records start on a cache line of their own. */
    static final int ALIGN = 64;
    static final int HEADER = 256;
    private static final long CAPACITY = 8;
    private static final long CLOSED = 16;
    static final long TAIL_INTENT = 64;
    static final long TAIL = 72;
    static final long LATEST = 80;
    private static final int DATA = 1;
    private static final int PADDING = 2;
    static final int MIN_CAPACITY = 64 << 10;
    /** The intent runs up to a sixteenth of the ring ahead of the records ({@link Writer#intend}). */
    static final int STRIDES = 16;
    static final int MAX_CAPACITY = 64 << 20;
    private static final VarHandle LONG = ValueLayout.JAVA_LONG.varHandle();
    private static final VarHandle INT = ValueLayout.JAVA_INT.varHandle();

    private GroupRing() {
    }

    /** The bytes of a ring of {@code capacity}. */
    static long bytes(int capacity) {
        return HEADER + (long) capacity;
    }

    /** True if {@code capacity} is one a ring may have. */
    static boolean validCapacity(long capacity) {
        return capacity >= MIN_CAPACITY && capacity <= MAX_CAPACITY && Long.bitCount(capacity) == 1;
    }

    private static int align(int n) {
        return (n + ALIGN - 1) & -ALIGN;
    }

    /**
     * The writing side, in the publisher (its QP's lock held): {@link #claim} room for a record, write
     * its bytes where the claim says, {@link #commit}; a claim never committed (the source failed
     * under the copy) is taken again by the next one, and readers never see it.
     */
    static final class Writer implements LocalGroups.Claim {
        private final MemorySegment ring;
        private final int capacity;
        private long tail;
        /** The highest tail intent stored (it never goes back: a record a claim left half-written stays invalid). */
        private long intent;
        /** How far ahead of a record's end the intent is stored: a sixteenth of the ring. */
        private final long stride;
        /** The last intent stored opened a stride: the record committed next is the latest one stored. */
        private boolean strideStart;
        /** The open claim: where its record starts, and its bytes with their header. */
        private long claimed = -1;
        private int record;

        /** Formats {@code ring} (fresh, zeroed memory of {@link #bytes} for {@code capacity}). */
        Writer(MemorySegment ring, int capacity) {
            this.ring = ring;
            this.capacity = capacity;
            this.stride = capacity / STRIDES;
            ring.set(ValueLayout.JAVA_INT, 0, MAGIC);
            ring.set(ValueLayout.JAVA_INT, 4, VERSION);
            ring.set(ValueLayout.JAVA_LONG, CAPACITY, capacity);
            VarHandle.releaseFence();
        }

        /** Writes {@code src[0, length)} as the next record, overwriting the oldest if need be. */
        void write(MemorySegment src, int length) {
            MemorySegment.copy(src, 0, ring, claim(length), length);
            commit();
        }

        @Override
        public MemorySegment ring() {
            return ring;
        }

        @Override
        public boolean open() {
            return ring.scope().isAlive();
        }

        /**
         * Claims the next record, of {@code length} bytes (at most the capacity less 8), overwriting
         * the oldest if need be: where in {@link #ring()} its bytes go. Readers see none of it until
         * {@link #commit()}.
         */
        @Override
        public long claim(int length) {
            int bytes = align(8 + length);
            long t = tail;
            int at = (int) (t & (capacity - 1));
            int toEnd = capacity - at;
            if (bytes > toEnd) { // the record does not fit before the end: pad to it, write it at the start
                intend(t + toEnd + bytes);
                ring.set(ValueLayout.JAVA_INT, HEADER + at, toEnd - 8);
                ring.set(ValueLayout.JAVA_INT, HEADER + at + 4L, PADDING);
                t += toEnd;
                at = 0;
            } else {
                intend(t + bytes);
            }
            ring.set(ValueLayout.JAVA_INT, HEADER + at, length);
            ring.set(ValueLayout.JAVA_INT, HEADER + at + 4L, DATA);
            claimed = t;
            record = bytes;
            return HEADER + at + 8L;
        }

        /**
         * Says, before a record's bytes are written up to {@code end}, that the records before
         * {@code end - capacity} are no longer valid: the intent stored runs a {@link #stride} ahead, so
         * that most records store only the tail into the counters' line (each store takes the line
         * from the members polling it).
         */
        private void intend(long end) {
            if (end > intent) {
                intent = (end + stride) & -stride;
                LONG.setRelease(ring, TAIL_INTENT, intent);
                strideStart = true;
            }
            VarHandle.storeStoreFence();
        }

        /** The claimed record is written: readers may take it. */
        @Override
        public void commit() {
            long t = claimed;
            if (t < 0) {
                throw new IllegalStateException("no record is claimed");
            }
            claimed = -1;
            if (strideStart) { // (the first record of a stride: where a lapped reader goes on)
                strideStart = false;
                LONG.setRelease(ring, LATEST, t);
            }
            tail = t + record;
            LONG.setRelease(ring, TAIL, tail);
        }

        /** Says the writer ended: readers take what is left, then leave. */
        void close() {
            INT.setRelease(ring, CLOSED, 1);
        }
    }

    /** A reading side, in a member (one thread at a time: its device's receive lock). */
    static final class Reader {
        /** What {@link #next} found besides a record. */
        static final int NONE = -1;
        static final int BROKEN = -2;
        private final MemorySegment ring;
        private final int capacity;
        private long cursor;
        private long laps;

        /**
         * Reads {@code ring} (mapped read-only, its header checked by {@link #check}), from its start if
         * {@code fromStart} (a publication made after this member joined: every record is for it), else
         * from its tail now (the records written after this call).
         */
        Reader(MemorySegment ring, boolean fromStart) {
            this.ring = ring;
            this.capacity = (int) ring.get(ValueLayout.JAVA_LONG, CAPACITY);
            this.cursor = fromStart ? 0 : Math.max(0, (long) LONG.getAcquire(ring, TAIL)) & -ALIGN;
        }

        /** Why the header of {@code ring} ({@code size} bytes mapped) is not a ring's, or null. */
        static String check(MemorySegment ring, long size) {
            if (size < HEADER || ring.get(ValueLayout.JAVA_INT, 0) != MAGIC || ring.get(ValueLayout.JAVA_INT, 4) != VERSION) {
                return "not a publication ring of this version";
            }
            long capacity = ring.get(ValueLayout.JAVA_LONG, CAPACITY);
            if (!validCapacity(capacity) || bytes((int) capacity) != size) {
                return "its capacity " + capacity + " does not fit its " + size + " bytes";
            }
            return null;
        }

        /** True once the writer ended and every record was taken. */
        boolean ended() {
            return (int) INT.getAcquire(ring, CLOSED) != 0 && (long) LONG.getAcquire(ring, TAIL) <= cursor;
        }

        /** True if no record is waiting. */
        boolean drained() {
            return (long) LONG.getAcquire(ring, TAIL) <= cursor;
        }

        /** How often the writer lapped this reader. */
        long laps() {
            return laps;
        }

        /**
         * Copies the next record into {@code into}.
         *
         * @return its length; {@link #NONE} if there is none now; {@link #BROKEN} if a field is not
         *         what the protocol allows (the ring is not to be read again)
         */
        int next(MemorySegment into) {
            for (int tries = 0; tries < 16; tries++) {
                long tail = (long) LONG.getAcquire(ring, TAIL);
                if ((tail & (ALIGN - 1)) != 0) {
                    return BROKEN;
                }
                if (tail <= cursor) {
                    return NONE;
                }
                if (!valid(cursor)) {
                    if (!lapped()) {
                        return BROKEN;
                    }
                    continue;
                }
                int at = (int) (cursor & (capacity - 1));
                int length = ring.get(ValueLayout.JAVA_INT, HEADER + at);
                int type = ring.get(ValueLayout.JAVA_INT, HEADER + at + 4L);
                if (type == PADDING) {
                    if (length != capacity - at - 8) {
                        return BROKEN;
                    }
                    cursor += capacity - at;
                    continue;
                }
                if (type != DATA || length < 0 || length > into.byteSize() || at + 8L + length > capacity) {
                    return BROKEN;
                }
                MemorySegment.copy(ring, HEADER + at + 8L, into, 0, length);
                VarHandle.loadLoadFence();
                if (!valid(cursor)) { // overwritten while it was copied: torn
                    if (!lapped()) {
                        return BROKEN;
                    }
                    continue;
                }
                cursor += align(8 + length);
                return length;
            }
            return NONE; // lapped again and again: the next call goes on
        }

        /** The record at {@code position} is still the one written there (not overwritten since). */
        private boolean valid(long position) {
            return position + capacity > (long) LONG.getAcquire(ring, TAIL_INTENT);
        }

        /** The writer lapped this reader: it goes on from the latest (a stride's first record). False if the counters make no sense. */
        private boolean lapped() {
            long latest = (long) LONG.getAcquire(ring, LATEST);
            long tail = (long) LONG.getAcquire(ring, TAIL); // (read after latest: the writer stores latest first)
            if (latest < cursor || (latest & (ALIGN - 1)) != 0 || latest > tail || tail - latest > capacity) {
                return false;
            }
            laps++;
            cursor = latest;
            return true;
        }
    }
}
