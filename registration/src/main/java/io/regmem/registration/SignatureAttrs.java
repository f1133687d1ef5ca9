package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;

/**
 * How an integrity MR protects data ({@code struct ib_sig_attrs}) with T10-PI, DIF type 1: every
 * block of {@code blockSize} bytes (512 or 4096) carries an 8-byte tuple of a CRC-16/T10-DIF guard
 * over the block, a 16-bit application tag and a 32-bit reference tag that starts at {@code refTag}
 * and increases by one per block.
 *
 * <p>Each side of a transfer is a domain: the memory (the integrity MR's data, plus a separate
 * protection list when the memory domain is T10-DIF) and the wire (the peer's memory, where a T10-DIF
 * domain interleaves each block with its tuple). So a WRITE with memory NONE and wire T10-DIF
 * inserts tuples; a READ with wire T10-DIF and memory NONE checks and strips them; T10-DIF on both
 * sides passes them through, checked. Checks follow the three flags; the first failing block is
 * reported by {@link MemoryRegion#checkSignatureStatus()}.
 *
 * @param memory      the memory domain
 * @param wire        the wire domain
 * @param blockSize   bytes of data per tuple: 512 or 4096
 * @param appTag      the application tag, 0..65535
 * @param refTag      the reference tag of the first block (unsigned 32-bit)
 * @param checkGuard  check guards where tuples are read
 * @param checkAppTag check application tags
 * @param checkRefTag check reference tags
 */
public record SignatureAttrs(Domain memory, Domain wire, int blockSize, int appTag, int refTag, boolean checkGuard,
                             boolean checkAppTag, boolean checkRefTag) {
    /** Bytes of one protection tuple. */
    public static final int TUPLE = 8;

    /** A domain's protection. */
    public enum Domain {
        /** Plain data. */
        NONE,
        /** T10-DIF type 1 tuples. */
        T10_DIF
    }

    /** Checks the values: a known block size, a 16-bit app tag, at least one protected domain. */
    public SignatureAttrs {
        if (memory == null || wire == null || (blockSize != 512 && blockSize != 4096) || appTag < 0 || appTag > 0xFFFF
                || (memory == Domain.NONE && wire == Domain.NONE)) {
            throw new RdmaException(Errno.EINVAL, "SignatureAttrs: memory " + memory + ", wire " + wire + ", block "
                    + blockSize + ", app tag " + appTag + ": blocks are 512 or 4096, app tags 16-bit, one domain at "
                    + "least must be T10_DIF");
        }
    }

    /** Memory NONE, wire T10-DIF, every check: tuples inserted on WRITE, checked and stripped on READ. */
    public static SignatureAttrs wireOnly(int blockSize, int appTag, int refTag) {
        return new SignatureAttrs(Domain.NONE, Domain.T10_DIF, blockSize, appTag, refTag, true, true, true);
    }

    /** T10-DIF in memory (a separate protection list) and on the wire, every check: tuples pass through. */
    public static SignatureAttrs both(int blockSize, int appTag, int refTag) {
        return new SignatureAttrs(Domain.T10_DIF, Domain.T10_DIF, blockSize, appTag, refTag, true, true, true);
    }

    /** Bytes on the wire for {@code dataBytes} of data. */
    public long wireBytes(long dataBytes) {
        return wire == Domain.T10_DIF ? dataBytes + dataBytes / blockSize * TUPLE : dataBytes;
    }

    /** Bytes of the memory's protection list for {@code dataBytes} of data (0 when memory is NONE). */
    public long protBytes(long dataBytes) {
        return memory == Domain.T10_DIF ? dataBytes / blockSize * TUPLE : 0;
    }
}
