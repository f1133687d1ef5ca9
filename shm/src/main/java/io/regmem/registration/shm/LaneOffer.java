package io.regmem.registration.shm;

import java.io.IOException;
import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * What each side of a same-host connection tells the other in the authenticated handshake (the
 * address a HELLO or ACCEPT carries): who it is (process id in its own pid namespace and start time,
 * for messages and the pre-6.5 pid check; boot id: the same boot id means the same host; network
 * namespace: the same one means the other's abstract sockets are reachable), where its probe word is (the other side copies it out to learn whether the
 * kernel lets it), the rings' size (the requester's choice), and, from the listener, the abstract
 * socket the requester hands the lane's memfd to and the one-time ticket it must show there.
 * Big-endian:
 * <pre>
 *   magic u32 "RMSH"   version u16   pid u32   start time u64   boot id [36]   network namespace u64   probe address u64
 *   probe value u64   ring bytes u64   socket name length u16 (0, or 1..100)   socket name   ticket [16] (with a name)
 * </pre>
 * Every field is checked when it is read; an offer that is not exactly this is refused.
 */
record LaneOffer(int pid, long startTime, String bootId, long netns, long probeAddress, long probeValue, long ringBytes,
        String socket, byte[] ticket) {
    static final int MAGIC = 0x524D_5348; // "RMSH"
    static final short VERSION = 4;
    static final int BOOT_ID = 36;
    static final int TICKET = 16;
    static final int MAX_SOCKET = 100;
    static final long MIN_RING = 64L << 10;
    static final long MAX_RING = 256L << 20;

    /** The bytes of this offer. */
    byte[] encode() {
        byte[] name = socket == null ? new byte[0] : socket.getBytes(StandardCharsets.US_ASCII);
        ByteBuffer b = ByteBuffer.allocate(4 + 2 + 4 + 8 + BOOT_ID + 8 + 8 + 8 + 8 + 2 + name.length
                + (name.length > 0 ? TICKET : 0));
        b.putInt(MAGIC).putShort(VERSION).putInt(pid).putLong(startTime).put(fixed(bootId)).putLong(netns).putLong(probeAddress)
                .putLong(probeValue).putLong(ringBytes).putShort((short) name.length).put(name);
        if (name.length > 0) {
            b.put(ticket);
        }
        return b.array();
    }

    private static byte[] fixed(String id) {
        byte[] out = new byte[BOOT_ID];
        byte[] in = id.getBytes(StandardCharsets.US_ASCII);
        System.arraycopy(in, 0, out, 0, Math.min(in.length, BOOT_ID));
        return out;
    }

    /**
     * Reads an offer.
     *
     * @param withSocket true for a listener's offer (it names its socket and ticket), false for a requester's
     * @throws IOException naming the rule an offer breaks
     */
    static LaneOffer decode(byte[] bytes, boolean withSocket) throws IOException {
        ByteBuffer b = ByteBuffer.wrap(bytes);
        try {
            if (b.getInt() != MAGIC) {
                throw new IOException("the peer's address is not an shm lane offer (bad magic): is it another provider?");
            }
            short v = b.getShort();
            if (v != VERSION) {
                throw new IOException("the peer's lane offer has version " + v + ", this is version " + VERSION);
            }
            int pid = b.getInt();
            long start = b.getLong();
            byte[] boot = new byte[BOOT_ID];
            b.get(boot);
            long netns = b.getLong();
            long probeAddress = b.getLong();
            long probeValue = b.getLong();
            long ring = b.getLong();
            int nameLength = Short.toUnsignedInt(b.getShort());
            if (pid <= 0 || start < 0) {
                throw new IOException("the peer's lane offer names process " + pid + " started at " + start);
            }
            if (ring < MIN_RING || ring > MAX_RING || Long.bitCount(ring) != 1) {
                throw new IOException("the peer's lane offer asks for rings of " + ring + " bytes (a power of two from "
                        + MIN_RING + " to " + MAX_RING + ")");
            }
            if (withSocket != (nameLength > 0) || nameLength > MAX_SOCKET) {
                throw new IOException("the peer's lane offer names a socket of " + nameLength + " bytes where "
                        + (withSocket ? "1 to " + MAX_SOCKET : "none") + " are due");
            }
            byte[] name = new byte[nameLength];
            b.get(name);
            for (byte c : name) {
                if (c < 0x21 || c > 0x7e) {
                    throw new IOException("the peer's lane offer names a socket with a byte 0x" + Integer.toHexString(c & 0xff));
                }
            }
            byte[] ticket = null;
            if (nameLength > 0) {
                ticket = new byte[TICKET];
                b.get(ticket);
            }
            if (b.hasRemaining()) {
                throw new IOException("the peer's lane offer has " + b.remaining() + " bytes too many");
            }
            return new LaneOffer(pid, start, new String(boot, StandardCharsets.US_ASCII).strip(), netns, probeAddress, probeValue,
                    ring, nameLength > 0 ? new String(name, StandardCharsets.US_ASCII) : null, ticket);
        } catch (BufferUnderflowException e) {
            throw new IOException("the peer's lane offer is cut short (" + bytes.length + " bytes)");
        }
    }
}
