package io.regmem.registration.spi;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The GRH area: rxe's IPv4 form (20 zero bytes, then the IPv4 header with its checksum), the IPv6
 * form; and a writer that keeps its last header writes each datagram's own header, whichever of the
 * header's inputs changed since the last one (never the last one's bytes for another datagram).
 */
@ExtendWith(NoLeaks.class)
class GrhTest {
    private static byte[] fresh(InetAddress src, InetAddress dst, long payload, boolean imm, int hop, int tc) {
        return new Grh().fill(src, dst, payload, imm, hop, tc).toArray(ValueLayout.JAVA_BYTE);
    }

    @Test
    void anIpv4HeaderIsRxesWithAValidChecksum() throws Exception {
        InetAddress src = InetAddress.getByName("10.1.2.3");
        InetAddress dst = InetAddress.getByName("239.1.2.3");
        MemorySegment g = MemorySegment.ofArray(fresh(src, dst, 64, false, 64, 0x28));
        for (int i = 0; i < 20; i++) {
            assertThat(g.get(ValueLayout.JAVA_BYTE, i)).as("byte %d", i).isZero();
        }
        assertThat(g.get(ValueLayout.JAVA_BYTE, 20)).isEqualTo((byte) 0x45);
        assertThat(g.get(ValueLayout.JAVA_BYTE, 21)).as("TOS").isEqualTo((byte) 0x28);
        assertThat(Short.toUnsignedInt(g.get(ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(java.nio.ByteOrder.BIG_ENDIAN), 22)))
                .as("IPv4 total length: header, UDP, BTH, DETH, payload, ICRC").isEqualTo(20 + 8 + 12 + 8 + 64 + 4);
        assertThat(g.asSlice(32, 4).toArray(ValueLayout.JAVA_BYTE)).isEqualTo(src.getAddress());
        assertThat(g.asSlice(36, 4).toArray(ValueLayout.JAVA_BYTE)).isEqualTo(dst.getAddress());
        int sum = 0;
        for (int i = 20; i < 40; i += 2) {
            sum += (g.get(ValueLayout.JAVA_BYTE, i) & 0xFF) << 8 | g.get(ValueLayout.JAVA_BYTE, i + 1) & 0xFF;
        }
        while ((sum >>> 16) != 0) {
            sum = (sum & 0xFFFF) + (sum >>> 16);
        }
        assertThat(sum).as("the header with its checksum sums to 0xFFFF").isEqualTo(0xFFFF);
    }

    @Test
    void eachDatagramGetsItsOwnHeaderWhateverChangedSinceTheLast() throws Exception {
        InetAddress a = InetAddress.getByName("10.1.2.3");
        InetAddress b = InetAddress.getByName("10.9.8.7");
        InetAddress g1 = InetAddress.getByName("239.1.2.3");
        InetAddress g2 = InetAddress.getByName("239.1.2.4");
        InetAddress v6 = InetAddress.getByName("fd00::1");
        Object[][] datagrams = {
            {a, g1, 64L, false, 64, 0}, {a, g1, 64L, false, 64, 0}, // the same twice
            {a, g1, 65L, false, 64, 0}, {a, g1, 65L, true, 64, 0}, {a, g1, 65L, true, 63, 0}, {a, g1, 65L, true, 63, 4},
            {b, g1, 65L, true, 63, 4}, {b, g2, 65L, true, 63, 4}, {a, g1, 64L, false, 64, 0}, // back to the first
            {v6, v6, 64L, false, 64, 0}, {a, v6, 64L, false, 64, 0}, {a, g1, 64L, false, 64, 0},
        };
        Grh grh = new Grh();
        byte[] last = null;
        for (Object[] d : datagrams) {
            byte[] expected = fresh((InetAddress) d[0], (InetAddress) d[1], (long) d[2], (boolean) d[3], (int) d[4], (int) d[5]);
            byte[] got = grh.fill((InetAddress) d[0], (InetAddress) d[1], (long) d[2], (boolean) d[3], (int) d[4], (int) d[5])
                    .toArray(ValueLayout.JAVA_BYTE);
            assertThat(got).as("the header of %s, %s, %s, %s, %s, %s", d).isEqualTo(expected);
            if (last != null && !java.util.Arrays.equals(last, expected)) {
                assertThat(got).isNotEqualTo(last);
            }
            last = got;
        }
    }
}
