package io.regmem.registration.shm;

import io.regmem.registration.udp.SipHash;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.nio.ByteOrder;

/**
 * A message between two devices' group listeners ({@link GroupDirectory}): 64 bytes, little-endian,
 * the last 8 a SipHash-2-4 tag of the rest under the devices' datagram key (only a holder of the
 * secret makes one that is taken). A publication's descriptor travels with its {@link #OFFER}.
 *
 * <pre>
 *  0 i32 magic "RGGM"   4 u8 version 1   5 u8 type   6 u16 zero
 *  8 i32 group (IPv4, network order)   12 i32 QP number of the publisher
 * 16 i64 process id   24 i64 publication id (one process's)   32 i64 ring capacity
 * 40 i32 datagram address (IPv4, network order)   44 i32 its port   48 i64 nonce   56 i64 tag
 * </pre>
 */
record GroupMessage(int type, int group, int qpn, long pid, long publication, long capacity, int address, int port,
                    long nonce) {
    static final int BYTES = 64;
    static final int MAGIC = 0x4D474752;
    static final int VERSION = 1;
    /** A member asks for the publications to a group (the reply: {@link #COUNT}, then that many {@link #OFFER}s). */
    static final int FETCH = 1;
    /** A publication, its descriptor with it: a reply to {@link #FETCH}, or pushed when it is made. */
    static final int OFFER = 2;
    /** How many offers follow. */
    static final int COUNT = 3;
    /** A pushed offer was taken (or is of no interest). */
    static final int ACK = 4;
    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    /** The bytes of this message, tagged with {@code k0, k1}. */
    byte[] encode(long k0, long k1) {
        byte[] b = new byte[BYTES];
        MemorySegment m = MemorySegment.ofArray(b);
        m.set(INT, 0, MAGIC);
        m.set(ValueLayout.JAVA_BYTE, 4, (byte) VERSION);
        m.set(ValueLayout.JAVA_BYTE, 5, (byte) type);
        m.set(INT, 8, group);
        m.set(INT, 12, qpn);
        m.set(LONG, 16, pid);
        m.set(LONG, 24, publication);
        m.set(LONG, 32, capacity);
        m.set(INT, 40, address);
        m.set(INT, 44, port);
        m.set(LONG, 48, nonce);
        m.set(LONG, 56, SipHash.hash(k0, k1, m, 0, 56));
        return b;
    }

    /** The message in {@code b}, or null if it is not one of this version tagged with {@code k0, k1}. */
    static GroupMessage decode(byte[] b, long k0, long k1) {
        if (b.length != BYTES) {
            return null;
        }
        MemorySegment m = MemorySegment.ofArray(b);
        if (m.get(INT, 0) != MAGIC || m.get(ValueLayout.JAVA_BYTE, 4) != VERSION || m.get(ValueLayout.JAVA_SHORT_UNALIGNED, 6) != 0
                || SipHash.hash(k0, k1, m, 0, 56) != m.get(LONG, 56)) {
            return null;
        }
        int type = m.get(ValueLayout.JAVA_BYTE, 5);
        if (type < FETCH || type > ACK) {
            return null;
        }
        return new GroupMessage(type, m.get(INT, 8), m.get(INT, 12), m.get(LONG, 16), m.get(LONG, 24), m.get(LONG, 32),
                m.get(INT, 40), m.get(INT, 44), m.get(LONG, 48));
    }

    /** An IPv4 address as the message carries it. */
    static int ipv4(InetAddress a) {
        byte[] b = a.getAddress();
        return (b[0] & 0xFF) << 24 | (b[1] & 0xFF) << 16 | (b[2] & 0xFF) << 8 | b[3] & 0xFF;
    }

    /** The datagram address the message names, or null if it is not one. */
    InetSocketAddress endpoint() {
        if (port < 1 || port > 65535) {
            return null;
        }
        try {
            return new InetSocketAddress(Inet4Address.getByAddress(new byte[] {
                (byte) (address >>> 24), (byte) (address >>> 16), (byte) (address >>> 8), (byte) address}), port);
        } catch (UnknownHostException e) {
            return null;
        }
    }
}
