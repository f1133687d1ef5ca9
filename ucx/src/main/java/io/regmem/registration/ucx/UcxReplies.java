package io.regmem.registration.ucx;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.regmem.registration.WcStatus;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * The answers a QP's receiving side sends (acknowledgements, READ and atomic answers): a ring of
 * {@value #REPLIES} reply slots, each with its header (which must live until its send completed),
 * its UCX request while the send is under way, and the bytes a READ answer is sent from: the slot's
 * own buffer up to {@link #SLOT_BUFFER_MAX} (kept and reused, so READs allocate nothing in steady
 * state), or a bounce buffer of the QP's staging for a larger answer or one by rendezvous (given
 * back when the slot's send is done). Used under the QP's execution lock; every call that touches
 * UCX takes the worker lock unless its caller holds it, and none waits for the peer except
 * {@link #claim} when the ring comes round to a reply still being sent.
 */
final class UcxReplies {
    static final int REPLIES = 64;
    /**
     * The largest READ answer a slot's own buffer takes (the slots keep theirs: at most 64 x this per
     * QP); a larger one is sent from a bounce buffer of the QP's staging, given back after.
     */
    static final long SLOT_BUFFER_MAX = 64 << 10;

    private final UcxQp qp;
    private final Arena arena;
    /** Each slot's header (slices made once, so the data path allocates nothing). */
    private final MemorySegment[] headers = new MemorySegment[REPLIES];
    /** The UCX request of each slot's send still under way, or 0. */
    private final long[] requests = new long[REPLIES];
    /** Each slot's own buffer for READ bytes, grown (from the QP's arena) up to {@link #SLOT_BUFFER_MAX}. */
    private final MemorySegment[] buffers = new MemorySegment[REPLIES];
    /** Each slot's bounce buffer (from the QP's staging), or null; given back once the slot's send completed. */
    private final MemorySegment[] stages = new MemorySegment[REPLIES];
    /** The bytes of each slot's last reply (a READ answer's; 0 for an acknowledgement). */
    private final long[] bytes = new long[REPLIES];
    /** Send parameters of an answer by rendezvous. */
    private final MemorySegment rndvSendParams;
    private long claimed;
    /**
     * The bytes of the slots whose request was last seen under way: at least the bytes of the READ
     * answers still being sent, so {@link #beyondWindow} polls the slots only when this says it may be.
     */
    private long heldBytes;
    /** Answers (acknowledgements, READ responses) handed to UCX, and those it refused or had no endpoint for (diagnostics). */
    long answersOut;
    long answersNotSent;

    UcxReplies(UcxQp qp, Arena arena) {
        this.qp = qp;
        this.arena = arena;
        MemorySegment all = arena.allocate(UcxAm.HEADER * REPLIES, 8);
        for (int i = 0; i < REPLIES; i++) {
            headers[i] = all.asSlice(i * UcxAm.HEADER, UcxAm.HEADER);
        }
        this.rndvSendParams = UcpRequestParam.amSend(arena, UcpLayout.AM_SEND_FLAG_RNDV);
    }

    /** True if the next slot's previous reply has been sent (never progresses: never waits for a peer). */
    boolean slotFree() {
        boolean took = qp.device.lockWorkerUnlessHeld();
        try {
            return nextSlotFree();
        } finally {
            if (took) {
                qp.device.workerLock.unlock();
            }
        }
    }

    /** True if the next slot's previous reply has been sent (worker lock held; never progresses). */
    boolean nextSlotFree() {
        int slot = (int) (claimed % REPLIES);
        long r = requests[slot];
        if (r != 0 && qp.channel.worker.poll(r) == UcpLayout.UCS_INPROGRESS) {
            return false;
        }
        sent(slot);
        freeStage(slot);
        return true;
    }

    /** Marks slot {@code slot}'s send done (its request released by the poll that saw it done, or left to the worker). */
    private void sent(int slot) {
        if (requests[slot] != 0) {
            requests[slot] = 0;
            heldBytes -= bytes[slot];
        }
    }

    /** Gives back slot {@code slot}'s bounce buffer, if it has one (its send is done). */
    private void freeStage(int slot) {
        MemorySegment b = stages[slot];
        if (b != null) {
            stages[slot] = null;
            qp.staging.give(b);
        }
    }

    /** The next slot, its previous reply sent (so its header and buffer may be reused). */
    int claim() {
        int slot = (int) (claimed++ % REPLIES);
        boolean took = qp.device.lockWorkerUnlessHeld();
        try {
            finish(slot);
        } finally {
            if (took) {
                qp.device.workerLock.unlock();
            }
        }
        return slot;
    }

    /** Waits until the reply in {@code slot} is sent (worker lock held). */
    private void finish(int slot) {
        long previous = requests[slot];
        while (previous != 0 && qp.channel.worker.poll(previous) == UcpLayout.UCS_INPROGRESS) {
            qp.channel.worker.progress(); // the ring came round to a reply still being sent: let it go out
        }
        sent(slot);
        freeStage(slot);
    }

    /**
     * Where slot {@code slot}'s READ answer of {@code length} bytes goes before it is sent: the slot's
     * own buffer (grown by doubling), or a bounce buffer for one by rendezvous or over
     * {@link #SLOT_BUFFER_MAX}.
     */
    MemorySegment buffer(int slot, long length) {
        if (qp.rendezvous(length) || length > SLOT_BUFFER_MAX) {
            MemorySegment b = qp.staging.take(length); // (given back when the slot is reused)
            stages[slot] = b;
            return b;
        }
        MemorySegment b = buffers[slot];
        if (b == null || b.byteSize() < length) {
            long size = Math.max(4096, b == null ? 0 : b.byteSize());
            while (size < length) {
                size *= 2;
            }
            b = arena.allocate(size, 64);
            buffers[slot] = b;
        }
        return b;
    }

    /**
     * True if an answer of {@code length} more bytes would take the READ answers under way beyond a
     * connection's window (a lone one may be larger): what a peer keeping to its window never asks.
     */
    boolean beyondWindow(long length) {
        if (heldBytes + length <= UcxAm.WINDOW_BYTES) {
            return false; // (the common case: no slot polled)
        }
        long under = bytesUnderWay();
        return under > 0 && under + length > UcxAm.WINDOW_BYTES;
    }

    /**
     * Bytes of READ answers whose sends are still under way (polls each slot's request; never
     * progresses). A request found done is released by that poll: its slot is marked free here, as
     * {@link #nextSlotFree} does, so nothing polls it again.
     */
    long bytesUnderWay() {
        boolean took = qp.device.lockWorkerUnlessHeld();
        try {
            long sum = 0;
            for (int i = 0; i < REPLIES; i++) {
                long r = requests[i];
                if (r == 0) {
                    continue;
                }
                if (qp.channel.worker.poll(r) == UcpLayout.UCS_INPROGRESS) {
                    sum += bytes[i];
                } else {
                    sent(i);
                    freeStage(i);
                }
            }
            return sum;
        } finally {
            if (took) {
                qp.device.workerLock.unlock();
            }
        }
    }

    /**
     * Answers the sender from slot {@code slot}: its status (its request completes with it) and, for
     * a READ, the first {@code n} bytes of the slot's {@link #buffer}.
     */
    void send(int slot, long seq, WcStatus status, int type, long n) {
        boolean took = qp.device.lockWorkerUnlessHeld();
        try {
            long ep = qp.endpoint();
            if (ep == 0) {
                answersNotSent++;
                return;
            }
            MemorySegment h = headers[slot];
            h.fill((byte) 0);
            h.set(JAVA_INT, UcxAm.H_TYPE, type);
            h.set(JAVA_INT, UcxAm.H_DST, qp.peerNumber());
            h.set(JAVA_INT, UcxAm.H_SRC, qp.number);
            h.set(JAVA_LONG, UcxAm.H_SEQ, seq);
            h.set(JAVA_INT, UcxAm.H_STATUS, status.ordinal());
            h.set(JAVA_LONG, UcxAm.H_TOKEN, qp.peerToken());
            MemorySegment stage = stages[slot];
            bytes[slot] = n;
            long r = stage != null && n > 0 // by rendezvous, or (TCP alone) a large eager answer
                    ? qp.device.ucp.amSend(ep, UcxAm.ID, h.address(), UcxAm.HEADER, stage.address(), n,
                            (qp.rendezvous(n) ? rndvSendParams : qp.amParams).address(), qp.toSelf())
                    : qp.device.ucp.amSend(ep, UcxAm.ID, h.address(), UcxAm.HEADER,
                            n == 0 ? 0 : buffers[slot].address(), n, qp.amParams.address(), qp.toSelf());
            if (r != 0 && !Ucp.isError(r)) {
                requests[slot] = r;
                heldBytes += n;
            }
            if (Ucp.isError(r)) {
                answersNotSent++;
            } else {
                answersOut++;
            }
        } finally {
            if (took) {
                qp.device.workerLock.unlock();
            }
        }
    }

    /**
     * Ends every reply still being sent (execution lock held): cancelled, and left to the worker if
     * the peer does not take it within 2 s (its header and buffer then stay until the device closes).
     */
    void dropAll() {
        qp.device.lockWorker();
        try {
            long deadline = System.nanoTime() + 2_000_000_000L;
            for (int i = 0; i < REPLIES; i++) {
                long r = requests[i];
                sent(i);
                boolean done = true;
                if (r != 0 && qp.channel.worker.poll(r) == UcpLayout.UCS_INPROGRESS) {
                    qp.channel.worker.cancel(r);
                    while (qp.channel.worker.poll(r) == UcpLayout.UCS_INPROGRESS) {
                        if (System.nanoTime() > deadline) { // a peer that does not take it (stopped): left to the worker
                            qp.device.abandon(r);
                            qp.leftToWorker = true; // its header and buffer stay until the device closes
                            done = false;
                            break;
                        }
                        qp.channel.worker.progress();
                    }
                }
                if (done) {
                    freeStage(i);
                } else {
                    stages[i] = null;
                }
            }
        } finally {
            qp.device.workerLock.unlock();
        }
    }
}
