package io.regmem.registration.ucx;

import io.regmem.registration.link.Link;
import java.io.IOException;
import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;

/**
 * The address a ucx HELLO or ACCEPT carries (authenticated by the handshake, opaque to it): the
 * sender's worker address, and, if it offers or takes the same-host lane, its lane offer. A
 * requester whose device has the lane on offers it; a listener that takes it answers its own offer
 * (the connection runs over the lane), else none (it runs over UCX, to the worker). Big-endian:
 * <pre>
 *   magic u32 "RMUX"   version u16   worker length u32 (1..61428)   worker   lane offer length u16 (0..4096)   lane offer
 * </pre>
 * Every field is checked when it is read; an address that is not exactly this is refused.
 */
record UcxHello(byte[] worker, byte[] laneOffer) {
    static final int MAGIC = 0x524D_5558; // "RMUX"
    static final short VERSION = 1;
    static final int MAX_OFFER = 4096;
    /** So that the whole address fits the handshake's limit ({@link Link#MAX_ADDRESS}). */
    static final int MAX_WORKER = Link.MAX_ADDRESS - 12 - MAX_OFFER;

    /** The bytes of this address. */
    byte[] encode() {
        int offer = laneOffer == null ? 0 : laneOffer.length;
        if (worker.length < 1 || worker.length > MAX_WORKER || offer > MAX_OFFER) {
            throw new IllegalArgumentException("worker " + worker.length + " bytes, lane offer " + offer + " bytes");
        }
        ByteBuffer b = ByteBuffer.allocate(4 + 2 + 4 + worker.length + 2 + offer);
        b.putInt(MAGIC).putShort(VERSION).putInt(worker.length).put(worker).putShort((short) offer);
        if (offer > 0) {
            b.put(laneOffer);
        }
        return b.array();
    }

    /**
     * Reads an address.
     *
     * @throws IOException naming the rule the bytes break
     */
    static UcxHello decode(byte[] bytes) throws IOException {
        ByteBuffer b = ByteBuffer.wrap(bytes);
        try {
            if (b.getInt() != MAGIC) {
                throw new IOException("the peer's address is not a ucx address (bad magic): is it another provider, or "
                        + "another version?");
            }
            short v = b.getShort();
            if (v != VERSION) {
                throw new IOException("the peer's ucx address has version " + v + ", this is version " + VERSION);
            }
            int w = b.getInt();
            if (w < 1 || w > MAX_WORKER) {
                throw new IOException("the peer's ucx address names a worker address of " + w + " bytes (1 to " + MAX_WORKER + ")");
            }
            byte[] worker = new byte[w];
            b.get(worker);
            int o = Short.toUnsignedInt(b.getShort());
            if (o > MAX_OFFER) {
                throw new IOException("the peer's ucx address carries a lane offer of " + o + " bytes (at most " + MAX_OFFER + ")");
            }
            byte[] offer = null;
            if (o > 0) {
                offer = new byte[o];
                b.get(offer);
            }
            if (b.hasRemaining()) {
                throw new IOException("the peer's ucx address has " + b.remaining() + " bytes too many");
            }
            return new UcxHello(worker, offer);
        } catch (BufferUnderflowException e) {
            throw new IOException("the peer's ucx address is cut short (" + bytes.length + " bytes)");
        }
    }
}
