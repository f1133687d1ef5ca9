package io.regmem.core;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The stress tests' ownership marks: a buffer's owner writes a mark (owner and sequence) at its
 * first and last 8 bytes and claims its address; a mark that changed while held, or a claim that is
 * not the holder's when the buffer is freed, is a buffer handed out twice or memory touched under
 * its owner.
 */
final class OwnershipMarks {
    private OwnershipMarks() {
    }

    /** Checks the mark, unclaims the address (before the pool can hand it out again) and frees the buffer. */
    static void release(ConcurrentHashMap<Long, Long> claims, PooledBuffer b, long mark) {
        check(b, mark);
        if (!claims.remove(b.address(), mark)) {
            throw new AssertionError("claim of 0x" + Long.toHexString(b.address()) + " changed while held");
        }
        b.close();
    }

    static void write(PooledBuffer b, long mark) {
        MemorySegment s = b.segment();
        s.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, mark);
        s.set(ValueLayout.JAVA_LONG_UNALIGNED, tailOffset(b), mark);
    }

    static void check(PooledBuffer b, long mark) {
        MemorySegment s = b.segment();
        long head = s.get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
        long tail = s.get(ValueLayout.JAVA_LONG_UNALIGNED, tailOffset(b));
        if (head != mark || tail != mark) {
            throw new AssertionError("ownership mark of " + b + " overwritten: expected " + Long.toHexString(mark)
                    + ", found " + Long.toHexString(head) + "/" + Long.toHexString(tail));
        }
    }

    /** The last 8 bytes of the length asked for, but never overlapping the head mark (capacity >= 64). */
    private static long tailOffset(PooledBuffer b) {
        return Math.max(8, b.length() - 8);
    }
}
