package io.regmem.netty;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelOutboundBuffer;
import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.CmId;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkCompletion;
import java.io.IOException;

/**
 * One channel's RC connection on its event loop's CQ: the receives it keeps posted (registered
 * buffers of the transport's pool, the peer's credits), the SENDs it has outstanding (each holds a
 * reference on the buffer it reads), and the credits of each direction, as RPC-over-RDMA's: a side
 * sends a piece of the byte stream only while the peer has a receive posted for it, keeping the last
 * credit for a message that grants credits back, so that neither side can ever wait on the other for
 * good. Every SEND carries, in its immediate data, the credits its sender granted since its last one
 * (the receives it posted again; never more than the receives it offered, {@link Offer}) and the end
 * of its stream ({@link #FIN}); a SEND of no bytes carries only those.
 *
 * <p>It outlives its channel: a channel closed with SENDs or chunks outstanding lets them finish (at
 * most SO_LINGER, {@link #LINGER_NANOS} by default), answering the peer's chunks unread meanwhile, then
 * disconnects, drains the QP and keeps its slot until every completion of it was taken, then destroys
 * the QP and the ID. Event loop thread only.
 */
final class Connection {
    /** Immediate data: the credits granted (low 16 bits) and the end of the sender's stream. */
    static final int CREDITS = 0xFFFF;
    static final int FIN = 1 << 16;
    /** Immediate data: the message is a chunk's descriptor ({@link Chunks}). */
    static final int CHUNK = 1 << 17;
    /** Immediate data: the message says chunk {@code imm >>> 24} was read. */
    static final int DONE = 1 << 18;
    /** The private data of connect and accept ({@link Offer}): its magic "RGNT". */
    static final int MAGIC = Offer.MAGIC;
    /** How long a closed channel's connection waits for its SENDs before it disconnects anyway. */
    static final long LINGER_NANOS = 2_000_000_000L;
    /** The most SGEs one SEND gathers. */
    static final int MAX_SGE = 16;
    enum State { NEW, ACTIVE, CLOSING, DRAINED }

    final RegmemIoHandler handler;
    final CmId id;
    final QueuePair qp;
    final int slot;
    final int receives;
    final int receiveSize;
    private final int entries;
    /** The channel that reads and writes through this connection; null once it let go. */
    RegmemSocketChannel channel;
    State state = State.NEW;
    /** Set by the handler while this connection is in the batch of completions being handled. */
    boolean touched;
    /** The receives it keeps posted. */
    final Receives recv;
    /** The SENDs and READs it has outstanding, and the SEND being gathered. */
    final Sends sends;
    /** Receives the peer has posted for this side's SENDs, as far as this side knows. */
    private int sendCredits;
    /** The receives the peer offered (0 until its offer was taken): it never grants more credits. */
    private int peerReceives;
    /** Receives this side posted again and has not told the peer of yet. */
    private int owed;
    /** SENDs the peer may still make into this side's receives, as far as this side granted them. */
    private int peerCredits;
    /** The peer's receive size: the largest piece of the stream one SEND carries (event loop only). */
    int peerReceiveSize;
    private boolean finSent;
    private boolean destroyed;
    /** When a closing connection disconnects at the latest ({@link #close}), by {@link System#nanoTime()}. */
    private long closeBy;
    /** SGEs a SEND of this connection gathers at most (the device's limit, at most {@link #MAX_SGE}). */
    final int maxSge;
    final Chunks chunks = new Chunks(this);

