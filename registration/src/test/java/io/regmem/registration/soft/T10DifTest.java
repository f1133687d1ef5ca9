package io.regmem.registration.soft;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.NoLeaks;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The soft provider's CRC-16/T10-DIF: the standard check value, and a bit-by-bit reference. */
@ExtendWith(NoLeaks.class)
class T10DifTest {

    /** A bit-by-bit CRC-16/T10-DIF, independent of the table-driven one under test. */
    private static int referenceCrc(MemorySegment s, long off, long len) {
        int crc = 0;
        for (long i = 0; i < len; i++) {
            crc ^= (s.get(ValueLayout.JAVA_BYTE, off + i) & 0xFF) << 8;
            for (int b = 0; b < 8; b++) {
                crc = (crc & 0x8000) != 0 ? ((crc << 1) ^ 0x8BB7) & 0xFFFF : (crc << 1) & 0xFFFF;
            }
        }
        return crc;
    }

    @Test
    void crc16MatchesTheStandardCheckValueAndTheReference() {
        assertThat(T10Dif.crc16("123456789".getBytes(StandardCharsets.US_ASCII))).isEqualTo(0xD0DB);
        MemorySegment s = MemorySegment.ofArray(new byte[4096]);
        for (int i = 0; i < 4096; i++) {
            s.set(ValueLayout.JAVA_BYTE, i, (byte) (i * 13 + 7));
        }
        assertThat(T10Dif.crc16(s, 0, 4096)).isEqualTo(referenceCrc(s, 0, 4096));
        assertThat(T10Dif.crc16(s, 100, 512)).isEqualTo(referenceCrc(s, 100, 512));
    }
}
