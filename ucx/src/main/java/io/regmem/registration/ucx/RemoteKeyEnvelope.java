package io.regmem.registration.ucx;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.zip.CRC32C;

/**
 * The exported form of a UCX region's remote key: a regmem envelope around UCX's packed key.
 *
 * <pre>
 *   0  magic "RMUX"        4 bytes
 *   4  version (1)         2 bytes
 *   6  flags               2 bytes   1: the range and rights are the target's to check (fast-reg MR, window)
 *   8  verbs rkey          4 bytes   what a WorkRequest names the region by at the exporter
 *  12  access mask         4 bytes   the rights the region grants (Access.mask)
 *  16  address             8 bytes   the region's first byte in the exporter's address space
 *  24  length              8 bytes
 *  32  packed length n     4 bytes   0 to 65536 (0: no UCX registration behind the key)
 *  36  CRC32C              4 bytes   of bytes 0-35 (CRC field zero) and the packed key
 *  40  UCX packed key      n bytes   (ucp_rkey_pack)
 * </pre>
 * All fields big-endian. UCX trusts packed keys completely ({@code ucp_ep_rkey_unpack} of garbage
 * crashes the process), so {@link #decode} checks every field and the checksum before a packed key
 * reaches UCX: corrupted or truncated bytes, or bytes that were never an exported key, are
 * {@code EINVAL}. The checksum detects damage, not forgery: a peer that builds a well-formed envelope
 * around bytes of its own choosing is trusted exactly as far as UCX trusts it.
 */
final class RemoteKeyEnvelope {
    static final int MAGIC = 0x524D_5558; // "RMUX"
    static final short VERSION = 1;
    static final int HEADER = 40;
    static final int MAX_PACKED = 65536;
    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    private static final ValueLayout.OfShort SHORT = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    /** The flag: the envelope carries no range or rights (zeros); the target checks each access. */
    static final short TARGET_CHECKS = 1;
    /**
     * The flag: the region lies in memory UCX allocated ({@code device.chunkSource()}), which a peer
     * that trusts its owner may put into and get from directly ({@code oneSided=true}); the owner's
     * target checks do not apply to such puts.
     */
    static final short ONE_SIDED = 2;

    /** A decoded envelope: the exporter's view of the region and UCX's packed key (maybe empty). */
    record Decoded(int rkey, int access, long address, long length, int flags, byte[] packed) {
        /** True if the initiator may refuse an access from the envelope's range and rights. */
        boolean rangeKnown() {
            return (flags & TARGET_CHECKS) == 0;
        }
    }

    private RemoteKeyEnvelope() {
    }

    /** Bytes of the envelope around a packed key of {@code packedLength} bytes. */
    static int size(int packedLength) {
        return HEADER + packedLength;
    }

    /** Writes the envelope into {@code to} (at least {@link #size} bytes). */
    static void encode(int rkey, int access, long address, long length, int flags, byte[] packed, MemorySegment to) {
        if (packed.length > MAX_PACKED) {
            throw new IllegalArgumentException("packed key of " + packed.length + " bytes");
        }
        to.set(INT, 0, MAGIC);
        to.set(SHORT, 4, VERSION);
        to.set(SHORT, 6, (short) flags);
        to.set(INT, 8, rkey);
        to.set(INT, 12, access);
        to.set(LONG, 16, address);
        to.set(LONG, 24, length);
        to.set(INT, 32, packed.length);
        to.set(INT, 36, 0);
        MemorySegment.copy(packed, 0, to, ValueLayout.JAVA_BYTE, HEADER, packed.length);
        to.set(INT, 36, crc(to, packed.length));
    }

    /**
     * Reads and checks an envelope.
     *
     * @throws RdmaException {@link Errno#EINVAL} naming what is wrong: too short, not an envelope,
     *                       another version, a length out of range, a checksum that does not match
     */
    static Decoded decode(MemorySegment from, String who) {
        long size = from.byteSize();
        if (size < HEADER) {
            throw bad(who, size + " bytes is shorter than an exported UCX key's " + HEADER + "-byte header");
        }
        if (from.get(INT, 0) != MAGIC) {
            throw bad(who, "the bytes are not an exported UCX key (no RMUX magic)");
        }
        short version = from.get(SHORT, 4);
        if (version != VERSION) {
            throw bad(who, "exported key version " + version + " (this regmem reads version " + VERSION + ")");
        }
        int n = from.get(INT, 32);
        if (n < 0 || n > MAX_PACKED || size != HEADER + (long) n) {
            throw bad(who, "packed key length " + n + " does not fit the " + size + " bytes given");
        }
        int expected = from.get(INT, 36);
        if (crc(from, n) != expected) {
            throw bad(who, "checksum mismatch: the exported key was damaged");
        }
        long length = from.get(LONG, 24);
        long address = from.get(LONG, 16);
        if (length < 0 || address + length < address) {
            throw bad(who, "region [0x" + Long.toHexString(address) + ", +" + length + ") wraps around");
        }
        byte[] packed = from.asSlice(HEADER, n).toArray(ValueLayout.JAVA_BYTE);
        int flags = from.get(SHORT, 6);
        if ((flags & ~(TARGET_CHECKS | ONE_SIDED)) != 0) {
            throw bad(who, "unknown flags 0x" + Integer.toHexString(flags));
        }
        return new Decoded(from.get(INT, 8), from.get(INT, 12), address, length, flags, packed);
    }

    /** CRC32C of the header with its CRC field read as zero, then the packed key. */
    private static int crc(MemorySegment s, int n) {
        CRC32C c = new CRC32C();
        c.update(s.asSlice(0, 36).asByteBuffer());
        c.update(new byte[4]);
        c.update(s.asSlice(HEADER, n).asByteBuffer());
        return (int) c.getValue();
    }

    private static RdmaException bad(String who, String what) {
        return new RdmaException(Errno.EINVAL, who + ": importRemoteKey: " + what);
    }
}