    /**
     * Creates the QP on {@code id} (the handler's CQ, the transport's PD) and posts every receive.
     *
     * @throws RdmaException as {@code createQp} and the pool; {@link Errno#ENOSPC} if the event loop's CQ is full
     */
    Connection(RegmemIoHandler handler, CmId id, int receives, int sends) {
        this.handler = handler;
        this.id = id;
        this.receives = receives;
        this.receiveSize = handler.transport().receiveSize;
        this.entries = receives + sends;
        this.recv = new Receives(this, receives);
        this.sends = new Sends(this, sends);
        this.maxSge = Math.max(1, Math.min(MAX_SGE, handler.transport().device().attributes().maxSendSge()));
        this.slot = handler.attach(this, entries);
        QueuePair made = null;
        try {
            made = id.createQp(handler.transport().pd(), QpInitAttributes.of(handler.cq()).maxRecvWr(receives).maxSendWr(sends)
                    .maxSendSge(maxSge));
            this.qp = made;
            recv.postAll();
        } catch (RuntimeException e) {
            if (made != null) {
                made.drain();
            }
            handler.detach(this, slot, entries);
            releaseAll();
            if (made != null) {
                id.destroyQp();
            }
            throw e;
        }
        this.owed = 0;
        this.peerCredits = receives;
    }

    /** The private data that tells the peer this side's receives ({@link Offer}). */
    byte[] offer() {
        return new Offer(receives, receiveSize).encode();
    }

    /**
     * Takes the peer's offer (its private data); the connection is then active.
     *
     * @throws RdmaException {@link Errno#EINVAL} if it is not a regmem Netty transport's offer, or the
     *                       peer granted credits before it (for SENDs this side cannot have made)
     */
    void established(byte[] peer) {
        Offer o = Offer.parse(id, peer);
        if (sendCredits > 0) { // (it grants only receives it posted again after this side's SENDs: none yet)
            throw new RdmaException(Errno.EINVAL, id + ": the peer granted " + sendCredits + " credits before the connection was up");
        }
        sendCredits = o.receives();
        peerReceives = o.receives();
        peerReceiveSize = o.receiveSize();
        if (state == State.NEW) { // (a connection that broke meanwhile stays drained)
            state = State.ACTIVE;
        }
    }

    /** True if a piece of the stream may be sent now (a SEND slot, and a credit besides the one kept for grants). */
    boolean canSend() {
        return state == State.ACTIVE && sends.hasSlot() && sendCredits >= 2;
    }

    /** True if a message that only grants, ends the stream or acknowledges may be sent now (a slot, a credit). */
    boolean canControl() {
        return (state == State.ACTIVE || state == State.CLOSING) && sends.hasSlot() && sendCredits >= 1;
    }

    /**
     * Sends {@code length} bytes at {@code address} ({@code lkey}), out of {@code owner} (null: none),
     * whose reference this SEND now holds until it completes, with {@code flags} in its immediate
     * data beside the credits owed, which it grants.
     */
    void send(ByteBuf owner, long address, int length, int lkey, int flags) {
        sends.begin();
        if (length > 0) {
            sends.piece(owner, address, length, lkey);
        }
        post(flags);
    }

    /**
     * Posts the SEND gathered ({@link Sends#begin}), with {@code flags} and the credits owed in its
     * immediate data. If the post fails, the references it held are given back before this throws.
     */
    void post(int flags) {
        int imm = Math.min(owed, CREDITS);
        sends.post(imm | flags);
        sendCredits--;
        owed -= imm;
        peerCredits += imm;
    }

    /**
     * Sends what {@code in} holds while credits and SEND slots last ({@link Chunks#write}): {@link
     * FilePieces#WENT}, {@link FilePieces#WAIT} (for credits) or {@link FilePieces#STALLED}.
     *
     * @throws IOException if a SEND cannot be posted (the connection broke), or a FileRegion's transfer failed
     */
    int write(ChannelOutboundBuffer in) throws IOException {
        return chunks.write(in);
    }

    /** Sends the end of this side's stream (once), if a credit and a slot allow it now; true once it was sent. */
    boolean sendFin() {
        if (finSent) {
            return true;
        }
        if (!canControl()) {
            return false;
        }
        send(null, 0, 0, 0, FIN);
        finSent = true;
        return true;
    }

