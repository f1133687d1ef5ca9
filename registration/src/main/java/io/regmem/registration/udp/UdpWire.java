package io.regmem.registration.udp;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * A regmem datagram on UDP: a 40-byte header, the message, and an 8-byte SipHash-2-4 tag of both
 * under a key derived from the connection secret ({@link #key}), all little-endian:
 * <pre>
 *  0  u32 magic 'RGDG'      4 u8 version (1)   5 u8 flags (1 immediate, 2 solicited, 4 multicast)
 *  6  u8 traffic class      7 u8 zero
 *  8  u32 source QP number (24 bits)     12 u32 destination QP number (24 bits; 0xFFFFFF: a group)
 * 16  u32 Q_Key                          20 u32 immediate data
 * 24  u32 the sender QP's sequence number for this destination (the device, or the group)
 * 28  u32 zero                           32 u64 the last 8 bytes of the group's IPv4-mapped form; zero otherwise
 * 40  the message, then the tag of bytes [0, 40 + length)
 * </pre>
 * A receiver counts a gap in a sender's sequence as datagrams lost on the way ({@code DatagramDrop.LOST}).
 * Any process that holds the secret can send one; a datagram whose tag is wrong is dropped and
 * counted ({@code DatagramDrop.UNAUTHENTICATED}), one that breaks the format
 * ({@code DatagramDrop.MALFORMED}) too, before any of it is used.
 */
final class UdpWire {
    static final int MAGIC = 0x47444752; // 'R' 'G' 'D' 'G', little-endian
    static final int VERSION = 1;
    static final int HEADER = 40;
    static final int TAG = 8;
    static final int F_IMM = 1;
    static final int F_SOLICITED = 2;
    static final int F_MULTICAST = 4;
    static final int FLAGS = F_IMM | F_SOLICITED | F_MULTICAST;
    static final int MAX_QPN = 0xFFFFFF;
    /** The largest datagram UDP over IPv4 carries. */
    static final int MAX_DATAGRAM = 65_507;
    /** The longest message: the largest path MTU (a longer datagram is malformed). */
    static final int MAX_MESSAGE = 4096;
    static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final byte[] LABEL = "regmem udp datagram key 1".getBytes(StandardCharsets.US_ASCII);

    private UdpWire() {
    }

    /** The datagram key of {@code secret}: the first 16 bytes of HMAC-SHA256(secret, a fixed label). */
    static byte[] key(byte[] secret) {
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(secret, "HmacSHA256"));
            byte[] d = mac.doFinal(LABEL);
            byte[] k = new byte[16];
            System.arraycopy(d, 0, k, 0, 16);
            return k;
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("HmacSHA256 is missing from this JDK", e);
        }
    }

    /** Writes a header into {@code m} at {@code at} (five 8-byte stores: the fields two by two, little-endian). */
    static void header(MemorySegment m, long at, int flags, int trafficClass, int srcQpn, int dstQpn, int qkey, int imm,
                       int seq, long groupLo) {
        m.set(LONG, at, word0(flags, trafficClass));
        m.set(LONG, at + 8, pair(srcQpn, dstQpn));
        m.set(LONG, at + 16, pair(qkey, imm));
        m.set(LONG, at + 24, seq & 0xFFFF_FFFFL); // (and the zero at 28)
        m.set(LONG, at + 32, groupLo);
    }

    /** The header's first 8 bytes: magic, version, {@code flags}, {@code trafficClass} and the zero byte. */
    static long word0(int flags, int trafficClass) {
        return (MAGIC & 0xFFFF_FFFFL) | (long) VERSION << 32 | (long) (flags & 0xFF) << 40 | (long) (trafficClass & 0xFF) << 48;
    }

    /** Two little-endian u32 fields as one 8-byte word: {@code lo} first. */
    static long pair(int lo, int hi) {
        return (lo & 0xFFFF_FFFFL) | (long) hi << 32;
    }

    /**
     * The last 8 bytes of {@code group}'s 16-byte IPv4-mapped form (little-endian, as stored at
     * offset 32; its first 8 bytes are zero).
     */
    static long groupLo(InetAddress group) {
        byte[] a = group.getAddress();
        if (!(group instanceof Inet4Address)) {
            throw new IllegalArgumentException("an IPv4 group");
        }
        MemorySegment m = MemorySegment.ofArray(new byte[8]);
        m.set(ValueLayout.JAVA_BYTE, 2, (byte) 0xFF);
        m.set(ValueLayout.JAVA_BYTE, 3, (byte) 0xFF);
        MemorySegment.copy(a, 0, m, ValueLayout.JAVA_BYTE, 4, 4);
        return m.get(LONG, 0);
    }
}
