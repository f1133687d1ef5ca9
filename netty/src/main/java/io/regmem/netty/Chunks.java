package io.regmem.netty;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelOutboundBuffer;
import io.netty.channel.FileRegion;
import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteOrder;
import org.agrona.collections.Int2IntHashMap;

/**
 * The byte stream's way out, and its large pieces' way in, on one connection. A piece that fits the
 * peer's receive goes in a SEND. A larger one goes as a read chunk, as xprtrdma's: this side sends a
 * descriptor (the registered memory's address, length and key; the key's exported bytes the first time
 * it is used), the peer allocates a registered buffer of that length, RDMA READs the piece into it
 * (one copy: on shm {@code process_vm_readv} straight between the two processes' buffers) and answers
 * {@link Connection#DONE}, and only then does this side let go of the memory. A chunk takes one of the
 * peer's receives (for its descriptor) and none of its receive window for its bytes, so a stream of
 * large writes is not held to the peer's receives. At most {@link #MAX} chunks of one connection are
 * outstanding; each covers at most {@link #MAX_BYTES}; the pieces of the stream keep their order (the
 * peer hands a chunk up where its descriptor came). Event loop only.
 */
final class Chunks {
    /** Chunks outstanding at once, each way. */
    static final int MAX = 8;
    /** The most bytes one chunk covers (the pool's largest size class: the peer's buffer is a pooled one). */
    static final int MAX_BYTES = 1 << 20;
    /** Distinct keys a connection sends (the peer imports each once for the QP's life); past them, pieces go in SENDs. */
    static final int MAX_KEYS = 4096;
    /** Descriptor: id u8, flags u8 (1: the key's bytes follow), key id u16, length i32, address i64, key length u16, key. */
    private static final int DESCRIPTOR = 18;
    private static final int WITH_KEY = 1;
    /** Staging buffers for unregistered pieces come in this size at least. */
    static final int SMALL = 4096;
    private final Connection c;
    // This side's chunks the peer reads: their buffers (a reference each) until its DONE.
    private final ByteBuf[] sent = new ByteBuf[MAX];
    private int sentCount;
    private final Int2IntHashMap keyIds = new Int2IntHashMap(-1);
    /** FileRegions' pieces. */
    private final FilePieces files;
    // The peer's chunks this side reads: the buffer each goes into, where from, and the keys imported.
    private final ByteBuf[] reading = new ByteBuf[MAX];
    private final long[] readAddress = new long[MAX];
    private final int[] readKey = new int[MAX];
    private final int[] readLength = new int[MAX];
    private final boolean[] readPosted = new boolean[MAX];
    private final Int2IntHashMap imported = new Int2IntHashMap(0);
    private final boolean[] importedKnown = new boolean[MAX_KEYS];
    /** Chunk ids whose DONE waits for a credit. */
    private final int[] dones = new int[MAX];
    private int doneCount;

    Chunks(Connection c) {
        this.c = c;
        this.files = new FilePieces(c, this);
    }

    /** True if a chunk the peer announced waits to be read, or is being read. */
    boolean reading() {
        for (ByteBuf b : reading) {
            if (b != null) {
                return true;
            }
        }
        return false;
    }

    /** This side's chunks the peer has not answered yet. */
    int sentOutstanding() {
        return sentCount;
    }

