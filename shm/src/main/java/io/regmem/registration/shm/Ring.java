package io.regmem.registration.shm;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.VarHandle;

/**
 * One single-producer, single-consumer ring of variable-length records in memory two processes share:
 * one side only writes it, the other only reads it. Neither trusts the other: whatever the peer writes
 * into the shared memory (record headers, payloads, its counter, at any moment), this side's accesses
 * stay inside the ring's segment, and a value that breaks the ring's rules raises {@link Violation}
 * (the connection then ends) instead of being used.
 *
 * <p>Layout at the ring's base: the consumer's head (a byte count, only growing) at 128, then the data
 * from 256, {@code capacity} bytes (a power of two). A record is an 8-byte header, then the payload,
 * padded to 8 bytes:
 * <pre>
 *   0 record length u32 (header included: never 0)   4 type u32   8 payload ...
 * </pre>
 * Records publish themselves, as Aeron's term appender's frames do: the consumer finds the next record
 * by reading the header at its position with an acquire load, and a zero header means "not yet"; there
 * is no producer counter. The producer writes a record's payload, and zeroes the header slot that
 * follows it (the next record's, "not yet" until that one is published), before it writes the record's
 * header with a release store; of several records written before one {@link #publish()}, only the
 * first one's header waits for it (the consumer stops there, so the others' headers are plain stores).
 * A record never wraps: when the space to the end is too short the producer fills it with a
 * {@link #PAD} record and starts again at offset 0. The consumer publishes its head (release) once it
 * no longer needs the records' memory; the producer reads that head only when it runs short of room.
 * The memory starts zeroed (a new memfd).
 *
 * <p>Each side keeps its own position privately: a head that moves backwards or beyond what was
 * published, a header whose record would leave the ring, or more filler in a row than the ring holds,
 * is a violation. One thread at a time uses each end (the caller's lock).
 *
 * <p>Public only for the benchmarks (the package is not exported: not API).
 */
public final class Ring {
    /** Where the data starts, from the ring's base. */
    public static final long HEADER = 256;
    /** The consumer's head, from the ring's base (two cache lines from anything else: the adjacent-line prefetcher fetches pairs). */
    static final long HEAD = 128;
    /** A record's header: record length, type. */
    static final int RECORD_HEADER = 8;
    /** The type of the filler record at the end of the data (and of a cancelled one). */
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
    /** This side's position: the producer's end of the records written (perhaps not yet published), or the consumer's head. */
    private long position;
    /** The producer: the consumer's head as last read. */
    private long other;
    /** The producer's position at its last publish; the consumer's last published head. */
    private long published;
    /** The producer: the data offset of the first header written since the last publish, or -1; that header's value. */
    private long withheldAt = -1;
    private long withheld;

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
     * Claims room for a record of {@code type} with {@code length} payload bytes.
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
        long need = pad + total + RECORD_HEADER; // and the next record's header slot, zeroed now
        if (position + need - other > capacity) {
            readHead();
            if (position + need - other > capacity) {
                return -1;
            }
        }
        if (pad > 0) {
            header(at, PAD, pad);
            position += pad;
            at = 0;
        }
        header(at, type, RECORD_HEADER + (long) length);
        position += total;
        ring.set(JAVA_LONG, HEADER + (position & mask), 0L); // "not yet" where the next record goes
        return HEADER + at + RECORD_HEADER;
    }

    /** Writes a header, or keeps it until {@link #publish()} if it is the first since the last one. */
    private void header(long at, int type, long recordLength) {
        long h = (long) type << 32 | recordLength;
        if (withheldAt < 0) {
            withheldAt = at;
            withheld = h;
        } else {
            ring.set(JAVA_LONG, HEADER + at, h);
        }
    }

    /**
     * Turns the record whose payload is at {@code payload} (claimed, not yet published) into filler:
     * the consumer skips it. For a claim whose bytes could not be written after all.
     */
    void cancel(long payload) {
        long at = payload - RECORD_HEADER - HEADER;
        if (at == withheldAt) {
            withheld &= 0xffff_ffffL; // type PAD
        } else {
            ring.set(JAVA_INT, payload - RECORD_HEADER + 4, PAD);
        }
    }

    /** True if a record of {@code length} payload bytes fits now. */
    boolean fits(int length) {
        long total = align(RECORD_HEADER + (long) length);
        long at = position & mask;
        long need = (at + total > capacity ? capacity - at : 0) + total + RECORD_HEADER;
        if (position + need - other > capacity) {
            readHead();
        }
        return position + need - other <= capacity;
    }

    private void readHead() {
        long h = (long) LONG.getAcquire(ring, HEAD);
        if (h < other || h > published) {
            throw new Violation("the consumer's head moved to " + h + " (it was " + other + ", the records published end at "
                    + published + ")");
        }
        other = h;
    }

    /** Publishes the records claimed so far to the consumer. */
    public void publish() {
        if (withheldAt >= 0) {
            LONG.setRelease(ring, HEADER + withheldAt, withheld);
            withheldAt = -1;
        }
        published = position;
    }

    /** True if every published record was consumed (the consumer's head reached the end of them). */
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
     * @throws Violation if the producer broke the ring's rules (a record's header)
     */
    public boolean next() {
        long skipped = 0;
        while (true) {
            long at = position & mask;
            long h = (long) LONG.getAcquire(ring, HEADER + at);
            if (h == 0) {
                return false;
            }
            long len = h & 0xffff_ffffL;
            int typ = (int) (h >>> 32);
            long total = align(len);
            if (len < RECORD_HEADER || at + total > capacity) {
                throw new Violation("a record at " + position + " claims " + len + " bytes (to the end " + (capacity - at) + ")");
            }
            if (typ == PAD) {
                skipped += total;
                if (skipped > capacity) {
                    throw new Violation("filler all round the ring from " + (position - skipped + total));
                }
                position += total;
                continue;
            }
            if (len > RECORD_HEADER + (long) maxPayload) {
                throw new Violation("a record at " + position + " of " + len + " bytes (at most " + (RECORD_HEADER + maxPayload)
                        + ")");
            }
            type = typ;
            length = (int) (len - RECORD_HEADER);
            payload = HEADER + at + RECORD_HEADER;
            return true;
        }
    }

    /** True if the producer published a record this consumer has not taken yet (any thread; racy). */
    boolean pending() {
        return (long) LONG.getAcquire(ring, HEADER + (position & mask)) != 0;
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

    /** This side's position (the producer's end of its records, or the consumer's head): for tests and diagnostics. */
    long position() {
        return position;
    }

    /** The ring's memory (header and data): payload offsets are relative to it. */
    public MemorySegment segment() {
        return ring;
    }
}
