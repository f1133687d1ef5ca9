package io.regmem.registration.soft;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.rw.SignatureTest;
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The soft provider's CRC-16/T10-DIF: the standard check value, and SignatureTest's bit-by-bit reference. */
@ExtendWith(NoLeaks.class)
class T10DifTest {

    @Test
    void crc16MatchesTheStandardCheckValueAndTheReference() {
        assertThat(T10Dif.crc16("123456789".getBytes(StandardCharsets.US_ASCII))).isEqualTo(0xD0DB);
        MemorySegment s = MemorySegment.ofArray(new byte[4096]);
        for (int i = 0; i < 4096; i++) {
            s.set(ValueLayout.JAVA_BYTE, i, (byte) (i * 13 + 7));
        }
        assertThat(T10Dif.crc16(s, 0, 4096)).isEqualTo(SignatureTest.referenceCrc(s, 0, 4096));
        assertThat(T10Dif.crc16(s, 100, 512)).isEqualTo(SignatureTest.referenceCrc(s, 100, 512));
    }
}
