package io.regmem.registration.udp;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.HexFormat;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * SipHash-2-4 against the reference implementation's test vectors (key 00..0f, message 00..n-1), as
 * OpenSSL 3's {@code SIPHASH} MAC computes them ({@code openssl mac -macopt hexkey:000102030405060708090a0b0c0d0e0f
 * -macopt size:8 SIPHASH}); the tag is read in place from any offset of off-heap memory.
 */
@ExtendWith(NoLeaks.class)
class SipHashTest {
    /** Message length, and the tag's 8 bytes as the reference prints them (little-endian). */
    private static final Object[][] VECTORS = {
        {0, "310e0edd47db6f72"},
        {1, "fd67dc93c539f874"},
        {7, "37d1018bf50002ab"},
        {8, "6224939a79f5f593"},
        {15, "e545be4961ca29a1"},
        {16, "db9bc2577fcc2a3f"},
        {33, "e37859f94623f3a7"},
        {63, "724506eb4c328a95"},
    };

    @Test
    void theReferenceVectorsHoldAtEveryOffset() {
        byte[] key = new byte[16];
        for (int i = 0; i < 16; i++) {
            key[i] = (byte) i;
        }
        long k0 = SipHash.k0(key);
        long k1 = SipHash.k1(key);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment m = arena.allocate(128);
            for (int offset : new int[] {0, 1, 3, 8, 13}) {
                for (int i = 0; i < 64; i++) {
                    m.set(ValueLayout.JAVA_BYTE, offset + i, (byte) i);
                }
                for (Object[] v : VECTORS) {
                    int length = (Integer) v[0];
                    byte[] expected = HexFormat.of().parseHex((String) v[1]);
                    long tag = SipHash.hash(k0, k1, m, offset, length);
                    byte[] got = new byte[8];
                    for (int b = 0; b < 8; b++) {
                        got[b] = (byte) (tag >>> (8 * b));
                    }
                    assertThat(HexFormat.of().formatHex(got)).as("length %d at offset %d", length, offset)
                            .isEqualTo(HexFormat.of().formatHex(expected));
                }
            }
        }
    }

    @Test
    void anyChangedBitOrKeyChangesTheTag() {
        byte[] key = HexFormat.of().parseHex("00112233445566778899aabbccddeeff");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment m = arena.allocate(100);
            long tag = SipHash.hash(SipHash.k0(key), SipHash.k1(key), m, 0, 100);
            for (int bit = 0; bit < 800; bit += 7) {
                m.set(ValueLayout.JAVA_BYTE, bit / 8, (byte) (1 << (bit % 8)));
                assertThat(SipHash.hash(SipHash.k0(key), SipHash.k1(key), m, 0, 100)).as("bit %d", bit).isNotEqualTo(tag);
                m.set(ValueLayout.JAVA_BYTE, bit / 8, (byte) 0);
            }
            assertThat(SipHash.hash(SipHash.k0(key) ^ 1, SipHash.k1(key), m, 0, 100)).isNotEqualTo(tag);
            assertThat(SipHash.hash(SipHash.k0(key), SipHash.k1(key), m, 0, 99)).as("a zero byte less").isNotEqualTo(tag);
        }
    }
}
