package io.regmem.netty;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * What a connection tells its peer when it connects or accepts (the private data, 16 bytes): magic
 * "RGNT", version, the receives it keeps posted and their size. The peer sends into those receives
 * only, as the credits they grant allow ({@link Connection}).
 *
 * @param receives    the receives the side keeps posted (2 to 4,096)
 * @param receiveSize their size in bytes (1 KiB to 1 MiB)
 */
record Offer(int receives, int receiveSize) {
    static final int MAGIC = 0x544e4752;
    static final int VERSION = 1;
    static final int BYTES = 16;

    /** The private data. */
    byte[] encode() {
        return ByteBuffer.allocate(BYTES).order(ByteOrder.LITTLE_ENDIAN).putInt(MAGIC).putInt(VERSION).putInt(receives)
                .putInt(receiveSize).array();
    }

    /**
     * The offer in {@code peer}, the private data the peer of connection {@code who} sent.
     *
     * @throws RdmaException {@link Errno#EINVAL} if it is not a regmem Netty transport's offer
     */
    static Offer parse(Object who, byte[] peer) {
        ByteBuffer b = ByteBuffer.wrap(peer).order(ByteOrder.LITTLE_ENDIAN);
        if (peer.length < BYTES || b.getInt() != MAGIC || b.getInt() != VERSION) {
            throw new RdmaException(Errno.EINVAL, who + ": the peer is not a regmem Netty transport's channel ("
                    + peer.length + " bytes of private data)");
        }
        int r = b.getInt();
        int size = b.getInt();
        if (r < 2 || r > 4096 || size < 1024 || size > (1 << 20)) {
            throw new RdmaException(Errno.EINVAL, who + ": the peer offers " + r + " receives of " + size + " bytes");
        }
        return new Offer(r, size);
    }
}