    /**
     * Sends what {@code in} holds while credits and slots last: pieces that fit the peer's receive in
     * SENDs, larger ones as chunks (from the buffer itself when it is the transport's allocator's,
     * else from a registered copy), and {@link FileRegion}s in pieces ({@link FilePieces}).
     *
     * @return {@link FilePieces#WENT} if all went; {@link FilePieces#WAIT} if the rest waits for credits;
     *         {@link FilePieces#STALLED} if a FileRegion gave no bytes
     * @throws IOException if a SEND cannot be posted (the connection broke), or a FileRegion's transfer failed
     */
    int write(ChannelOutboundBuffer in) throws IOException {
        RegmemByteBufAllocator registered = c.handler.transport().allocator();
        for (;;) {
            Object msg = in.current();
            if (msg == null) {
                return FilePieces.WENT;
            }
            if (msg instanceof FileRegion region) {
                int r = files.write(in, region, registered);
                if (r != FilePieces.WENT) {
                    return r;
                }
                continue;
            }
            ByteBuf buf = (ByteBuf) msg;
            int readable = buf.readableBytes();
            if (readable == 0) {
                in.remove();
                continue;
            }
            if (!c.canSend()) {
                return FilePieces.WAIT;
            }
            boolean chunk = readable > c.peerReceiveSize && sentCount < MAX;
            int length = Math.min(readable, chunk ? MAX_BYTES : c.peerReceiveSize);
            boolean own = registered.registered(buf);
            if (chunk && own && keyIds.get(registered.rkey(buf)) < 0 && keyIds.size() >= MAX_KEYS) {
                chunk = false; // (a key the peer would have to import beyond the connection's budget: SENDs)
                length = Math.min(readable, c.peerReceiveSize);
            }
            if (!chunk) {
                try {
                    sendGathered(in, registered);
                } catch (RdmaException e) { // (the QP went: the connection is broken)
                    throw new IOException(c.id + ": a SEND could not be posted: " + e.getMessage(), e);
                }
                continue;
            }
            ByteBuf owner = own ? buf.retain() : registered.directBuffer(length, length);
            try {
                long address = own ? buf.memoryAddress() + buf.readerIndex() : owner.memoryAddress();
                if (!own) {
                    owner.writeBytes(buf, buf.readerIndex(), length);
                }
                if (chunk) {
                    sendChunk(registered, owner, address, length);
                } else {
                    c.send(owner, address, length, registered.lkey(owner), 0);
                }
            } catch (RdmaException e) { // (the QP went: the connection is broken)
                owner.release();
                throw new IOException(c.id + ": a SEND could not be posted: " + e.getMessage(), e);
            } catch (RuntimeException e) {
                owner.release();
                throw e;
            }
            in.removeBytes(length);
        }
    }

    /**
     * Gathers the current message and the ones after it into one SEND of at most the peer's receive
     * size and {@link Connection#MAX_SGE} SGEs, as TCP fills a segment: a registered buffer as an SGE of
     * its own memory (the SEND holds a reference), any other copied into a registered staging buffer.
     * A pipeline's headers, frames and payloads then take one credit, not one each. Stops before a
     * message that goes as a chunk of its own.
     */
    private void sendGathered(ChannelOutboundBuffer in, RegmemByteBufAllocator registered) {
        int room = c.peerReceiveSize;
        ByteBuf staging = null;
        c.sends.begin();
        try {
            for (;;) {
                if (!(in.current() instanceof ByteBuf m) || c.sends.pieces() == c.maxSge) {
                    break; // (the end, or a FileRegion: FilePieces)
                }
                int r = m.readableBytes();
                if (r == 0) {
                    in.remove();
                    continue;
                }
                boolean own = registered.registered(m);
                if (c.sends.pieces() > 0 && r > c.peerReceiveSize && (own || r > SMALL)) {
                    break; // (a large one goes as a chunk or in SENDs of its own)
                }
                int n = Math.min(r, room);
                if (own) {
                    c.sends.piece(m.retain(), m.memoryAddress() + m.readerIndex(), n, registered.lkey(m));
                } else {
                    if (staging == null || staging.writableBytes() < n) {
                        try {
                            staging = registered.directBuffer(Math.max(n, Math.min(room, SMALL)));
                        } catch (RuntimeException outOfMemory) { // the pool is full: send what was gathered
                            if (c.sends.pieces() == 0) {
                                throw outOfMemory;
                            }
                            break;
                        }
                    }
                    int at = staging.writerIndex();
                    staging.writeBytes(m, m.readerIndex(), n);
                    c.sends.piece(staging, staging.memoryAddress() + at, n, registered.lkey(staging));
                }
                in.removeBytes(n);
                room -= n;
                if (room == 0) {
                    break;
                }
            }
            c.post(0);
        } catch (RuntimeException e) {
            c.sends.abandon();
            throw e;
        }
    }

