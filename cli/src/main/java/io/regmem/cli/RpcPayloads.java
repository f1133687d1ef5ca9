package io.regmem.cli;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/** The demo's call payloads: what a call's arguments are, what the server makes of them, and the check of a reply. */
final class RpcPayloads {
    private RpcPayloads() {
    }

    private static final ValueLayout.OfLong WORD = ValueLayout.JAVA_LONG_UNALIGNED;

    /** The argument bytes of call xid: a fixed pattern with every byte XORed with the call's byte. */
    static void fillArgs(MemorySegment pattern, MemorySegment to, int xid, long size) {
        xor(pattern, to, size, spread((byte) xid));
    }

    /** The server's work: every argument byte XORed with 0x5A. */
    static void transform(MemorySegment args, MemorySegment to, long size) {
        xor(args, to, size, spread((byte) 0x5A));
    }

    /**
     * True if {@code result} is call xid's answer: the pattern XORed with the call's byte and 0x5A,
     * every byte of it (another call's answer differs wherever the calls' bytes differ).
     */
    static boolean check(MemorySegment pattern, MemorySegment result, int xid, long size) {
        long mask = spread((byte) (xid ^ 0x5A));
        long i = 0;
        for (; i + 8 <= size; i += 8) {
            if (result.get(WORD, i) != (pattern.get(WORD, i) ^ mask)) {
                return false;
            }
        }
        for (; i < size; i++) {
            if (result.get(ValueLayout.JAVA_BYTE, i) != (byte) (pattern.get(ValueLayout.JAVA_BYTE, i) ^ mask)) {
                return false;
            }
        }
        return true;
    }

    private static long spread(byte b) {
        return (b & 0xFFL) * 0x0101_0101_0101_0101L;
    }

    private static void xor(MemorySegment from, MemorySegment to, long size, long mask) {
        long i = 0;
        for (; i + 8 <= size; i += 8) {
            to.set(WORD, i, from.get(WORD, i) ^ mask);
        }
        for (; i < size; i++) {
            to.set(ValueLayout.JAVA_BYTE, i, (byte) (from.get(ValueLayout.JAVA_BYTE, i) ^ mask));
        }
    }
}
