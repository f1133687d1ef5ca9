package io.regmem.cli;

import static io.regmem.cli.RpcDemo.FLAG_ARGS_INLINE;
import static io.regmem.cli.RpcDemo.FLAG_RESULT_INLINE;
import static io.regmem.cli.RpcDemo.HEADER;

import io.regmem.core.RdmaException;
import io.regmem.core.ScatterList;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.DmaDirection;
import io.regmem.registration.QueuePair;
import io.regmem.registration.WcStatus;
import io.regmem.registration.rpc.Rep;
import io.regmem.registration.rpc.Req;
import io.regmem.registration.rpc.RpcBuffer;
import io.regmem.registration.rpc.RpcTransport;
import io.regmem.registration.rpc.SendLock;
import io.regmem.registration.rw.RwContext;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayDeque;

/**
 * The server of {@code regmem demo}'s RPC workload, on the second soft device: it takes each call
 * from its receive, gets the arguments (inline, or by RDMA READ of the client's read chunk through an
 * {@link RwContext}), computes the result ({@link RpcDemo#transform}), and answers with a reply Send
 * that grants credits, the result inline or written first by RDMA WRITE into the client's write
 * chunk. Its completion handler is the one place it runs: {@link #transport()}'s {@code poll()}.
 */
final class RpcDemoServer implements RpcTransport.Handler {
    /** One call being served: its staging areas and the context that moves a chunk. */
    private static final class Slot {
        final int index;
        final RwContext rw = new RwContext();
        final ScatterList argSg = new ScatterList(1, false, 1);
        final ScatterList resSg = new ScatterList(1, false, 1);
        final MemorySegment argArea;
        final MemorySegment resArea;
        /** The direction its rw context was initialized for, while it is (null otherwise). */
        DmaDirection rwDir;
        /** Parts of the call still outstanding: the reply's Send and, for a write chunk, the WRITE. */
        int pending;
        /** The write chunk's WRITE is posted (a reply that waits for room is sent later without it). */
        boolean writePosted;
        int xid;
        int flags;
        long size;
        long resAddr;
        int resRkey;

        Slot(int index, MemorySegment argArea, MemorySegment resArea) {
            this.index = index;
            this.argArea = argArea;
            this.resArea = resArea;
        }
    }

    private final QueuePair qp;
    private final RpcBuffer buf;
    private final SendLock lock;
    private final int reqs;
    private final Slot[] slots;
    private final ArrayDeque<Slot> freeSlots = new ArrayDeque<>();
    /** Calls computed whose reply waits for a free request or send context. */
    private final ArrayDeque<Slot> waiting = new ArrayDeque<>();
    private final RpcTransport transport;
    private final long slotBytes;

    /** A call the server refuses to serve: the client broke the demo's protocol; the connection ends. */
    static final class ProtocolError extends RuntimeException {
        ProtocolError(String message) {
            super(message);
        }
    }

    /**
     * @param staging   DMA-mapped memory for {@code reqs} calls: two areas of {@code slotBytes} each
     * @param reqs      calls served at once, and the credits each reply grants
     */
    RpcDemoServer(QueuePair qp, CompletionQueue cq, RpcBuffer buf,
                  SendLock lock, MemorySegment staging, int reqs, long slotBytes) {
        this.qp = qp;
        this.buf = buf;
        this.lock = lock;
        this.reqs = reqs;
        this.slotBytes = slotBytes;
        this.slots = new Slot[reqs];
        for (int i = 0; i < reqs; i++) {
            slots[i] = new Slot(i, staging.asSlice(2L * i * slotBytes, slotBytes), staging.asSlice((2L * i + 1) * slotBytes, slotBytes));
            freeSlots.push(slots[i]);
        }
        this.transport = new RpcTransport(qp, cq, buf, lock, this, 16, 4);
        transport.postRecvs(reqs);
    }

    /** The server's end of the connection. */
    RpcTransport transport() {
        return transport;
    }

