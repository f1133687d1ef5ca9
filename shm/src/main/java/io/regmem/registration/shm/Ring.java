package io.regmem.registration.shm;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.VarHandle;

/**
 * One single-producer, single-consumer ring of variable-length records in memory two processes share:
 * one side only writes it, the other only reads it. Neither trusts the other: whatever the peer writes
 * into the shared memory (its counter, record lengths, types, payloads, at any moment), this side's
 * accesses stay inside the ring's segment, and a value that breaks the ring's rules raises
 * {@link Violation} (the connection then ends) instead of being used.
 *
 * <p>Layout at the ring's base: the producer's tail (a byte count, only growing) at 0, the
 * consumer's head at 128 (two cache lines apart, as the adjacent-line prefetcher fetches pairs), then
 * the data from 256, {@code capacity} bytes (a power of two). A record is an 8-byte header (payload length u32, type u32), then the payload,
 * padded to 8 bytes; a record never wraps: when the space to the end is too short the producer fills
 * it with a {@link #PAD} record and starts again at offset 0 (as Agrona's rings do). The producer
 * writes records past its published tail and then publishes the tail with a release store; the
 * consumer reads the tail with an acquire load, takes each record's header once into locals, checks
 * it, and publishes its head (release) once it no longer needs the records' memory.
 *
 * <p>Each side keeps its own position privately and reads the other's counter only to learn how far
 * it may go: a counter that moves backwards, beyond the other's position, or by more than the
 * capacity, is a violation. One thread at a time uses each end (the caller's lock).
 *
 * <p>Public only for the benchmarks (the package is not exported: not API).
 */
public final class Ring {
    /** Where the data starts, from the ring's base. */
    public static final long HEADER = 256;
    static final long TAIL = 0;
    static final long HEAD = 128;
    /** A record's header: payload length, type. */
    static final int RECORD_HEADER = 8;
    /** The type of the filler record at the end of the data. */
    static final int PAD = 0;

    private static final VarHandle LONG = JAVA_LONG.varHandle();

    /** A rule of the ring broken by the other side (or memory that ended): the connection cannot go on. */
    public static final class Violation extends RuntimeException {
        Violation(String message) {
            super(message, null, false, false);
        }
    }

    private final MemorySegment ring;
    private final long capacity;
    private final long mask;
    /** The largest record payload taken: a quarter of the capacity. */
    final int maxPayload;
    /** This side's position: the producer's tail (written, perhaps not yet published), or the consumer's head. */
    private long position;
    /** The producer: the consumer's head as last read. The consumer: the producer's tail as last read. */
    private long other;
    /** The producer's last published tail; the consumer's last published head. */
    private long published;

    /** The ring at {@code ring} (header and data: {@link #HEADER} + capacity bytes). */
    public Ring(MemorySegment ring) {
        this.ring = ring;
        this.capacity = ring.byteSize() - HEADER;
        if (capacity < 4096 || Long.bitCount(capacity) != 1) {
            throw new IllegalArgumentException("a ring's data is a power of two of at least 4096 bytes, got " + capacity);
        }
        this.mask = capacity - 1;
        this.maxPayload = (int) Math.min(Integer.MAX_VALUE & ~7, capacity / 4 - RECORD_HEADER);
    }

    /** The bytes a ring of {@code capacity} data bytes occupies. */
    public static long size(long capacity) {
        return HEADER + capacity;
    }

    long capacity() {
        return capacity;
    }

    private static long align(long n) {
        return (n + 7) & ~7L;
    }

    // ---- the producer ----

    /**
     * Claims room for a record of {@code type} with {@code length} payload bytes and writes its header.
     *
     * @return the payload's offset in the ring's segment ({@link #segment()}), or -1 if the ring is too
     *         full now (nothing changed); the record is the consumer's once {@link #publish()} ran
     * @throws Violation if the consumer's head broke the rules
     */
    public long claim(int type, int length) {
        if (length < 0 || length > maxPayload) {
            throw new IllegalArgumentException("a record's payload is 0 to " + maxPayload + " bytes, got " + length);
        }
        long total = align(RECORD_HEADER + (long) length);
        long at = position & mask;
        long pad = at + total > capacity ? capacity - at : 0;
        if (position + pad + total - other > capacity) {
            readHead();
            if (position + pad + total - other > capacity) {
                return -1;
            }
        }
        if (pad > 0) {
            writeHeader(at, PAD, (int) (pad - RECORD_HEADER));
            position += pad;
            at = 0;
        }
        writeHeader(at, type, length);
        position += total;
        return HEADER + at + RECORD_HEADER;
    }

