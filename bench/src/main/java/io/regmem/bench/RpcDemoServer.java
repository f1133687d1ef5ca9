package io.regmem.bench;

import static io.regmem.bench.RpcDemo.FLAG_ARGS_INLINE;
import static io.regmem.bench.RpcDemo.FLAG_RESULT_INLINE;
import static io.regmem.bench.RpcDemo.HEADER;

import io.regmem.core.ScatterList;
import io.regmem.registration.DmaDirection;
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

    private final io.regmem.registration.QueuePair qp;
    private final RpcBuffer buf;
    private final SendLock lock;
    private final int reqs;
    private final Slot[] slots;
    private final ArrayDeque<Slot> freeSlots = new ArrayDeque<>();
    private final RpcTransport transport;

    /**
     * @param staging   DMA-mapped memory for {@code reqs} calls: two areas of {@code slotBytes} each
     * @param reqs      calls served at once, and the credits each reply grants
     */
    RpcDemoServer(io.regmem.registration.QueuePair qp, io.regmem.registration.CompletionQueue cq, RpcBuffer buf,
                  SendLock lock, MemorySegment staging, int reqs, long slotBytes) {
        this.qp = qp;
        this.buf = buf;
        this.lock = lock;
        this.reqs = reqs;
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

    @Override
    public void received(Rep rep, long n) {
        MemorySegment h = rep.buffer().segment();
        Slot s = freeSlots.pop();
        s.xid = h.get(ValueLayout.JAVA_INT, RpcDemo.H_XID);
        s.flags = h.get(ValueLayout.JAVA_INT, RpcDemo.H_FLAGS);
        s.size = h.get(ValueLayout.JAVA_LONG, RpcDemo.H_SIZE);
        s.resAddr = h.get(ValueLayout.JAVA_LONG, RpcDemo.H_RESULT_ADDR);
        if ((s.flags & RpcDemo.FLAG_RESULT_INLINE) == 0) { // a write chunk: its key arrived in the exported form
            s.resRkey = qp.importRemoteKey(h.asSlice(RpcDemo.H_RESULT_RKEY, RpcDemo.KEY_BYTES));
        }
        if ((s.flags & FLAG_ARGS_INLINE) != 0) {
            MemorySegment.copy(h, HEADER, s.argArea, 0, s.size);
            buf.repPut(rep);
            process(s);
        } else { // a read chunk: RDMA READ the arguments from the client's memory
            long argAddr = h.get(ValueLayout.JAVA_LONG, RpcDemo.H_ARG_ADDR);
            int argRkey = qp.importRemoteKey(h.asSlice(RpcDemo.H_ARG_RKEY, RpcDemo.KEY_BYTES));
            buf.repPut(rep);
            s.argSg.clear().add(s.argArea.address(), s.size);
            s.rw.init(qp, 1, s.argSg, 1, 0, argAddr, argRkey, DmaDirection.FROM_DEVICE);
            s.rw.post(qp, 1, RpcTransport.USER_TAG | (long) s.index << 1);
        }
        transport.postRecvs(reqs);
    }

    @Override
    public void rwCompleted(long id, WcStatus status) {
        Slot s = slots[(int) (id >>> 1)];
        if ((id & 1) == 0) {
            s.rw.destroy(qp, 1, s.argSg, 1, DmaDirection.FROM_DEVICE);
            if (status == WcStatus.SUCCESS) {
                process(s);
            } else {
                freeSlots.push(s);
            }
        } else { // the write chunk landed (its reply was sent right behind it)
            s.rw.destroy(qp, 1, s.resSg, 1, DmaDirection.TO_DEVICE);
            freeSlots.push(s);
        }
    }

    /** The arguments are in: compute and reply (inline, or RDMA WRITE of the result and then the reply). */
    private void process(Slot s) {
        RpcDemo.transform(s.argArea, s.resArea, s.size);
        Req reply = buf.get();
        MemorySegment h = reply.header().segment();
        h.set(ValueLayout.JAVA_INT, RpcDemo.H_XID, s.xid);
        h.set(ValueLayout.JAVA_INT, RpcDemo.H_CREDITS, reqs);
        h.set(ValueLayout.JAVA_LONG, RpcDemo.H_RESULT_SIZE, s.size);
        boolean inline = (s.flags & FLAG_RESULT_INLINE) != 0;
        lock.lock();
        try {
            if (inline) {
                MemorySegment.copy(s.resArea, 0, reply.send().segment(), 0, s.size);
                transport.send(reply, HEADER, s.size, false);
                freeSlots.push(s);
            } else { // a write chunk: RDMA WRITE into the client's reply buffer, then the reply
                s.resSg.clear().add(s.resArea.address(), s.size);
                s.rw.init(qp, 1, s.resSg, 1, 0, s.resAddr, s.resRkey, DmaDirection.TO_DEVICE);
                s.rw.post(qp, 1, RpcTransport.USER_TAG | ((long) s.index << 1) | 1);
                transport.send(reply, HEADER, 0, false);
            }
        } finally {
            lock.unlock();
        }
    }

    @Override
    public void completed(Req req) {
        buf.put(req);
    }
}
