package io.regmem.registration.shm;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.regmem.registration.spi.MrContext;
import io.regmem.registration.spi.Segments;
import java.lang.foreign.MemorySegment;

/**
 * A target's READ grants ({@link Wire#RGRANT}) that its initiator has not yet said it copied out, oldest
 * first: a large READ whose range passed every check is answered with the range's addresses, and the
 * initiator copies the bytes out of this process itself, into its own memory, in its own section. Its
 * owner's execution lock guards it.
 *
 * <p>While a grant is out, the memory it names must keep what the READ saw: the target holds every
 * later request that changes memory (only READs pass a grant: nothing executes ahead of a READ but
 * another READ), and a deregistration of the region waits for the grant like it waits for any answer
 * (bounded by the answer timeout); an error of the QP leaves them out. Where the memory must change
 * owner first (that wait ran out, or the QP is destroyed) the target withdraws all its grants
 * ({@link Lane#revoke}) before letting go; the initiator reads that word after its copy, so a READ whose grant was withdrawn fails
 * whatever it copied, and a READ that succeeds copied bytes the grant still covered.
 */
final class Grants {
    /** The most grants out at once (later READs are answered through the ring). */
    static final int MAX = 32;

    private final long[] seq = new long[MAX];
    private final Segments[] src = new Segments[MAX];
    private int head;
    private int count;
    /** The last READ granted, or -1. */
    private long lastGranted = -1;
    /** The initiator's copied word as last read. */
    private long copied;

    Grants() {
        for (int i = 0; i < MAX; i++) {
            src[i] = new Segments();
        }
    }

    /** Grants out, not yet copied. */
    int count() {
        return count;
    }

    /**
     * Answers READ {@code s} with a grant over {@code checked} (its range, resolved and checked in the
     * caller's section) if it can: the pieces are native, few enough, and the answer ring and this FIFO
     * have room. False otherwise, with nothing written: the READ's bytes then go through the ring.
     */
    boolean grant(Ring out, long s, Segments checked) {
        if (count == MAX || !Copies.pullable(checked)) {
            return false;
        }
        int n = checked.count();
        long at = out.claim(Wire.RGRANT, Wire.GRANT_HEADER + Wire.ENTRY * n);
        if (at < 0) {
            return false;
        }
        MemorySegment r = out.segment();
        r.set(JAVA_LONG, at + Wire.G_SEQ, s);
        r.set(JAVA_INT, at + Wire.G_ENTRIES, n);
        r.set(JAVA_INT, at + Wire.G_ENTRIES + 4, 0);
        long e = at + Wire.GRANT_HEADER;
        for (int k = 0; k < n; k++, e += Wire.ENTRY) {
            r.set(JAVA_LONG, e, checked.segment(k).address() + checked.offset(k));
            r.set(JAVA_LONG, e + 8, checked.length(k));
        }
        int slot = (head + count) % MAX;
        seq[slot] = s;
        src[slot].clear();
        src[slot].addAll(checked); // (the regions it resolved through: a deregistration there waits for it)
        count++;
        lastGranted = s;
        return true;
    }

    /**
     * Lets go of the grants the initiator says it copied out (its copied word: never backwards, never
     * past the last grant, or the connection ends).
     */
    void release(Lane lane) {
        if (count == 0) {
            return;
        }
        long c = lane.peerCopied();
        if (c == copied) {
            return;
        }
        if (c < copied || c > lastGranted + 1) {
            throw new Ring.Violation("the initiator's copied word moved to " + c + " (it was " + copied
                    + ", the last READ granted is " + lastGranted + ")");
        }
        copied = c;
        while (count > 0 && seq[head] < c) {
            src[head].clear();
            head = (head + 1) % MAX;
            count--;
        }
    }

    /** True if a grant not yet copied names memory resolved through {@code region}. */
    boolean through(MrContext region) {
        for (int i = 0, s = head; i < count; i++, s = (s + 1) % MAX) {
            if (src[s].resolvedThrough(region)) {
                return true;
            }
        }
        return false;
    }

    /**
     * Withdraws every grant out (in the lane first, with a fence, then here): the memory they name may
     * change owner after this returns. {@code lane} may be null (none to tell: the grants only go).
     */
    void revokeAll(Lane lane) {
        if (count == 0) {
            return;
        }
        if (lane != null) {
            lane.revoke(lastGranted);
        }
        while (count > 0) {
            src[head].clear();
            head = (head + 1) % MAX;
            count--;
        }
    }
}