    /**
     * Checks a call against the demo's protocol before anything is taken or done for it: a whole
     * header, known flags (both inline or neither), a size within the slots' and the inline limit,
     * inline arguments all there, a free slot. Null if it is fine, else what is wrong.
     */
    private String violation(MemorySegment h, long n) {
        if (n < HEADER) {
            return "a call of " + n + " bytes (its header alone is " + HEADER + ")";
        }
        int flags = h.get(ValueLayout.JAVA_INT, RpcDemo.H_FLAGS);
        long size = h.get(ValueLayout.JAVA_LONG, RpcDemo.H_SIZE);
        boolean inline = flags == (FLAG_ARGS_INLINE | FLAG_RESULT_INLINE);
        if (!inline && flags != 0) {
            return "call flags " + flags + " (known: 0 and " + (FLAG_ARGS_INLINE | FLAG_RESULT_INLINE) + ")";
        }
        if (size < 1 || size > slotBytes || (inline && size > RpcDemo.INLINE)) {
            return "a call of " + size + " bytes of arguments (this server takes 1 to " + slotBytes + ", inline up to "
                    + RpcDemo.INLINE + ")";
        }
        if (inline && n < HEADER + size) {
            return "inline arguments of " + size + " bytes in a message of " + n;
        }
        if (freeSlots.isEmpty()) {
            return "more than " + reqs + " calls in flight (the credits this server grants)";
        }
        return null;
    }

    @Override
    public void received(Rep rep, long n) {
        MemorySegment h = rep.buffer().segment();
        String bad = violation(h, n);
        if (bad != null) {
            buf.repPut(rep);
            throw new ProtocolError(bad);
        }
        Slot s = freeSlots.pop();
        s.xid = h.get(ValueLayout.JAVA_INT, RpcDemo.H_XID);
        s.flags = h.get(ValueLayout.JAVA_INT, RpcDemo.H_FLAGS);
        s.size = h.get(ValueLayout.JAVA_LONG, RpcDemo.H_SIZE);
        s.resAddr = h.get(ValueLayout.JAVA_LONG, RpcDemo.H_RESULT_ADDR);
        try {
            if ((s.flags & RpcDemo.FLAG_RESULT_INLINE) == 0) { // a write chunk: its key arrived in the exported form
                s.resRkey = qp.importRemoteKey(h.asSlice(RpcDemo.H_RESULT_RKEY, RpcDemo.KEY_BYTES));
            }
        } catch (RdmaException e) {
            freeSlots.push(s);
            buf.repPut(rep);
            throw new ProtocolError("a call whose write chunk key is not a key: " + e.getMessage());
        }
        if ((s.flags & FLAG_ARGS_INLINE) != 0) {
            MemorySegment.copy(h, HEADER, s.argArea, 0, s.size);
            buf.repPut(rep);
            process(s);
        } else { // a read chunk: RDMA READ the arguments from the client's memory
            long argAddr = h.get(ValueLayout.JAVA_LONG, RpcDemo.H_ARG_ADDR);
            int argRkey;
            try {
                argRkey = qp.importRemoteKey(h.asSlice(RpcDemo.H_ARG_RKEY, RpcDemo.KEY_BYTES));
            } catch (RdmaException e) {
                freeSlots.push(s);
                buf.repPut(rep);
                throw new ProtocolError("a call whose read chunk key is not a key: " + e.getMessage());
            }
            buf.repPut(rep);
            s.argSg.clear().add(s.argArea.address(), s.size);
            try {
                s.rw.init(qp, 1, s.argSg, 1, 0, argAddr, argRkey, DmaDirection.FROM_DEVICE);
            } catch (RdmaException e) {
                freeSlots.push(s);
                throw new ProtocolError("a read chunk the server cannot read: " + e.getMessage());
            }
            s.rwDir = DmaDirection.FROM_DEVICE;
            s.rw.post(qp, 1, RpcTransport.USER_TAG | (long) s.index << 1);
        }
        transport.postRecvs(reqs);
    }