    private void writeHeader(long at, int type, int length) {
        ring.set(JAVA_INT, HEADER + at, length);
        ring.set(JAVA_INT, HEADER + at + 4, type);
    }

    /**
     * Turns the record whose payload is at {@code payload} (claimed, not yet published) into filler:
     * the consumer skips it. For a claim whose bytes could not be written after all.
     */
    void cancel(long payload) {
        ring.set(JAVA_INT, payload - RECORD_HEADER + 4, PAD);
    }

    /** True if a record of {@code length} payload bytes fits now. */
    boolean fits(int length) {
        long total = align(RECORD_HEADER + (long) length);
        long at = position & mask;
        long need = (at + total > capacity ? capacity - at : 0) + total;
        if (position + need - other > capacity) {
            readHead();
        }
        return position + need - other <= capacity;
    }

    private void readHead() {
        long h = (long) LONG.getAcquire(ring, HEAD);
        if (h < other || h > published) {
            throw new Violation("the consumer's head moved to " + h + " (it was " + other + ", the tail published is "
                    + published + ")");
        }
        other = h;
    }

    /** Publishes the records claimed so far to the consumer. */
    public void publish() {
        if (published != position) {
            published = position;
            LONG.setRelease(ring, TAIL, position);
        }
    }

    /** True if every published record was consumed (the consumer's head reached the tail). */
    boolean drained() {
        readHead();
        return other == published;
    }

    // ---- the consumer ----

    /** The type of the record {@link #next()} found. */
    public int type;
    /** Its payload's length. */
    public int length;
    /** Its payload's offset in the ring's segment. */
    public long payload;

    /**
     * Finds the next record, skipping filler: sets {@link #type}, {@link #length} and {@link #payload}.
     * The record stays the consumer's until {@link #consume()}.
     *
     * @return false if none was published
     * @throws Violation if the producer broke the ring's rules (its tail, a record's header)
     */
    public boolean next() {
        while (true) {
            if (position == other) {
                long t = (long) LONG.getAcquire(ring, TAIL);
                if (t == other) {
                    return false;
                }
                if (t < other || t - published > capacity || (t & 7) != 0) {
                    throw new Violation("the producer's tail moved to " + t + " (it was " + other + ", the head is "
                            + published + ", the capacity " + capacity + ")");
                }
                other = t;
            }
            long at = position & mask;
            int len = ring.get(JAVA_INT, HEADER + at);
            int typ = ring.get(JAVA_INT, HEADER + at + 4);
            long total = align(RECORD_HEADER + (len & 0xffff_ffffL));
            if (len < 0 || at + total > capacity || position + total > other) {
                throw new Violation("a record at " + position + " claims " + len + " payload bytes (to the tail "
                        + (other - position) + ", to the end " + (capacity - at) + ")");
            }
            if (typ == PAD) {
                position += total;
                continue;
            }
            type = typ;
            length = len;
            payload = HEADER + at + RECORD_HEADER;
            return true;
        }
    }

    /** True if the producer published records this consumer has not taken yet (any thread; racy). */
    boolean pending() {
        return (long) LONG.getAcquire(ring, TAIL) != position;
    }

    /** Done with the record {@link #next()} found: the position moves past it (published by {@link #release()}). */
    public void consume() {
        position += align(RECORD_HEADER + (long) length);
    }

    /** Gives the consumed records' memory back to the producer. */
    public void release() {
        if (published != position) {
            published = position;
            LONG.setRelease(ring, HEAD, position);
        }
    }

    /** The ring's memory (header and data): payload offsets are relative to it. */
    public MemorySegment segment() {
        return ring;
    }
}
