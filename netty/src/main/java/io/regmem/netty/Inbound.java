package io.regmem.netty;

import io.netty.buffer.ByteBuf;
import io.netty.channel.RecvByteBufAllocator;
import io.netty.channel.socket.ChannelInputShutdownReadComplete;

/**
 * A channel's read side: the pieces of the byte stream its connection received, handed up the
 * pipeline while the channel reads ({@code AUTO_READ}, or a {@code read()} asked for: then one
 * piece), else kept, in order, each with the receive it came in. That receive is posted again only
 * when its piece goes up, so the peer's credits run out while a reader does not read. Pieces of
 * {@link #COPY_BELOW} bytes or less are copied into a buffer of the channel's allocator and their
 * receive posted again once the batch's writes went ({@link Receives#later}: a reply is not held back
 * by the post); larger ones go up as they are, a new buffer posted in their place.
 * The credits of the receives posted again go back to the peer after the batch, or during it once it
 * has gone on {@link #EARLY_GRANT_NANOS} and the peer ran short. The end of the peer's stream comes
 * after the last piece. Event loop only.
 */
final class Inbound {
    /** Received pieces this long or shorter are copied into a buffer of the channel's allocator. */
    static final int COPY_BELOW = 2048;
    /**
     * A batch of reads that has gone on this long gives the credits of the pieces already handed up
     * back at once, if the peer ran short, instead of at the batch's end: a pipeline that takes long
     * over many large pieces would otherwise hold the peer's next SEND back until all of them are done.
     */
    static final long EARLY_GRANT_NANOS = 30_000;
    private final RegmemSocketChannel ch;
    private int[] receive = new int[0];
    private ByteBuf[] bufs = new ByteBuf[0];
    /** A chunk's place: the chunk's id (else -1) and its descriptor's buffer, whose receive {@link #receive} says. */
    private int[] chunkIds = new int[0];
    private ByteBuf[] descriptors = new ByteBuf[0];
    private int head;
    private int count;
    private boolean fin;
    private boolean readPending;
    /** The input's end went up (half closure), and no read since said that all was read ({@link #allReadAfterEnd}). */
    private boolean endReadPending;
    private boolean readInBatch;
    /** A read of what a read the allocator ended left is on the event loop's task queue. */
    private boolean resumeScheduled;
    private final Runnable resume = this::resume;
    /** When the batch's first piece went up ({@link #EARLY_GRANT_NANOS}), by the event loop's clock (a few polls early at most). */
    private long batchStart;

    Inbound(RegmemSocketChannel ch) {
        this.ch = ch;
    }

    /** Room for {@code receives} pieces (a connection's receives). */
    void size(int receives) {
        receive = new int[receives];
        bufs = new ByteBuf[receives];
        chunkIds = new int[receives];
        descriptors = new ByteBuf[receives];
        head = 0;
        count = 0;
    }

    boolean isEmpty() {
        return count == 0;
    }

    /**
     * A read was asked for ({@code doBeginRead}): what waits goes up now, else the next piece; with the
     * input {@code shut}, only {@link #allReadAfterEnd}.
     */
    void beginRead(boolean shut) {
        readPending = true;
        if (!shut && (count > 0 || fin)) {
            deliver();
            readComplete();
            grant();
        } else {
            allReadAfterEnd();
        }
    }

    /** The peer's end went up as ChannelInputShutdownEvent (half closure): the next read reports all read. */
    void endSeen() {
        endReadPending = true;
    }

    /**
     * Once after the input's end went up, at the end of the read that follows (at once with AUTO_READ,
     * else at the next {@code read()}): ChannelInputShutdownReadComplete, as Netty's TCP channels fire it
     * when a read after the end finds the end again.
     */
    private void allReadAfterEnd() {
        if (endReadPending && ch.isOpen() && (readPending || ch.config().isAutoRead())) {
            endReadPending = false;
            readPending = false;
            ch.pipeline().fireUserEventTriggered(ChannelInputShutdownReadComplete.INSTANCE);
        }
    }

    void clearReadPending() {
        readPending = false;
    }

    private boolean canRead() {
        return ch.isActive() && (readPending || ch.config().isAutoRead());
    }

    /** Receive {@code i} completed with {@code length} bytes in {@code buf}; {@code end}: the peer's stream ended. */
    void received(Connection c, int i, ByteBuf buf, int length, boolean end) {
        if (length == 0 || ch.inputShutdown()) {
            c.recv.post(i, buf.clear()); // (no bytes, or the input is shut down: the receive goes back at once)
        } else {
            buf.writerIndex(length);
            int at = (head + count) % bufs.length;
            receive[at] = i;
            bufs[at] = buf;
            chunkIds[at] = -1;
            count++;
        }
        if (end) {
            fin = true;
        }
        if (canRead()) {
            deliver();
        }
    }

    /**
     * Chunk {@code id} takes its place in the stream (its bytes come when its READ completes), keeping
     * its descriptor's receive {@code i} ({@code descriptor}) until it goes up: like every piece here,
     * it holds one of the connection's receives, so a reader that does not read holds its peer back.
     * False if the input is shut down (no place: the caller posts the receive again).
     */
    boolean chunk(int id, int i, ByteBuf descriptor) {
        if (ch.inputShutdown()) {
            return false;
        }
        int at = (head + count) % bufs.length;
        receive[at] = i;
        bufs[at] = null;
        chunkIds[at] = id;
        descriptors[at] = descriptor;
        count++;
        return true;
    }