    /** True if one more chunk may be sent now (fewer than {@link #MAX} outstanding). */
    boolean canChunk() {
        return sentCount < MAX;
    }

    /** Sends the descriptor of a chunk of {@code owner}'s memory (whose reference the chunk holds until DONE). */
    void sendChunk(RegmemByteBufAllocator registered, ByteBuf owner, long address, int length) {
        int rkey = registered.rkey(owner);
        int keyId = keyIds.get(rkey);
        byte[] key = null;
        if (keyId < 0) {
            key = registered.exportRemoteKey(owner);
            keyId = keyIds.size();
        }
        int id = 0;
        while (sent[id] != null) {
            id++;
        }
        ByteBuf d = registered.directBuffer(DESCRIPTOR + (key == null ? 0 : key.length));
        try {
            d.writeByte(id).writeByte(key == null ? 0 : WITH_KEY).writeShortLE(keyId).writeIntLE(length).writeLongLE(address)
                    .writeShortLE(key == null ? 0 : key.length);
            if (key != null) {
                d.writeBytes(key);
            }
            c.send(d, d.memoryAddress(), d.readableBytes(), registered.lkey(d), Connection.CHUNK);
        } catch (RuntimeException e) {
            d.release();
            throw e;
        }
        if (key != null) {
            keyIds.put(rkey, keyId);
        }
        sent[id] = owner;
        sentCount++;
        c.handler.chunks(1);
    }

    /** The peer read chunk {@code id}: its memory goes back. A DONE for no chunk of this side's breaks the protocol. */
    void done(int id) {
        if (id >= MAX || sent[id] == null) {
            throw new RdmaException(Errno.EINVAL, c.id + ": the peer acknowledged chunk " + id
                    + ", which this side did not send");
        }
        letGo(id);
    }

    /** This side's chunk {@code id} ends: its memory goes back, and it is no longer under way. */
    private void letGo(int id) {
        sent[id].release();
        sent[id] = null;
        sentCount--;
        c.handler.chunks(-1);
    }

    /** The peer's chunk {@code id} is no longer read: its buffer (null if none), no longer under way. */
    private ByteBuf endRead(int id) {
        ByteBuf b = reading[id];
        if (b != null) {
            reading[id] = null;
            readPosted[id] = false;
            c.handler.chunks(-1);
        }
        return b;
    }

    /**
     * A descriptor arrived in receive {@code i} ({@code buf}, {@code n} bytes): this side allocates the
     * chunk's buffer, reads it (now, or when a slot frees), and the channel keeps its place in the
     * stream, with the receive, which is posted again when the chunk goes up (at once if the input is
     * shut down): so a reader that does not read runs its peer out of credits, chunks or not.
     */
    void announced(int i, ByteBuf buf, int n) {
        boolean kept = false;
        try {
            int id = buf.getUnsignedByte(0);
            int flags = buf.getUnsignedByte(1);
            int keyId = buf.getUnsignedShortLE(2);
            int length = buf.getIntLE(4);
            long address = buf.getLongLE(8);
            int keyLength = buf.getUnsignedShortLE(16);
            if (n < DESCRIPTOR || id >= MAX || reading[id] != null || doneQueued(id) || length <= 0 || length > MAX_BYTES || keyId >= MAX_KEYS
                    || (flags & WITH_KEY) != 0 && (keyLength == 0 || n != DESCRIPTOR + keyLength)
                    || (flags & WITH_KEY) == 0 && !importedKnown[keyId]) {
                throw new RdmaException(Errno.EINVAL, c.id + ": a chunk descriptor that breaks the protocol ("
                        + n + " bytes, chunk " + id + ", key " + keyId + ", " + length + " bytes)");
            }
            if ((flags & WITH_KEY) != 0) {
                MemorySegment key = MemorySegment.ofBuffer(buf.nioBuffer(DESCRIPTOR, keyLength).order(ByteOrder.LITTLE_ENDIAN));
                imported.put(keyId, c.qp.importRemoteKey(key));
                importedKnown[keyId] = true;
            }
            RegmemByteBufAllocator registered = c.handler.transport().allocator();
            reading[id] = registered.directBuffer(length, length);
            c.handler.chunks(1);
            readAddress[id] = address;
            readKey[id] = imported.get(keyId);
            readLength[id] = length;
            readPosted[id] = false;
            kept = c.channel.inbound().chunk(id, i, buf);
        } finally {
            if (!kept) {
                c.recv.post(i, buf.clear()); // (a descriptor that broke the protocol, or an input shut down)
            }
        }
        progress();
    }

