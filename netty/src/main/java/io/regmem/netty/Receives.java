package io.regmem.netty;

import io.netty.buffer.ByteBuf;
import io.regmem.registration.WorkRequest;

/**
 * A connection's posted receives: the registered buffer each holds (the connection's reference until
 * its completion hands it on), and those waiting for a buffer because the pool was out of memory when
 * their last one went up the pipeline (posted again by the next batch of completions). A receive
 * posted again after the connection is up is a credit owed to the peer. Event loop only.
 */
final class Receives {
    /** A receive's work-request id has this bit; its low bits are its index. */
    static final long RECV = 1L << 31;
    private final Connection c;
    private final ByteBuf[] bufs;
    private final boolean[] hungry;
    private int hungryCount;
    /** Receives posted and not yet completed. */
    int outstanding;
    private final WorkRequest wr = new WorkRequest(1);
    /** Receives whose piece was copied out, to be posted again after the batch's writes went ({@link #later}). */
    private final int[] laterIdx;
    private final ByteBuf[] laterBuf;
    private int laters;

    Receives(Connection c, int receives) {
        this.c = c;
        this.bufs = new ByteBuf[receives];
        this.hungry = new boolean[receives];
        this.laterIdx = new int[receives];
        this.laterBuf = new ByteBuf[receives];
    }

    /**
     * Keeps receive {@code i}, whose piece was copied out of {@code buf}, to be posted again by
     * {@link #postLater}: after the writes the batch's reads made were flushed, so that a reply goes
     * before the receive's post (the credit it gives the peer goes back with the next SEND instead).
     */
    void later(int i, ByteBuf buf) {
        laterIdx[laters] = i;
        laterBuf[laters++] = buf;
    }

    /**
     * Posts the receives kept back now, before the batch's writes, unless one alone is and the peer holds
     * {@code peerCredits} of 3 or more: replies then carry their credits (a batch of many pieces, a peer short of credits).
     */
    void postBeforeWrites(int peerCredits) {
        if (laters > 1 || laters == 1 && peerCredits < 3) {
            postLater();
        }
    }

    /** Receives kept back by {@link #later}, not yet posted. */
    int laters() {
        return laters;
    }

    /** Posts the receives kept back by {@link #later}. */
    void postLater() {
        for (int k = 0; k < laters; k++) {
            ByteBuf b = laterBuf[k];
            laterBuf[k] = null;
            post(laterIdx[k], b);
        }
        laters = 0;
    }

    /** Posts every receive into a new buffer of the pool; throws (what was posted stays, for the drain) if one cannot be. */
    void postAll() {
        for (int i = 0; i < bufs.length; i++) {
            ByteBuf b = c.handler.transport().allocator().directBuffer(c.receiveSize, c.receiveSize);
            try {
                postOrThrow(i, b);
            } catch (RuntimeException e) {
                b.release();
                throw e;
            }
        }
    }

    /**
     * Posts receive {@code i} into {@code buf}, whose reference is the connection's from now on (until
     * it completes). A QP that takes no more receives (it errs: its flush is on the way) gives the
     * buffer back instead.
     */
    void post(int i, ByteBuf buf) {
        try {
            postOrThrow(i, buf);
        } catch (RuntimeException e) {
            buf.release();
        }
    }

    /**
     * Posts receive {@code i} into a new buffer of the pool (its last one went up the pipeline); a
     * pool out of memory leaves it to the next batch ({@link #refill}).
     */
    void postFresh(int i) {
        ByteBuf b;
        try {
            b = c.handler.transport().allocator().directBuffer(c.receiveSize, c.receiveSize);
        } catch (RuntimeException e) {
            hungry[i] = true;
            hungryCount++;
            return;
        }
        post(i, b);
    }

    /** Posts the receives that waited for a buffer, while the pool gives them. */
    void refill() {
        for (int i = 0; i < hungry.length && hungryCount > 0; i++) {
            if (hungry[i]) {
                hungry[i] = false;
                hungryCount--;
                postFresh(i);
                if (hungry[i]) {
                    return;
                }
            }
        }
    }

    boolean hungry() {
        return hungryCount > 0;
    }

    private void postOrThrow(int i, ByteBuf buf) {
        wr.reset().wrId(((long) c.slot << 32) | RECV | i).addSge(buf.memoryAddress(), c.receiveSize,
                c.handler.transport().allocator().lkey(buf));
        c.qp.postRecv(wr);
        bufs[i] = buf;
        outstanding++;
        c.reposted();
    }

    /** Receive {@code i} completed: its buffer, now the caller's. */
    ByteBuf take(int i) {
        ByteBuf b = bufs[i];
        bufs[i] = null;
        outstanding--;
        return b;
    }

    /** Gives back every buffer still held (the QP is destroyed, or was never made). */
    void releaseAll() {
        for (int k = 0; k < laters; k++) {
            laterBuf[k].release();
            laterBuf[k] = null;
        }
        laters = 0;
        for (int i = 0; i < bufs.length; i++) {
            if (bufs[i] != null) {
                bufs[i].release();
                bufs[i] = null;
            }
        }
        outstanding = 0;
    }
}
