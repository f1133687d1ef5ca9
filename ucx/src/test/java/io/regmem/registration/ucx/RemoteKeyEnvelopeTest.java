package io.regmem.registration.ucx;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The envelope that keeps bytes which are not an exported key away from UCX (whose unpack trusts
 * them): a round trip keeps every field; every single-bit flip, every truncation and an extension
 * is refused with EINVAL before a packed key is returned.
 */
@ExtendWith(NoLeaks.class)
class RemoteKeyEnvelopeTest {

    private static MemorySegment encoded(Arena a, byte[] packed) {
        MemorySegment s = a.allocate(RemoteKeyEnvelope.size(packed.length));
        RemoteKeyEnvelope.encode(0x1234_5678, 0b1011, 0x7f00_0000_1000L, 1 << 20, RemoteKeyEnvelope.TARGET_CHECKS, packed, s);
        return s;
    }

    @Test
    void aRoundTripKeepsEveryField() {
        byte[] packed = new byte[97];
        new SplittableRandom(1).nextBytes(packed);
        try (Arena a = Arena.ofConfined()) {
            RemoteKeyEnvelope.Decoded d = RemoteKeyEnvelope.decode(encoded(a, packed), "qp");
            assertThat(d.rkey()).isEqualTo(0x1234_5678);
            assertThat(d.access()).isEqualTo(0b1011);
            assertThat(d.address()).isEqualTo(0x7f00_0000_1000L);
            assertThat(d.length()).isEqualTo(1 << 20);
            assertThat(d.packed()).isEqualTo(packed);
            assertThat(d.flags()).isEqualTo(RemoteKeyEnvelope.TARGET_CHECKS);
            assertThat(d.rangeKnown()).isFalse();
        }
    }

    @Test
    void everySingleBitFlipIsRefused() {
        byte[] packed = new byte[61];
        new SplittableRandom(2).nextBytes(packed);
        try (Arena a = Arena.ofConfined()) {
            MemorySegment good = encoded(a, packed);
            for (long i = 0; i < good.byteSize(); i++) {
                for (int bit = 0; bit < 8; bit++) {
                    MemorySegment bad = a.allocate(good.byteSize());
                    bad.copyFrom(good);
                    bad.set(ValueLayout.JAVA_BYTE, i, (byte) (bad.get(ValueLayout.JAVA_BYTE, i) ^ (1 << bit)));
                    long at = i;
                    int b = bit;
                    assertThatThrownBy(() -> RemoteKeyEnvelope.decode(bad, "qp")).as("byte %d bit %d", at, b)
                            .isInstanceOf(RdmaException.class)
                            .satisfies(e -> assertThat(((RdmaException) e).errno()).isEqualTo(Errno.EINVAL))
                            .hasMessageContaining("qp: importRemoteKey: ");
                }
            }
        }
    }

    @Test
    void truncatedExtendedAndForeignBytesAreRefused() {
        byte[] packed = new byte[33];
        try (Arena a = Arena.ofConfined()) {
            MemorySegment good = encoded(a, packed);
            for (long n = 0; n < good.byteSize(); n++) {
                MemorySegment cut = good.asSlice(0, n);
                assertThatThrownBy(() -> RemoteKeyEnvelope.decode(cut, "qp")).isInstanceOf(RdmaException.class);
            }
            MemorySegment longer = a.allocate(good.byteSize() + 1);
            longer.copyFrom(good);
            assertThatThrownBy(() -> RemoteKeyEnvelope.decode(longer, "qp")).hasMessageContaining("does not fit");
            MemorySegment softKey = a.allocate(4);
            softKey.set(ValueLayout.JAVA_INT, 0, 0x0100_0001);
            assertThatThrownBy(() -> RemoteKeyEnvelope.decode(softKey, "qp")).hasMessageContaining("shorter than");
            MemorySegment zeros = a.allocate(200);
            assertThatThrownBy(() -> RemoteKeyEnvelope.decode(zeros, "qp")).hasMessageContaining("no RMUX magic");
        }
    }
}
