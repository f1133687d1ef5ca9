package io.regmem.registration;

import java.lang.foreign.MemorySegment;

/**
 * A reusable list of (segment, offset, length) pieces that a request's scatter/gather entries
 * resolved to, each with the registrations that make it reachable (a memory region and/or a DMA
 * mapping, null where none), and the soft provider's guarded copy between two such lists.
 *
 * <p>The copy runs inside the caller's grace-period section ({@link GracePeriod}) in pieces of at
 * most {@link #PIECE} bytes: between two pieces the reader leaves its section, so a waiting
 * deregistration may finish, and enters a new one, in which every registration of both lists is
 * checked again before the next byte moves. Used under the fabric lock, one request at a time.
 */
final class Pieces {
    /** The most bytes copied in one grace-period section: a deregistration waits for at most this much copying. */
    static final long PIECE = 1L << 20;
    /** {@link #copy} results. */
    static final int COPIED = 0;
    static final int SRC_FAILED = 1;
    static final int DST_FAILED = 2;

    MemorySegment[] seg = new MemorySegment[16];
    long[] off = new long[16];
    long[] len = new long[16];
    MemoryRegion[] region = new MemoryRegion[16];
    DmaMapping[] mapping = new DmaMapping[16];
    int n;

    /**
     * Empties the list. The references of the last request stay in the arrays until overwritten
     * (a bounded, harmless retention of a few Java objects, never of native memory): nulling them on
     * every request would cost the hot path stores for nothing.
     */
    void clear() {
        n = 0;
    }

    void add(MemorySegment s, long o, long l, MemoryRegion r, DmaMapping m) {
        if (n == seg.length) {
            seg = java.util.Arrays.copyOf(seg, n * 2);
            off = java.util.Arrays.copyOf(off, n * 2);
            len = java.util.Arrays.copyOf(len, n * 2);
            region = java.util.Arrays.copyOf(region, n * 2);
            mapping = java.util.Arrays.copyOf(mapping, n * 2);
        }
        seg[n] = s;
        off[n] = o;
        len[n] = l;
        region[n] = r;
        mapping[n] = m;
        n++;
    }

    /** True while every piece's region is valid, its mapping alive and its memory's scope alive. */
    boolean stillValid() {
        for (int k = 0; k < n; k++) {
            MemoryRegion r = region[k];
            DmaMapping m = mapping[k];
            if ((r != null && !r.isValid()) || (m != null && m.isDestroyed()) || !seg[k].scope().isAlive()) {
                return false;
            }
        }
        return true;
    }

    long total() {
        long t = 0;
        for (int k = 0; k < n; k++) {
            t += len[k];
        }
        return t;
    }

    /** Keeps only the first {@code bytes} bytes. */
    void truncate(long bytes) {
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
    static int copy(GracePeriod.Reader reader, Pieces src, Pieces dst) {
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
