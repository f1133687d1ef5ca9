package io.regmem.registration.soft;

import io.regmem.registration.SignatureAttrs;
import io.regmem.registration.SignatureError;
import io.regmem.registration.spi.IntegrityView;
import io.regmem.registration.spi.Segments;
import io.regmem.registration.spi.SignatureOffload;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * The soft device's T10-PI signature offload, one per QP executor (used under the QP's lock). A
 * transfer through an integrity MR goes through a scratch buffer: outbound, the data (and
 * protection list) are gathered, checked and turned into the wire image; inbound, the wire image
 * lands in the scratch buffer and is checked, split and scattered into data and protection pages
 * ({@link #finishInbound()}). The first failing block is kept in the MR.
 */
final class SoftIntegrity implements SignatureOffload {
    private static final ValueLayout.OfShort BE_SHORT = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    private static final ValueLayout.OfInt BE_INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    private final Arena arena = Arena.ofAuto();
    private MemorySegment scratch = MemorySegment.NULL;
    private final Segments pages = new Segments();
    private final Segments flat = new Segments();
    /** The MR whose inbound wire image waits in the scratch buffer. */
    private IntegrityView pendingInbound;

    private MemorySegment scratch(long bytes) {
        if (scratch.byteSize() < bytes) {
            scratch = arena.allocate(Long.highestOneBit(Math.max(bytes, 4096) - 1) << 1, 8);
        }
        return scratch;
    }

    @Override
    public boolean gather(IntegrityView mr, long addr, long len, boolean inbound, Segments out) {
        if (mr.attrs() == null || addr != mr.dataIova() || len != mr.wireBytes()) {
            return false;
        }
        long protAt = mr.dataBytes();
        long wireAt = mr.dataBytes() + mr.protBytes();
        MemorySegment s = scratch(wireAt + len);
        if (inbound) {
            // Every page the inbound image scatters into must be reachable before any byte moves.
            pages.clear();
            boolean reachable = mr.dataPieces(pages) && mr.protPieces(pages);
            pages.clear();
            if (!reachable) {
                return false;
            }
            pendingInbound = mr;
        } else {
            if (!move(mr, true, s, protAt)) {
                return false;
            }
            outbound(mr, s, protAt, wireAt);
        }
        out.add(s, wireAt, len);
        return true;
    }

    /** After an inbound copy into the scratch buffer: check, split and scatter. False on a page access failure. */
    boolean finishInbound() {
        IntegrityView in = pendingInbound;
        pendingInbound = null;
        if (in == null) {
            return true;
        }
        long protAt = in.dataBytes();
        long wireAt = in.dataBytes() + in.protBytes();
        inbound(in, scratch, protAt, wireAt);
        return move(in, false, scratch, protAt);
    }

    void clearPending() {
        pendingInbound = null;
    }

    /** Copies data (and protection) pages into ({@code !fromPages}) or out of the scratch buffer's first regions. */
    private boolean move(IntegrityView mr, boolean fromPages, MemorySegment s, long protAt) {
        pages.clear();
        flat.clear();
        if (!mr.dataPieces(pages)) {
            return false;
        }
        flat.add(s, 0, mr.dataBytes());
        if (!copy(fromPages)) {
            return false;
        }
        if (mr.protBytes() == 0) {
            return true;
        }
        pages.clear();
        flat.clear();
        if (!mr.protPieces(pages)) {
            return false;
        }
        flat.add(s, protAt, mr.protBytes());
        return copy(fromPages);
    }

    private boolean copy(boolean fromPages) {
        // One copy inside the caller's section: an integrity transfer is bounded by its MR's pages.
        return (fromPages ? Segments.copy(null, pages, flat) : Segments.copy(null, flat, pages)) == Segments.COPIED;
    }

    private void outbound(IntegrityView mr, MemorySegment s, long protAt, long wireAt) {
        SignatureAttrs attrs = mr.attrs();
        int bs = attrs.blockSize();
        boolean memPi = attrs.memory() == SignatureAttrs.Domain.T10_DIF;
        boolean wirePi = attrs.wire() == SignatureAttrs.Domain.T10_DIF;
        long w = wireAt;
        long blocks = mr.dataBytes() / bs;
        for (long b = 0; b < blocks; b++) {
            long data = b * bs;
            MemorySegment.copy(s, data, s, w, bs);
            w += bs;
            int guard = T10Dif.crc16(s, data, bs);
            int ref = attrs.refTag() + (int) b;
            if (memPi) {
                check(mr, s, protAt + b * SignatureAttrs.TUPLE, data, guard, ref);
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

    private void inbound(IntegrityView mr, MemorySegment s, long protAt, long wireAt) {
        SignatureAttrs attrs = mr.attrs();
        int bs = attrs.blockSize();
        boolean memPi = attrs.memory() == SignatureAttrs.Domain.T10_DIF;
        boolean wirePi = attrs.wire() == SignatureAttrs.Domain.T10_DIF;
        long w = wireAt;
        long blocks = mr.dataBytes() / bs;
        for (long b = 0; b < blocks; b++) {
            long data = b * bs;
            MemorySegment.copy(s, w, s, data, bs);
            w += bs;
            int guard = T10Dif.crc16(s, data, bs);
            int ref = attrs.refTag() + (int) b;
            long tupleAt = protAt + b * SignatureAttrs.TUPLE;
            if (wirePi) {
                check(mr, s, w, data, guard, ref);
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
    private static void check(IntegrityView mr, MemorySegment s, long at, long blockOffset, int guard, int ref) {
        if (mr.hasSignatureError()) {
            return;
        }
        SignatureAttrs attrs = mr.attrs();
        int tGuard = s.get(BE_SHORT, at) & 0xFFFF;
        int tApp = s.get(BE_SHORT, at + 2) & 0xFFFF;
        int tRef = s.get(BE_INT, at + 4);
        if (attrs.checkGuard() && tGuard != guard) {
            mr.signatureError(new SignatureError(SignatureError.Kind.GUARD, blockOffset, tGuard, guard));
        } else if (attrs.checkAppTag() && tApp != attrs.appTag()) {
            mr.signatureError(new SignatureError(SignatureError.Kind.APP_TAG, blockOffset, tApp, attrs.appTag()));
        } else if (attrs.checkRefTag() && tRef != ref) {
            mr.signatureError(new SignatureError(SignatureError.Kind.REF_TAG, blockOffset, tRef, ref));
        }
    }
}
