package io.regmem.registration.udp;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * SipHash-2-4 (Aumasson and Bernstein, 2012): a keyed 64-bit tag of a range of memory, read in place
 * and allocating nothing, as the Linux kernel's {@code siphash()} and OpenSSL's {@code SIPHASH} MAC
 * compute it (the reference implementation's test vectors hold: see its test). It tags every datagram
 * that regmem sends over UDP with a key derived from the connection secret ({@code UdpWire.key}):
 * the JDK's {@code Mac} allocates per message and costs several times as much.
 */
public final class SipHash {
    private static final ValueLayout.OfLong LE_LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private SipHash() {
    }

    /** The key's first half, from its 16 bytes (little-endian, as the reference reads it). */
    public static long k0(byte[] key) {
        return MemorySegment.ofArray(key).get(LE_LONG, 0);
    }

    /** The key's second half. */
    public static long k1(byte[] key) {
        return MemorySegment.ofArray(key).get(LE_LONG, 8);
    }

    /** The SipHash-2-4 tag of {@code length} bytes of {@code m} from {@code offset}, under the key (k0, k1). */
    public static long hash(long k0, long k1, MemorySegment m, long offset, long length) {
        long v0 = 0x736f6d6570736575L ^ k0;
        long v1 = 0x646f72616e646f6dL ^ k1;
        long v2 = 0x6c7967656e657261L ^ k0;
        long v3 = 0x7465646279746573L ^ k1;
        long end = offset + (length & ~7L);
        for (long i = offset; i < end; i += 8) {
            long w = m.get(LE_LONG, i);
            v3 ^= w;
            for (int r = 0; r < 2; r++) {
                v0 += v1; v1 = Long.rotateLeft(v1, 13); v1 ^= v0; v0 = Long.rotateLeft(v0, 32);
                v2 += v3; v3 = Long.rotateLeft(v3, 16); v3 ^= v2;
                v0 += v3; v3 = Long.rotateLeft(v3, 21); v3 ^= v0;
                v2 += v1; v1 = Long.rotateLeft(v1, 17); v1 ^= v2; v2 = Long.rotateLeft(v2, 32);
            }
            v0 ^= w;
        }
        long b = length << 56;
        int left = (int) (length & 7);
        for (int j = 0; j < left; j++) {
            b |= (m.get(ValueLayout.JAVA_BYTE, end + j) & 0xFFL) << (8 * j);
        }
        v3 ^= b;
        for (int r = 0; r < 2; r++) {
            v0 += v1; v1 = Long.rotateLeft(v1, 13); v1 ^= v0; v0 = Long.rotateLeft(v0, 32);
            v2 += v3; v3 = Long.rotateLeft(v3, 16); v3 ^= v2;
            v0 += v3; v3 = Long.rotateLeft(v3, 21); v3 ^= v0;
            v2 += v1; v1 = Long.rotateLeft(v1, 17); v1 ^= v2; v2 = Long.rotateLeft(v2, 32);
        }
        v0 ^= b;
        v2 ^= 0xFF;
        for (int r = 0; r < 4; r++) {
            v0 += v1; v1 = Long.rotateLeft(v1, 13); v1 ^= v0; v0 = Long.rotateLeft(v0, 32);
            v2 += v3; v3 = Long.rotateLeft(v3, 16); v3 ^= v2;
            v0 += v3; v3 = Long.rotateLeft(v3, 21); v3 ^= v0;
            v2 += v1; v1 = Long.rotateLeft(v1, 17); v1 ^= v2; v2 = Long.rotateLeft(v2, 32);
        }
        return v0 ^ v1 ^ v2 ^ v3;
    }
}