    /** A receive was posted again: once the connection is up, a credit owed to the peer. */
    void reposted() {
        if (state != State.NEW) {
            owed++;
        }
    }

    /** A completion of this connection's (from the handler's poll). */
    void completed(WorkCompletion wc) {
        long id = wc.wrId();
        boolean ok = wc.status() == WcStatus.SUCCESS;
        if ((id & Receives.RECV) != 0) {
            int i = (int) (id & (Receives.RECV - 1));
            ByteBuf b = recv.take(i);
            if (!ok || state == State.DRAINED) {
                b.release();
                if (!ok) {
                    broken(wc.status());
                }
            } else {
                int imm = wc.withImm() ? wc.immData() : 0;
                sendCredits += imm & CREDITS;
                peerCredits--;
                boolean handed = false;
                try {
                    if (peerReceives > 0 && sendCredits > peerReceives) {
                        throw new RdmaException(Errno.EINVAL, id + ": the peer granted more credits than its " + peerReceives + " receives");
                    }
                    if ((imm & DONE) != 0) {
                        chunks.done(imm >>> 24);
                    }
                    handed = true;
                    if (channel == null) { // closing: nothing goes up any more, but the receive goes back (the
                        chunks.unread(imm, b, (int) wc.byteLen()); // peer's DONE and FIN need credits) and a chunk is answered unread
                        recv.post(i, b.clear());
                    } else if ((imm & CHUNK) != 0) {
                        chunks.announced(i, b, (int) wc.byteLen());
                    } else {
                        channel.received(i, b, (int) wc.byteLen(), (imm & FIN) != 0);
                    }
                } catch (RdmaException e) { // the peer broke the protocol: the connection ends
                    if (!handed) {
                        b.release(); // (its receive is not posted again: the connection ends)
                    }
                    violated(e);
                }
            }
        } else {
            sends.completed();
            if (!ok) {
                broken(wc.status()); // (before a failed READ lets its chunk go: a chunk unread cuts the stream)
            }
            if ((id & Sends.READ) != 0) {
                chunks.read((int) (id & 0xFF), ok);
            }
        }
        finishIfDone();
    }

    /** After a batch of completions: the channel's reads end, writes go on, credits go back, a close goes on. */
    void batchDone() {
        if (recv.hungry() && state == State.ACTIVE) {
            recv.refill();
        }
        chunks.progress();
        recv.postBeforeWrites(peerCredits);
        if (channel != null && state == State.ACTIVE) {
            channel.batchDone();
        }
        grant(); // (which posts the receives kept back first)
        if (state == State.CLOSING) {
            sendFin();
            if (sends.outstanding == 0 && chunks.sentOutstanding() == 0 || System.nanoTime() - closeBy >= 0) {
                disconnect();
            }
        }
        finishIfDone();
    }

    /** True if two credits or more are owed and the peer has at most one left (its next SEND may be its last). */
    boolean peerShort() {
        return owed + recv.laters() >= 2 && peerCredits <= 1; // (with the receives kept back to post: Receives.later)
    }

    /** Sends a SEND of no bytes that grants what is owed, when the peer runs short (or half of them are owed). */
    void grant() {
        recv.postLater(); // (a copied piece's receive, kept back while the batch's writes went: Receives.later)
        if ((state == State.ACTIVE || state == State.CLOSING) && owed > 0 && (owed >= Math.max(1, receives / 2) || peerCredits <= 1)
                && sendCredits >= 1 && sends.hasSlot()) {
            send(null, 0, 0, 0, 0);
        }
    }

    /** The peer sent what the protocol does not allow: the channel hears it, and the connection ends. */
    private void violated(RdmaException e) {
        RegmemSocketChannel ch = channel;
        disconnect();
        if (ch != null) {
            ch.failed(new IOException(ch + ": " + e.getMessage(), e), true);
        }
    }