    /**
     * Chunk {@code id}'s READ completed (or was flushed): its buffer goes up in its place, and the peer
     * hears DONE. A READ that failed was seen by the connection first, while the chunk was still here:
     * a chunk unread cuts the stream ({@link #reading}).
     */
    void read(int id, boolean ok) {
        ByteBuf b = endRead(id);
        if (b == null) {
            return;
        }
        if (!ok) {
            b.release();
            return;
        }
        dones[doneCount++] = id; // (also when the channel closed while it was read: the peer lets it go all the same)
        if (c.channel == null || !c.channel.inbound().arrived(id, b.writerIndex(readLength[id]))) {
            b.release(); // (closed, or the input was shut down meanwhile)
        }
        progress();
    }

    /**
     * Posts the READs that wait for a slot, and the DONEs that wait for a credit. Once the channel
     * closed, a chunk not yet read is answered unread instead.
     */
    void progress() {
        for (int id = 0; id < MAX; id++) {
            if (reading[id] == null || readPosted[id]) {
                continue;
            }
            if (c.channel == null) {
                endRead(id).release();
                dones[doneCount++] = id;
            } else if (c.sends.hasSlot()) {
                readPosted[id] = true;
                c.sends.postRead(id, reading[id], readAddress[id], readKey[id], readLength[id]);
            }
        }
        while (doneCount > 0 && c.canControl()) {
            c.send(null, 0, 0, 0, Connection.DONE | dones[--doneCount] << 24);
        }
    }

    /**
     * A message came after the channel closed ({@code imm} its immediate data, {@code n} bytes in
     * {@code buf}): a chunk's descriptor is answered at once, unread, so that the peer need not keep its
     * memory until its close gives up waiting. One of an id outstanding already, or not a descriptor
     * at all, is ignored (the connection ends anyway).
     */
    void unread(int imm, ByteBuf buf, int n) {
        if ((imm & Connection.CHUNK) == 0 || n < DESCRIPTOR) {
            return;
        }
        int id = buf.getUnsignedByte(0);
        if (id < MAX && reading[id] == null && !doneQueued(id)) {
            dones[doneCount++] = id;
        }
    }

    /** True if chunk {@code id}'s DONE waits for a credit (the peer cannot have announced that id again yet). */
    private boolean doneQueued(int id) {
        for (int k = 0; k < doneCount; k++) {
            if (dones[k] == id) {
                return true;
            }
        }
        return false;
    }

    /** Gives back every buffer still held (the QP is destroyed: nothing touches them any more). */
    void releaseAll() {
        for (int id = 0; id < MAX; id++) {
            if (sent[id] != null) {
                letGo(id);
            }
            ByteBuf b = endRead(id);
            if (b != null) {
                b.release();
            }
        }
        doneCount = 0;
    }
}