    /** Chunk {@code id}'s bytes are in {@code buf}; false if its place is gone (the input was shut down). */
    boolean arrived(int id, ByteBuf buf) {
        for (int k = 0; k < count; k++) {
            int at = (head + k) % bufs.length;
            if (chunkIds[at] == id && bufs[at] == null) {
                bufs[at] = buf;
                if (canRead()) {
                    deliver();
                }
                return true;
            }
        }
        return false;
    }

    /** Hands pieces up while the channel reads; then, if all went and the peer's stream ended, says so. */
    void deliver() {
        while (count > 0 && bufs[head] != null && canRead()) {
            if (readInBatch && !ch.unsafe().recvBufAllocHandle().continueReading()) {
                return; // the allocator ended this read (maxMessagesPerRead): the rest goes up in the next (readComplete)
            }
            ByteBuf b = bufs[head];
            int i = receive[head];
            ByteBuf d = descriptors[head];
            bufs[head] = null;
            descriptors[head] = null;
            head = (head + 1) % bufs.length;
            count--;
            if (d != null) { // a chunk's: its descriptor's receive is posted again, the chunk goes up as it is
                ch.connection().recv.post(i, d.clear());
                i = -1;
            }
            fireRead(i, b);
        }
        if (count == 0 && fin && ch.isActive()) {
            fin = false;
            ch.inputEnded();
        }
    }

    private void fireRead(int i, ByteBuf buf) {
        Connection c = ch.connection();
        int n = buf.readableBytes();
        ByteBuf msg = buf;
        if (i < 0) {
            // a chunk's buffer: it is no receive, and goes up as it is
        } else if (n <= COPY_BELOW) {
            try {
                msg = ch.config().getAllocator().ioBuffer(n);
                msg.writeBytes(buf, buf.readerIndex(), n);
                c.recv.later(i, buf.clear());
            } catch (RuntimeException e) { // (the allocator is out of memory: the piece goes up in its receive)
                if (msg != buf) {
                    msg.release();
                }
                msg = buf;
                c.recv.postFresh(i);
            }
        } else {
            c.recv.postFresh(i);
        }
        try {
            RecvByteBufAllocator.Handle h = ch.unsafe().recvBufAllocHandle();
            if (!readInBatch) {
                readInBatch = true;
                batchStart = c.handler.clock(); // (no clock read on the way up: the loop read it before the poll, or while it spun)
                h.reset(ch.config());
            } else if (c.peerShort() && System.nanoTime() - batchStart > EARLY_GRANT_NANOS) { // (only a peer short of credits reads it)
                c.grant(); // (the peer waits for credits, and this batch takes long: the receives posted again go back now)
            }
            h.attemptedBytesRead(n); // (a piece is whole: as a socket read that filled its buffer, more may follow)
            h.lastBytesRead(n);
            h.incMessagesRead(1);
        } catch (Throwable t) { // (the application's RecvByteBufAllocator: the connection ends, Connection.failed)
            msg.release();
            throw t;
        }
        readPending = false;
        ch.pipeline().fireChannelRead(msg);
    }

    /** Ends the read of this batch of completions ({@code channelReadComplete}), if anything went up. */
    void readComplete() {
        if (readInBatch) {
            readInBatch = false;
            ch.unsafe().recvBufAllocHandle().readComplete();
            ch.pipeline().fireChannelReadComplete();
            if (!resumeScheduled && count > 0 && bufs[head] != null && canRead()) { // (the allocator ended the read early)
                resumeScheduled = true;
                ch.eventLoop().execute(resume);
            }
        }
        if (count == 0) {
            allReadAfterEnd();
        }
    }

    /** Hands up, in a read of its own, what a read the allocator ended left (as Netty's loop reads a socket again). */
    private void resume() {
        resumeScheduled = false;
        if (count > 0 && canRead()) {
            deliver();
            readComplete();
            grant();
        }
    }

    /** Tells the peer of the receives posted again outside a batch of completions (none may come to carry them). */
    private void grant() {
        Connection c = ch.connection();
        if (c != null) {
            c.grant();
        }
    }

    /** Drops every piece here and posts its receive again (the input was shut down). */
    void dropAll(Connection c) {
        while (count > 0) {
            ByteBuf b = bufs[head];
            int i = receive[head];
            ByteBuf d = descriptors[head];
            bufs[head] = null;
            descriptors[head] = null;
            head = (head + 1) % bufs.length;
            count--;
            if (d != null) { // a chunk's: its receive goes back; its buffer (if its READ still runs, released when it ends)
                if (b != null) {
                    b.release();
                }
                b = d;
            }
            if (b == null) {
                continue;
            }
            if (c != null && c.channel != null) {
                c.recv.post(i, b.clear());
            } else {
                b.release();
            }
        }
        grant();
    }

    /** Gives back every piece here (the channel closed: its connection posts nothing again). */
    void releaseAll() {
        while (count > 0) {
            if (bufs[head] != null) {
                bufs[head].release();
            }
            if (descriptors[head] != null) {
                descriptors[head].release();
            }
            bufs[head] = null;
            descriptors[head] = null;
            head = (head + 1) % bufs.length;
            count--;
        }
        fin = false;
    }
}