    /**
     * Handling one of its completions threw ({@code t}: the application's, such as its
     * {@code RecvByteBufAllocator}'s, or regmem's): the channel hears it and closes, and the connection
     * ends, as epoll's channel does on a read that throws.
     */
    void failed(Throwable t) {
        RegmemSocketChannel ch = channel;
        disconnect();
        if (ch != null) {
            ch.failed(t, false);
        }
        finishIfDone();
    }

    /** A completion failed: the connection is broken (the peer went, or it was drained); a chunk still unread cuts the stream. */
    private void broken(WcStatus status) {
        if (state == State.ACTIVE || state == State.NEW) {
            RegmemSocketChannel ch = channel;
            if (chunks.reading()) {
                violated(new RdmaException(Errno.EIO, id + ": a chunk of the stream was not read (" + status + "): the stream cannot go on"));
                return;
            }
            disconnect();
            if (ch != null) {
                ch.connectionBroken(status);
            }
        } else if (state == State.CLOSING) {
            disconnect();
        }
    }

    /**
     * The channel closed: the connection sends its end of stream, lets its SENDs and chunks finish
     * (for at most {@code lingerNanos}: 0 disconnects at once, dropping them) and then disconnects. It
     * answers the peer's chunks unread meanwhile, and gives its receives back, so that the peer can
     * answer its own. A connection never established disconnects at once.
     */
    void close(long lingerNanos) {
        channel = null;
        if (state == State.ACTIVE && lingerNanos > 0) {
            state = State.CLOSING;
            closeBy = System.nanoTime() + lingerNanos;
            sendFin();
            chunks.progress(); // (the peer's chunks it will not read are answered now)
            if (sends.outstanding == 0 && chunks.sentOutstanding() == 0) {
                disconnect();
            }
        } else if (state == State.ACTIVE || state == State.NEW) {
            disconnect();
        }
        finishIfDone();
    }

    /** Whether the close still waits for SENDs (the handler then looks again at the next batch or timer). */
    boolean lingering() {
        return state == State.CLOSING;
    }

    /** Disconnects (the peer sees it) and drains: every posted request completes on the CQ, flushed. */
    void disconnect() {
        if (state == State.DRAINED) {
            return;
        }
        state = State.DRAINED;
        channel = null;
        try {
            if (id.connState() == CmId.ConnState.CONNECTED) {
                id.disconnect();
            }
        } catch (RuntimeException e) { // (the ID went meanwhile: the drain below still flushes)
            // nothing to tell
        }
        try {
            qp.drain();
        } catch (RuntimeException e) {
            // destroyed already
        }
    }

    /** The event loop ends: disconnect now, whatever is outstanding. */
    void abort() {
        disconnect();
        finishIfDone(); // (one with nothing outstanding sees no completion that would finish it)
    }

    /** Destroys the QP and the ID once nothing of the connection is outstanding; frees the slot. */
    private void finishIfDone() {
        if (state != State.DRAINED || recv.outstanding > 0 || sends.outstanding > 0) {
            return;
        }
        destroyNow();
    }

    /** Destroys the QP (drained first) and the ID, gives back every buffer still held, frees the slot. */
    void destroyNow() {
        if (state != State.DRAINED) {
            disconnect();
        }
        if (destroyed) {
            return;
        }
        destroyed = true;
        try {
            id.destroyQp(); // (first: nothing of the QP touches the buffers below once it is gone)
        } catch (RuntimeException e) {
            // (rw contexts, none here)
        }
        releaseAll();
        try {
            id.close();
        } catch (RuntimeException e) {
            // closed by its listener's close
        }
        handler.detach(this, slot, entries);
    }

    private void releaseAll() {
        recv.releaseAll();
        sends.releaseAll();
        chunks.releaseAll();
    }

    @Override
    public String toString() {
        return "Connection[" + id + ", " + state + ", credits " + sendCredits + ", owed " + owed + ", sends " + sends.outstanding
                + ", receives " + recv.outstanding + "]";
    }
}
