package io.regmem.registration.spi;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;

/**
 * A reusable list of (segment, offset, length) pieces that a request's scatter/gather entries
 * resolved to, each with the registrations that make it reachable (a memory region and/or a DMA
 * mapping, null where none), and the guarded copy between two such lists that software data paths use.
 *
 * <p>The copy runs inside the caller's grace-period section ({@link GracePeriod}) in pieces of at
 * most {@link #PIECE} bytes: between two pieces the reader leaves its section, so a waiting
 * deregistration may finish, and enters a new one, in which every registration of both lists is
 * checked again before the next byte moves. One request at a time: a provider keeps its lists per
 * executor (per QP) and uses them under the QP's lock.
 */
public final class Segments {
    /** The most bytes copied in one grace-period section: a deregistration waits for at most this much copying. */
    public static final long PIECE = 1L << 20;
    /** {@link #copy} result: every byte moved. */
    public static final int COPIED = 0;
    /** {@link #copy} result: the source side failed. */
    public static final int SRC_FAILED = 1;
    /** {@link #copy} result: the destination side failed. */
    public static final int DST_FAILED = 2;

    private MemorySegment[] seg = new MemorySegment[16];
    private long[] off = new long[16];
    private long[] len = new long[16];
    private Guard[] region = new Guard[16];
    private Guard[] mapping = new Guard[16];
    private int n;
    private final SignatureOffload offload;

    /** An empty list without signature offload. */
    public Segments() {
        this(null);
    }

    /** An empty list whose integrity-MR entries are resolved by {@code offload} (null: refused). */
    public Segments(SignatureOffload offload) {
        this.offload = offload;
    }

    /** Resolves an SGE over an integrity MR for the provider (T10-PI offload), or null. */
    public SignatureOffload offload() {
        return offload;
    }

    /** Pieces in the list. */
    public int count() {
        return n;
    }

    /** Piece {@code k}'s segment. */
    public MemorySegment segment(int k) {
        return seg[k];
    }

    /** Piece {@code k}'s offset in its segment. */
    public long offset(int k) {
        return off[k];
    }

    /** Piece {@code k}'s length. */
    public long length(int k) {
        return len[k];
    }

    /**
     * Empties the list. The references of the last request stay in the arrays until overwritten
     * (a bounded, harmless retention of a few Java objects, never of native memory): nulling them on
     * every request would cost the hot path stores for nothing.
     */
    public void clear() {
        n = 0;
    }

    /** Adds a piece of memory the provider owns (a staging buffer, a transport's receive data): no guard. */
    public void add(MemorySegment s, long o, long l) {
        add(s, o, l, null, null);
    }

    /**
     * Adds a piece and the registrations that make it reachable (re-checked between copy pieces).
     *
     * @param r the memory region's guard the piece resolved through, or null
     * @param m the DMA mapping's guard it resolved through, or null
     */
    public void add(MemorySegment s, long o, long l, Guard r, Guard m) {
        if (n == seg.length) {
            seg = Arrays.copyOf(seg, n * 2);
            off = Arrays.copyOf(off, n * 2);
            len = Arrays.copyOf(len, n * 2);
            region = Arrays.copyOf(region, n * 2);
            mapping = Arrays.copyOf(mapping, n * 2);
        }
        // (a reference is stored only when it changes: a steady request stores the same ones into the same
        // slots, and every reference store pays the collector's barrier)
        if (seg[n] != s) {
            seg[n] = s;
        }
        off[n] = o;
        len[n] = l;
        if (region[n] != r) {
            region[n] = r;
        }
        if (mapping[n] != m) {
            mapping[n] = m;
        }
        n++;
    }

    /** Adds every piece of {@code from}, with the registrations each resolved through. */
    public void addAll(Segments from) {
        for (int k = 0; k < from.n; k++) {
            add(from.seg[k], from.off[k], from.len[k], from.region[k], from.mapping[k]);
        }
    }

    /** True if some piece resolved through {@code guard} (a region's or a mapping's). */
    public boolean resolvedThrough(Guard guard) {
        for (int k = 0; k < n; k++) {
            if (region[k] == guard || mapping[k] == guard) {
                return true;
            }
        }
        return false;
    }

    /** True while every piece's region is valid, its mapping alive and its memory's scope alive. */
    public boolean stillValid() {
        return valid(false);
    }

    /**
     * {@link #stillValid()}, but a region being deregistered ({@link MrContext#isDeregistering()}) counts
     * as valid: for the answer of a request started before, which that deregistration waits for.
     */
    public boolean answerable() {
        return valid(true);
    }

    private boolean valid(boolean deregisteringToo) {
        for (int k = 0; k < n; k++) {
            Guard r = region[k];
            Guard m = mapping[k];
            if ((r != null && !r.isValid() && !(deregisteringToo && r instanceof MrContext c && c.isDeregistering()))
                    || (m != null && !m.isValid()) || !seg[k].scope().isAlive()) {
                return false;
            }
        }
        return true;
    }

    /** The sum of the pieces' lengths. */
    public long total() {
        long t = 0;
        for (int k = 0; k < n; k++) {
            t += len[k];
        }
        return t;
    }

    /** Keeps only the first {@code bytes} bytes. */
    public void truncate(long bytes) {
        long t = 0;
        for (int k = 0; k < n; k++) {
            if (t + len[k] >= bytes) {
                len[k] = bytes - t;
                n = k + 1;
                return;
            }
            t += len[k];
        }
    }

    /**
     * Copies the source pieces over the destination pieces in order, within the caller's section,
     * in pieces of at most {@link #PIECE} bytes: between two pieces the reader leaves its section
     * (a waiting deregistration may finish) and enters a new one, in which every registration of
     * both lists is checked again.
     *
     * @return {@link #COPIED}, or which side failed ({@link #SRC_FAILED}, {@link #DST_FAILED}):
     *         deregistered meanwhile, or memory whose scope ended under the copy
     */
    public static int copy(GracePeriod.Reader reader, Segments src, Segments dst) {
        int i = 0;
        int j = 0;
        long si = 0;
        long dj = 0;
        long budget = PIECE;
        try {
            while (i < src.n && j < dst.n) {
                if (budget == 0 && reader != null) {
                    reader.exit();
                    reader.enter();
                    if (!src.stillValid()) {
                        return SRC_FAILED;
                    }
                    if (!dst.stillValid()) {
                        return DST_FAILED;
                    }
                    budget = PIECE;
                }
                long n = Math.min(Math.min(src.len[i] - si, dst.len[j] - dj), reader == null ? Long.MAX_VALUE : budget);
                MemorySegment.copy(src.seg[i], src.off[i] + si, dst.seg[j], dst.off[j] + dj, n);
                budget -= n;
                si += n;
                dj += n;
                if (si == src.len[i]) {
                    i++;
                    si = 0;
                }
                if (dj == dst.len[j]) {
                    j++;
                    dj = 0;
                }
            }
            return COPIED;
        } catch (IllegalStateException | IndexOutOfBoundsException | WrongThreadException e) {
            // A scope closed under the copy (the memory's owner freed it without deregistering it).
            return i < src.n && !src.seg[i].scope().isAlive() ? SRC_FAILED : DST_FAILED;
        }
    }
}