    @Override
    public void rwCompleted(long id, WcStatus status) {
        Slot s = slots[(int) (id >>> 1)];
        if ((id & 1) == 0) {
            s.rw.destroy(qp, 1, s.argSg, 1, DmaDirection.FROM_DEVICE);
            s.rwDir = null;
            if (status == WcStatus.SUCCESS) {
                process(s);
            } else {
                freeSlots.push(s);
            }
        } else { // the write chunk landed
            s.rw.destroy(qp, 1, s.resSg, 1, DmaDirection.TO_DEVICE);
            s.rwDir = null;
            release(s);
        }
    }

    /** The arguments are in: compute, then reply. */
    private void process(Slot s) {
        RpcPayloads.transform(s.argArea, s.resArea, s.size);
        s.writePosted = false;
        s.pending = (s.flags & FLAG_RESULT_INLINE) != 0 ? 1 : 2; // the reply's Send, and a write chunk's WRITE
        reply(s);
    }

    /**
     * Replies to the call in {@code s}: inline, or by RDMA WRITE of the result (posted once) and then
     * the reply. When no request or send context is free (the replies sent before have not completed
     * yet), the call waits and is answered from {@link #completed}, which frees them.
     */
    private void reply(Slot s) {
        Req reply = buf.get();
        if (reply == null) {
            waiting.add(s);
            return;
        }
        MemorySegment h = reply.header().segment();
        h.set(ValueLayout.JAVA_INT, RpcDemo.H_XID, s.xid);
        h.set(ValueLayout.JAVA_INT, RpcDemo.H_CREDITS, reqs);
        h.set(ValueLayout.JAVA_LONG, RpcDemo.H_RESULT_SIZE, s.size);
        boolean inline = (s.flags & FLAG_RESULT_INLINE) != 0;
        boolean sent = false;
        lock.lock();
        try {
            if (inline) {
                MemorySegment.copy(s.resArea, 0, reply.send().segment(), 0, s.size);
                sent = transport.send(reply, HEADER, s.size, false);
            } else { // a write chunk: RDMA WRITE into the client's reply buffer, then the reply
                if (!s.writePosted) {
                    s.resSg.clear().add(s.resArea.address(), s.size);
                    s.rw.init(qp, 1, s.resSg, 1, 0, s.resAddr, s.resRkey, DmaDirection.TO_DEVICE);
                    s.rwDir = DmaDirection.TO_DEVICE;
                    s.rw.post(qp, 1, RpcTransport.USER_TAG | ((long) s.index << 1) | 1);
                    s.writePosted = true;
                }
                sent = transport.send(reply, HEADER, 0, false);
            }
        } finally {
            lock.unlock();
            if (!sent) {
                buf.put(reply);
            }
        }
        if (sent) {
            replied++;
            release(s);
        } else {
            waiting.add(s); // the ring is full: answered once a Send completion made room
        }
    }

    /** Calls answered so far (the serving thread's count). */
    long replied() {
        return replied;
    }

    private long replied;

    /** One of the slot's outstanding parts is done; with the last, the slot serves calls again. */
    private void release(Slot s) {
        if (--s.pending == 0) {
            freeSlots.push(s);
        }
    }

    @Override
    public void completed(Req req) {
        buf.put(req);
        Slot s = waiting.poll(); // a reply's request (and its send context) came back: a waiting call can be answered
        if (s != null) {
            reply(s);
        }
    }

    /**
     * After the connection was flushed: destroys the rw contexts of calls that never finished (their
     * completions were flushed before a handler could, or their post failed), so that nothing holds a
     * DMA mapping or a pool MR of the QP.
     */
    void releaseContexts() {
        for (Slot s : slots) {
            if (s.rwDir != null && s.rw.isInitialized()) {
                s.rw.destroy(qp, 1, s.rwDir == DmaDirection.FROM_DEVICE ? s.argSg : s.resSg, 1, s.rwDir);
            }
            s.rwDir = null;
        }
    }
}
