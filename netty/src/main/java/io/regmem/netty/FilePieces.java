package io.regmem.netty;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelOutboundBuffer;
import io.netty.channel.FileRegion;
import io.regmem.core.RdmaException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.WritableByteChannel;

/**
 * A {@link FileRegion}'s way out on one connection: each piece of it is read ({@link
 * FileRegion#transferTo}) into a registered buffer of the transport's pool, which then goes as any
 * registered buffer does, in a SEND when it fits the peer's receive, else as a read chunk of up to
 * {@link Chunks#MAX_BYTES}. The region's progress is reported to its promise as the pieces go, and
 * it leaves the outbound buffer (released) once all of it went. Event loop only.
 */
final class FilePieces implements WritableByteChannel {
    /** {@link #write}: the region went, or a piece of it did and the rest can go on at once. */
    static final int WENT = 0;
    /** {@link #write}: the rest waits for credits, a SEND slot or a chunk. */
    static final int WAIT = 1;
    /** {@link #write}: the region gave no bytes though it has some left (the channel tries again later). */
    static final int STALLED = 2;
    private final Connection c;
    private final Chunks chunks;
    /** The piece being filled by {@link #write(ByteBuffer)} during a transfer. */
    private ByteBuf piece;

    FilePieces(Connection c, Chunks chunks) {
        this.c = c;
        this.chunks = chunks;
    }

    /**
     * Sends the next piece of {@code region}, the outbound buffer's current message: one SEND or one
     * chunk. {@link #WENT} also when the region was complete (it is then removed).
     *
     * @throws IOException as the region's transfer (a file shorter than the region, a closed file),
     *                     or if the SEND cannot be posted (the connection broke)
     */
    int write(ChannelOutboundBuffer in, FileRegion region, RegmemByteBufAllocator registered) throws IOException {
        long count = region.count();
        long done = region.transferred();
        if (done >= count) {
            in.remove();
            return WENT;
        }
        if (!c.canSend()) {
            return WAIT;
        }
        boolean chunk = count - done > c.peerReceiveSize && chunks.canChunk();
        int want = (int) Math.min(count - done, chunk ? Chunks.MAX_BYTES : c.peerReceiveSize);
        ByteBuf b = registered.directBuffer(want, want);
        long n;
        int length;
        try {
            piece = b;
            try {
                n = region.transferTo(this, done);
            } finally {
                piece = null;
            }
            if (n <= 0 || b.readableBytes() == 0) {
                b.release();
                return STALLED;
            }
            length = b.readableBytes();
            if (length > c.peerReceiveSize) {
                chunks.sendChunk(registered, b, b.memoryAddress(), length);
            } else {
                c.send(b, b.memoryAddress(), length, registered.lkey(b), 0);
            }
        } catch (RdmaException e) { // (the QP went: the connection is broken)
            b.release();
            throw new IOException(c.id + ": a SEND could not be posted: " + e.getMessage(), e);
        } catch (IOException | RuntimeException e) {
            b.release();
            throw e;
        }
        in.progress(length);
        if (region.transferred() >= count) {
            in.remove();
        }
        return WENT;
    }

    /** Takes what fits of {@code src} into the piece being filled; 0 once it is full. */
    @Override
    public int write(ByteBuffer src) throws IOException {
        ByteBuf b = piece;
        if (b == null) {
            throw new IOException("a FileRegion wrote to its channel after its transferTo returned");
        }
        int n = Math.min(src.remaining(), b.writableBytes());
        if (n > 0) {
            int limit = src.limit();
            src.limit(src.position() + n);
            b.writeBytes(src);
            src.limit(limit);
        }
        return n;
    }

    @Override
    public boolean isOpen() {
        return piece != null;
    }

    @Override
    public void close() {
        // the connection's, not the region's to close
    }
}
