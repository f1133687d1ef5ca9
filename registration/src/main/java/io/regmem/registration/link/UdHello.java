package io.regmem.registration.link;

import io.regmem.registration.AhAttributes;
import io.regmem.registration.UdParam;
import java.io.IOException;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.nio.ByteBuffer;

/**
 * The transport address of a HELLO or ACCEPT in rdma_cm's UD address exchange (SIDR) between
 * processes: the side's UD parameters ({@link UdParam}: its device's datagram address, its QP's
 * number and Q_Key) behind a magic of its own, so that a listener tells a UD request from a
 * provider's connection request before it reads either.
 */
final class UdHello {
    /** 'R' 'G' 'U' 'D' and a version. */
    private static final int MAGIC = 0x52475544;
    private static final byte VERSION = 1;

    private UdHello() {
    }

    static byte[] encode(UdParam ud) {
        byte[] a = ud.ah().dgid().getAddress();
        ByteBuffer b = ByteBuffer.allocate(4 + 1 + 1 + a.length + 2 + 4 + 4);
        b.putInt(MAGIC).put(VERSION).put((byte) a.length).put(a).putShort((short) ud.ah().port()).putInt(ud.qpNum())
                .putInt(ud.qkey());
        return b.array();
    }

    /** True if {@code address} is a UD exchange's (its magic), whatever follows. */
    static boolean is(byte[] address) {
        return address.length >= 4 && ByteBuffer.wrap(address).getInt() == MAGIC;
    }

    /**
     * The UD parameters in {@code address}.
     *
     * @throws IOException if it is malformed (a length, an address, a QP number out of range)
     */
    static UdParam decode(byte[] address) throws IOException {
        ByteBuffer b = ByteBuffer.wrap(address);
        if (address.length < 6 || b.getInt() != MAGIC || b.get() != VERSION) {
            throw new IOException("a UD exchange's address of another version");
        }
        int n = b.get();
        if ((n != 4 && n != 16) || b.remaining() != n + 10) {
            throw new IOException("a UD exchange's address of the wrong length");
        }
        byte[] a = new byte[n];
        b.get(a);
        int port = b.getShort() & 0xFFFF;
        int qpn = b.getInt();
        int qkey = b.getInt();
        if (qpn < 0 || qpn >= AhAttributes.MULTICAST_QPN) {
            throw new IOException("a UD exchange's QP number out of range: " + qpn);
        }
        try {
            return new UdParam(AhAttributes.of(InetAddress.getByAddress(a), port), qpn, qkey);
        } catch (UnknownHostException e) {
            throw new IOException("a UD exchange's address is no IP address", e);
        }
    }
}
