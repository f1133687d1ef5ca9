package io.regmem.registration.shm;

import io.regmem.core.internal.Libc;
import io.regmem.core.internal.Uio;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.regmem.registration.spi.GracePeriod;
import io.regmem.registration.spi.Segments;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * The lane's byte moves, for one QP (one thread at a time: its execution lock): between a request's
 * resolved pieces ({@link Segments}) and a ring record, at an offset into the request (a streamed
 * request arrives in records); and, for a target, straight from the initiator's memory into its own
 * checked pieces with {@code process_vm_readv}, in pieces of at most {@link Segments#PIECE} bytes,
 * each in its own grace-period section with the pieces checked again before it. The iovec arrays
 * are allocated once. The same pull serves an initiator copying a granted READ's bytes out of its
 * target ({@link Wire#RGRANT}).
 */
final class Copies implements AutoCloseable {
    /** The most iovec entries of one {@code process_vm_readv} (the kernel takes up to 1024). */
    static final int MAX_IOV = 128;
    /** {@link #pull} result: every byte moved. */
    static final long COPIED = 0;
    /** {@link #pull} result: the local pieces went invalid (deregistered, or their memory ended). */
    static final long LOCAL_FAILED = 1;

    private final Arena arena = Arena.ofShared();
    private final MemorySegment localIov = arena.allocate(MAX_IOV * 16L, 8);
    private final MemorySegment remoteIov = arena.allocate(MAX_IOV * 16L, 8);
    private final MemorySegment capture = arena.allocate(Libc.CAPTURE);
    /** The peer's entries of the request being pulled (taken from the ring once: {@link #takeEntries}). */
    final long[] remoteAddr = new long[Wire.MAX_ENTRIES];
    final long[] remoteLen = new long[Wire.MAX_ENTRIES];

    /**
     * Copies {@code n} bytes of {@code ring} at {@code at} into {@code dst}, starting {@code offset}
     * bytes into {@code dst}'s pieces. The caller is in its section and checked {@code dst} there.
     *
     * @return false if a piece's memory ended under the copy
     */
    static boolean intoPieces(MemorySegment ring, long at, Segments dst, long offset, long n) {
        return copy(dst, offset, ring, at, n, true);
    }

    /**
     * Copies {@code n} bytes of {@code src}'s pieces, starting {@code offset} bytes in, into {@code ring}
     * at {@code at}. The caller is in its section and checked {@code src} there.
     *
     * @return false if a piece's memory ended under the copy
     */
    static boolean fromPieces(Segments src, long offset, MemorySegment ring, long at, long n) {
        return copy(src, offset, ring, at, n, false);
    }

    /** {@link #intoPieces} ({@code toPieces}) or {@link #fromPieces}: one walk over the pieces. */
    private static boolean copy(Segments pieces, long offset, MemorySegment ring, long at, long n, boolean toPieces) {
        try {
            long skip = offset;
            for (int k = 0; k < pieces.count() && n > 0; k++) {
                long len = pieces.length(k);
                if (skip >= len) {
                    skip -= len;
                    continue;
                }
                long c = Math.min(len - skip, n);
                if (toPieces) {
                    MemorySegment.copy(ring, at, pieces.segment(k), pieces.offset(k) + skip, c);
                } else {
                    MemorySegment.copy(pieces.segment(k), pieces.offset(k) + skip, ring, at, c);
                }
                at += c;
                n -= c;
                skip = 0;
            }
            return n == 0;
        } catch (IllegalStateException | IndexOutOfBoundsException | WrongThreadException gone) {
            return false;
        }
    }

    /**
     * Takes a pulled request's or a grant's entries once from the ring at {@code at} into
     * {@link #remoteAddr}/{@link #remoteLen}: each non-empty, none wrapping the address space, adding up
     * to {@code total}.
     *
     * @throws Ring.Violation naming the rule broken
     */
    void takeEntries(MemorySegment m, long at, int entries, long total) {
        long sum = 0;
        for (int e = 0; e < entries; e++) {
            long a = m.get(JAVA_LONG, at + (long) Wire.ENTRY * e);
            long l = m.get(JAVA_LONG, at + (long) Wire.ENTRY * e + 8);
            if (l <= 0 || l > Wire.MAX_MESSAGE || a + l < a) {
                throw new Ring.Violation("a pulled request or grant names an entry of " + l + " bytes at 0x"
                        + Long.toHexString(a));
            }
            remoteAddr[e] = a;
            remoteLen[e] = l;
            sum += l;
        }
        if (sum != total) {
            throw new Ring.Violation("a pulled request's or grant's entries add up to " + sum + " bytes, not its " + total);
        }
    }

    /**
     * Copies {@code total} bytes from process {@code pid}'s memory, at the {@code entries} of
     * {@link #remoteAddr}/{@link #remoteLen}, into {@code dst}'s pieces. The caller is in its section
     * of {@code reader} and checked {@code dst} in it; between pieces of {@link Segments#PIECE} bytes the
     * reader leaves its section and enters a new one, in which {@code dst} is checked again.
     *
     * @return {@link #COPIED}, {@link #LOCAL_FAILED}, or -errno of the copy ({@code -EFAULT}: the
     *         peer's memory is not there; {@code -EPERM}: not allowed; {@code -ESRCH}: it is gone)
     */
    long pull(GracePeriod.Reader reader, int pid, int entries, Segments dst, long total) {
        int k = 0; // local piece
        long kOff = 0;
        int e = 0; // remote entry
        long eOff = 0;
        long done = 0;
        while (done < total) {
            if (done > 0) {
                reader.exit();
                reader.enter();
                if (!dst.stillValid()) {
                    return LOCAL_FAILED;
                }
            }
            long budget = Math.min(Segments.PIECE, total - done);
            // What both sides can cover with MAX_IOV entries each, up to the budget.
            long cover = 0;
            for (int x = e, i = 0; x < entries && i < MAX_IOV && cover < budget; x++, i++) {
                cover += (x == e ? remoteLen[x] - eOff : remoteLen[x]);
            }
            budget = Math.min(budget, cover);
            cover = 0;
            for (int x = k, i = 0; x < dst.count() && i < MAX_IOV && cover < budget; x++, i++) {
                cover += (x == k ? dst.length(x) - kOff : dst.length(x));
            }
            long chunk = Math.min(budget, cover);
            if (chunk <= 0) {
                return -Libc.EFAULT; // entries that do not add up (checked before; here for safety)
            }
            int li = 0;
            for (long filled = 0; filled < chunk; li++) {
                MemorySegment s = dst.segment(k);
                if (!s.isNative() || !s.scope().isAlive()) {
                    return LOCAL_FAILED;
                }
                long c = Math.min(dst.length(k) - kOff, chunk - filled);
                localIov.setAtIndex(JAVA_LONG, 2L * li, s.address() + dst.offset(k) + kOff);
                localIov.setAtIndex(JAVA_LONG, 2L * li + 1, c);
                filled += c;
                kOff += c;
                if (kOff == dst.length(k)) {
                    k++;
                    kOff = 0;
                }
            }
            int ri = 0;
            for (long filled = 0; filled < chunk; ri++) {
                long c = Math.min(remoteLen[e] - eOff, chunk - filled);
                remoteIov.setAtIndex(JAVA_LONG, 2L * ri, remoteAddr[e] + eOff);
                remoteIov.setAtIndex(JAVA_LONG, 2L * ri + 1, c);
                filled += c;
                eOff += c;
                if (eOff == remoteLen[e]) {
                    e++;
                    eOff = 0;
                }
            }
            long lBytes = chunk;
            long n = Uio.processVmReadv(capture, pid, localIov.address(), li, remoteIov.address(), ri);
            if (n != lBytes) {
                return n < 0 ? n : -Libc.EFAULT; // part of the peer's memory is not there
            }
            done += n;
        }
        return COPIED;
    }

    @Override
    public void close() {
        arena.close();
    }

    /** True if the target can pull these entries: native memory, few enough of them, none empty. */
    static boolean pullable(Segments segs) {
        if (segs.count() > Wire.MAX_ENTRIES) {
            return false;
        }
        for (int k = 0; k < segs.count(); k++) {
            if (!segs.segment(k).isNative() || segs.length(k) == 0) {
                return false;
            }
        }
        return true;
    }
}
