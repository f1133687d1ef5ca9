package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.core.ScatterList;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The signature state of an integrity MR and the soft device's T10-PI work: the data pages come
 * first in the MR's page list, the protection pages after them. A transfer through the MR goes
 * through a scratch buffer: outbound, the data (and protection list) are gathered, checked and
 * turned into the wire image; inbound, the wire image lands in the scratch buffer and is checked,
 * split and scattered into data and protection pages. The first failing block is kept for
 * {@link MemoryRegion#checkSignatureStatus()}. Transfers run under the fabric lock, which also
 * guards the shared scratch buffer.
 */
final class Integrity {
    private static final ValueLayout.OfShort BE_SHORT = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(java.nio.ByteOrder.BIG_ENDIAN);
    private static final ValueLayout.OfInt BE_INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(java.nio.ByteOrder.BIG_ENDIAN);
    private static final Arena SCRATCH_ARENA = Arena.ofAuto();
    private static MemorySegment scratch = MemorySegment.NULL;
    private static final Pieces PAGES = new Pieces();
    private static final Pieces FLAT = new Pieces();

    private final MemoryRegion mr;
    final int maxData;
    final int maxMeta;
    private SignatureAttrs attrs;
    private long dataIova;
    private long dataBytes;
    private int dataPages;
    private long protIova;
    private long protBytes;
    /** The MR whose inbound wire image waits in the scratch buffer (fabric lock). */
    private static Integrity pendingInbound;
    private volatile SignatureError error;

    Integrity(MemoryRegion mr, int maxData, int maxMeta) {
        this.mr = mr;
        this.maxData = maxData;
        this.maxMeta = maxMeta;
    }

    void map(ScatterList data, int dataCount, ScatterList prot, int protCount, SignatureAttrs a, long pageSz) {
        boolean memPi = a != null && a.memory() == SignatureAttrs.Domain.T10_DIF;
        if (a == null || data == null || dataCount < 1 || dataCount > data.count()
                || (memPi ? prot == null || protCount < 1 || protCount > prot.count() : prot != null || protCount != 0)
                || Long.bitCount(pageSz) != 1) {
            throw new RdmaException(Errno.EINVAL, mr + ": mapSgPi(" + dataCount + " data, " + protCount + " protection "
                    + "elements, " + a + "): data is required, and a protection list exactly when memory is T10_DIF");
        }
        int d = mr.pageList.map(data, 0, dataCount, 0, pageSz, 0, maxData);
        long iova = mr.pageList.iova;
        long bytes = mr.pageList.bytes;
        int end = mr.pageList.end;
        int dataEnd = end;
        if (d < dataCount) {
            throw new RdmaException(Errno.EINVAL, mr + ": data element " + d + " does not map (unaligned inside the "
                    + "transfer, or more than " + maxData + " pages)");
        }
        if (bytes % a.blockSize() != 0) {
            throw new RdmaException(Errno.EINVAL, mr + ": " + bytes + " data bytes are not whole blocks of " + a.blockSize());
        }
        long pIova = 0;
        long pBytes = 0;
        if (memPi) {
            int p = mr.pageList.map(prot, 0, protCount, 0, pageSz, end, end + maxMeta);
            if (p < protCount) {
                throw new RdmaException(Errno.EINVAL, mr + ": protection element " + p + " does not map");
            }
            pIova = mr.pageList.iova;
            pBytes = mr.pageList.bytes;
            if (pBytes != a.protBytes(bytes)) {
                throw new RdmaException(Errno.EINVAL, mr + ": " + pBytes + " protection bytes for " + bytes / a.blockSize()
                        + " blocks; " + a.protBytes(bytes) + " needed (8 per block)");
            }
            end = mr.pageList.end;
        }
        this.attrs = a;
        this.dataIova = iova;
        this.dataBytes = bytes;
        this.dataPages = dataEnd;
        this.protIova = pIova;
        this.protBytes = pBytes;
        mr.commitIntegrityMapping(iova, bytes, end);
    }

    /** Bytes a transfer through the MR puts on (or takes from) the wire. */
    long wireBytes() {
        return attrs == null ? 0 : attrs.wireBytes(dataBytes);
    }

    void registered() {
        error = null;
    }

    SignatureError takeError() {
        SignatureError e = error;
        error = null;
        return e;
    }

    private static MemorySegment scratch(long bytes) {
        if (scratch.byteSize() < bytes) {
            scratch = SCRATCH_ARENA.allocate(Long.highestOneBit(Math.max(bytes, 4096) - 1) << 1, 8);
        }
        return scratch;
    }

    /**
     * Resolves the op's one SGE over this MR: outbound, builds the wire image in the scratch buffer;
     * inbound, points at the scratch buffer and remembers to finish after the copy. False on a
     * protection failure (the SGE must be exactly the MR's iova and wire length).
     */
    boolean gather(long addr, long len, boolean inbound, Pieces out) {
        if (attrs == null || addr != dataIova || len != wireBytes()) {
            return false;
        }
        long protAt = dataBytes;
        long wireAt = dataBytes + protBytes;
        MemorySegment s = scratch(wireAt + len);
        if (inbound) {
            // Every page the inbound image scatters into must be reachable before any byte moves.
            if (!SoftEngine.pagesReachable(mr, 0, dataIova, 0, dataBytes)
                    || (protBytes != 0 && !SoftEngine.pagesReachable(mr, dataPages, protIova, 0, protBytes))) {
                return false;
            }
            pendingInbound = this;
        } else {
            if (!move(true, s, protAt)) {
                return false;
            }
            outbound(s, protAt, wireAt);
        }
        out.add(s, wireAt, len, null, null);
        return true;
    }

    /** After an inbound copy into the scratch buffer: check, split and scatter. False on a page access failure. */
    static boolean finishInbound() {
        Integrity in = pendingInbound;
        pendingInbound = null;
        if (in == null) {
            return true;
        }
        MemorySegment s = scratch;
        long protAt = in.dataBytes;
        long wireAt = in.dataBytes + in.protBytes;
        in.inbound(s, protAt, wireAt);
        return in.move(false, s, protAt);
    }

    static void clearPending() {
        pendingInbound = null;
    }

    /** Copies data (and protection) pages into ({@code in}) or out of the scratch buffer's first regions. */
    private boolean move(boolean fromPages, MemorySegment s, long protAt) {
        if (!movePart(fromPages, s, 0, 0, dataIova, dataBytes)) {
            return false;
        }
        return protBytes == 0 || movePart(fromPages, s, protAt, dataPages, protIova, protBytes);
    }

    private boolean movePart(boolean fromPages, MemorySegment s, long at, int firstPage, long iova, long bytes) {
        PAGES.clear();
        FLAT.clear();
        if (!SoftEngine.pagePieces(mr, firstPage, iova, 0, bytes, PAGES)) {
            return false;
        }
        FLAT.add(s, at, bytes, null, null);
        // One copy inside the caller's section: an integrity transfer is bounded by its MR's pages.
        return (fromPages ? Pieces.copy(null, PAGES, FLAT) : Pieces.copy(null, FLAT, PAGES)) == Pieces.COPIED;
    }

    private void outbound(MemorySegment s, long protAt, long wireAt) {
        int bs = attrs.blockSize();
        boolean memPi = attrs.memory() == SignatureAttrs.Domain.T10_DIF;
        boolean wirePi = attrs.wire() == SignatureAttrs.Domain.T10_DIF;
        long w = wireAt;
        long blocks = dataBytes / bs;
        for (long b = 0; b < blocks; b++) {
            long data = b * bs;
            MemorySegment.copy(s, data, s, w, bs);
            w += bs;
            int guard = T10Dif.crc16(s, data, bs);
            int ref = attrs.refTag() + (int) b;
            if (memPi) {
                check(s, protAt + b * SignatureAttrs.TUPLE, data, guard, ref);
            }
            if (wirePi) {
                if (memPi) {
                    MemorySegment.copy(s, protAt + b * SignatureAttrs.TUPLE, s, w, SignatureAttrs.TUPLE);
                } else {
                    tuple(s, w, guard, attrs.appTag(), ref);
                }
                w += SignatureAttrs.TUPLE;
            }
        }
    }

    private void inbound(MemorySegment s, long protAt, long wireAt) {
        int bs = attrs.blockSize();
        boolean memPi = attrs.memory() == SignatureAttrs.Domain.T10_DIF;
        boolean wirePi = attrs.wire() == SignatureAttrs.Domain.T10_DIF;
        long w = wireAt;
        long blocks = dataBytes / bs;
        for (long b = 0; b < blocks; b++) {
            long data = b * bs;
            MemorySegment.copy(s, w, s, data, bs);
            w += bs;
            int guard = T10Dif.crc16(s, data, bs);
            int ref = attrs.refTag() + (int) b;
            long tupleAt = protAt + b * SignatureAttrs.TUPLE;
            if (wirePi) {
                check(s, w, data, guard, ref);
                if (memPi) {
                    MemorySegment.copy(s, w, s, tupleAt, SignatureAttrs.TUPLE);
                }
                w += SignatureAttrs.TUPLE;
            } else if (memPi) {
                tuple(s, tupleAt, guard, attrs.appTag(), ref);
            }
        }
    }

    private static void tuple(MemorySegment s, long at, int guard, int appTag, int refTag) {
        s.set(BE_SHORT, at, (short) guard);
        s.set(BE_SHORT, at + 2, (short) appTag);
        s.set(BE_INT, at + 4, refTag);
    }

    /** Compares the tuple at {@code at} with what the block should carry; keeps the first mismatch. */
    private void check(MemorySegment s, long at, long blockOffset, int guard, int ref) {
        if (error != null) {
            return;
        }
        int tGuard = s.get(BE_SHORT, at) & 0xFFFF;
        int tApp = s.get(BE_SHORT, at + 2) & 0xFFFF;
        int tRef = s.get(BE_INT, at + 4);
        if (attrs.checkGuard() && tGuard != guard) {
            error = new SignatureError(SignatureError.Kind.GUARD, blockOffset, tGuard, guard);
        } else if (attrs.checkAppTag() && tApp != attrs.appTag()) {
            error = new SignatureError(SignatureError.Kind.APP_TAG, blockOffset, tApp, attrs.appTag());
        } else if (attrs.checkRefTag() && tRef != ref) {
            error = new SignatureError(SignatureError.Kind.REF_TAG, blockOffset, tRef, ref);
        }
    }
}
