package io.regmem.registration.shm;

import io.regmem.registration.Opcode;
import io.regmem.registration.WcStatus;

/**
 * The records of the lane's rings. Native byte order (both ends run on one host).
 *
 * <p>A side's <b>request ring</b> carries its requests: a {@link #REQ} record (a 56-byte header, then
 * the request's bytes when they travel inline, or its scatter list when the target pulls them), and,
 * for a request whose bytes are streamed, the {@link #DATA} records that carry them in order.
 * <pre>
 *   0 sequence u64 (the request's place in its send queue; strictly increasing)
 *   8 opcode u8 (ordinal)   9 mode u8 (INLINE, PULL, STREAM)   10 flags u16 (bits 0-2 the sender's RNR
 *     retry count, bit 8 solicited)   12 immediate, or the rkey to invalidate, u32
 *  16 remote address u64   24 remote key u32   28 entries u32 (PULL: the scatter list's length)
 *  32 total length u64   40 compare-or-add u64   48 swap u64
 *  56 INLINE: the bytes; PULL: (address u64, length u64) per entry, in the initiator's memory (a READ
 *     in PULL mode names none: it asks to copy the bytes out of the target itself)
 * </pre>
 * A side's <b>answer ring</b> carries its answers to the peer's requests, in the order it took them:
 * the bytes of a READ as {@link #RDATA} records, then an {@link #ACK} (sequence u64, status u32 (a
 * {@link WcStatus} ordinal), 4 bytes unused, the value an atomic found u64) for a READ, an atomic and
 * any request that failed; while it holds a request for a receive (RNR retry), now and then an
 * {@link #RNR_WAIT}. A READ asked for in PULL mode may instead be answered by one {@link #RGRANT}
 * (sequence u64, entries u32, 4 bytes unused, then (address u64, length u64) per entry, in the
 * target's memory): the range checked, the initiator copies it out itself ({@code process_vm_readv})
 * and says so in its copied word ({@link Lane#copied}). A WRITE's or SEND's success has no record: the target's finished word in the
 * lane's header says it ({@link Lane#finished}), and so does any answer record to a later request.
 */
final class Wire {
    /** A request. */
    static final int REQ = 1;
    /** Streamed bytes of the request in progress. */
    static final int DATA = 2;
    /** The initiator gave up streaming the request in progress (its memory went away): it fails. */
    static final int ABORT = 3;
    /** An answer: the verdict on a request. */
    static final int ACK = 16;
    /** Bytes of the READ being answered. */
    static final int RDATA = 17;
    /** The target holds the oldest request until a receive is posted (RNR retry): it is not lost. Sequence u64. */
    static final int RNR_WAIT = 18;
    /** A READ checked: the initiator copies its bytes out of the target's memory at the entries named. */
    static final int RGRANT = 19;

    static final int MODE_INLINE = 0;
    static final int MODE_PULL = 1;
    static final int MODE_STREAM = 2;

    static final long R_SEQ = 0;
    static final long R_OPCODE = 8;
    static final long R_MODE = 9;
    static final long R_FLAGS = 10;
    static final long R_IMM = 12;
    static final long R_RADDR = 16;
    static final long R_RKEY = 24;
    static final long R_ENTRIES = 28;
    static final long R_TOTAL = 32;
    static final long R_CMP = 40;
    static final long R_SWAP = 48;
    static final int REQ_HEADER = 56;
    static final int ENTRY = 16;
    /** The most entries a pulled request may name. */
    static final int MAX_ENTRIES = 64;

    static final long A_SEQ = 0;
    static final long A_STATUS = 8;
    static final long A_VALUE = 16;
    static final int ACK_SIZE = 24;
    static final long G_SEQ = 0;
    static final long G_ENTRIES = 8;
    static final int GRANT_HEADER = 16;

    static final int FLAG_RNR_MASK = 7;
    static final int FLAG_SOLICITED = 0x100;

    /**
     * The most bytes of one streamed record (DATA, RDATA): small enough that the reader copies one piece
     * out while the writer fills the next (each side gives a record's room back as soon as it is done
     * with it), large enough that a record's overhead is noise.
     */
    static final int STREAM_PIECE = 128 << 10;

    /** The largest message: the verbs layer's limit (2 GiB). */
    static final long MAX_MESSAGE = 1L << 31;

    /** By ordinal, read on the data path ({@code values()} copies its array each call). */
    static final Opcode[] OPCODES = Opcode.values();
    static final WcStatus[] STATUSES = WcStatus.values();

    private Wire() {
    }

    /** True for the opcodes that travel to the target. */
    static boolean remote(Opcode op) {
        return switch (op) {
            case RDMA_WRITE, RDMA_WRITE_WITH_IMM, RDMA_READ, RDMA_READ_WITH_INV, SEND, SEND_WITH_INV, SEND_WITH_IMM,
                    ATOMIC_CMP_AND_SWP, ATOMIC_FETCH_AND_ADD -> true;
            default -> false;
        };
    }

    /** True for the opcodes whose bytes go from the initiator to the target. */
    static boolean carriesData(Opcode op) {
        return op == Opcode.RDMA_WRITE || op == Opcode.RDMA_WRITE_WITH_IMM || op == Opcode.SEND || op == Opcode.SEND_WITH_INV
                || op == Opcode.SEND_WITH_IMM;
    }

    static boolean isRead(Opcode op) {
        return op == Opcode.RDMA_READ || op == Opcode.RDMA_READ_WITH_INV;
    }

    static boolean isAtomic(Opcode op) {
        return op == Opcode.ATOMIC_CMP_AND_SWP || op == Opcode.ATOMIC_FETCH_AND_ADD;
    }

    /**
     * True for the opcodes whose success is an answer record (a READ's bytes, an atomic's value); the
     * others' is the target's finished word ({@link Lane#finished}).
     */
    static boolean answered(Opcode op) {
        return isRead(op) || isAtomic(op);
    }

    /** True for the opcodes that consume a receive at the target. */
    static boolean consumesReceive(Opcode op) {
        return op == Opcode.SEND || op == Opcode.SEND_WITH_INV || op == Opcode.SEND_WITH_IMM || op == Opcode.RDMA_WRITE_WITH_IMM;
    }

    /** True if a request record's shape fits its opcode and mode. */
    static boolean shapeOk(Opcode op, int mode, int length, int entries, long total) {
        boolean data = Wire.carriesData(op);
        return switch (mode) {
            case Wire.MODE_INLINE -> entries == 0 && length == Wire.REQ_HEADER + (data ? total : 0);
            case Wire.MODE_PULL -> data ? entries >= 1 && entries <= Wire.MAX_ENTRIES
                    && length == Wire.REQ_HEADER + (long) Wire.ENTRY * entries
                    : isRead(op) && entries == 0 && length == Wire.REQ_HEADER;
            case Wire.MODE_STREAM -> data && entries == 0 && length == Wire.REQ_HEADER;
            default -> false;
        };
    }
}
