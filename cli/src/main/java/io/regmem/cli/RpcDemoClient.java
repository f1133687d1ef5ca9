package io.regmem.cli;

import static io.regmem.cli.RpcDemo.FLAG_ARGS_INLINE;
import static io.regmem.cli.RpcDemo.FLAG_RESULT_INLINE;
import static io.regmem.cli.RpcDemo.HEADER;

import io.regmem.core.ScatterList;
import io.regmem.registration.Access;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.Opcode;
import io.regmem.registration.QueuePair;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkRequest;
import io.regmem.registration.rpc.Rep;
import io.regmem.registration.rpc.Req;
import io.regmem.registration.rpc.RpcBuffer;
import io.regmem.registration.rpc.RpcTransport;
import io.regmem.registration.rpc.SendLock;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.HdrHistogram.ConcurrentHistogram;
import org.HdrHistogram.Histogram;

/**
 * The client of {@code regmem demo}'s RPC workload, on the first soft device. {@link #start} sends a
 * call: a 64-byte header, the arguments inline when small; otherwise, as the kernel's client does,
 * it registers each chunk for this call only with an FRWR MR from {@code mrGet} (REG_MR chained in
 * front of the Send, rights for exactly that area: read-only for the arguments, writable for the
 * result). Its completion handler checks every reply byte against the call's own answer, records the
 * latency, takes the credits the server granted, and invalidates both MRs (LOCAL_INV) before the
 * call completes, so a late or stray access by the server fails.
 */
final class RpcDemoClient implements RpcTransport.Handler {
    /**
     * Marks the first LOCAL_INV of a call's pair: its completion comes only when it is flushed (it is
     * unsignaled), and the pair's second one, signaled, always completes too; the call is finished by
     * that one, exactly once.
     */
    private static final long FIRST_INV = 1L << 40;
    /** The rights a read chunk gets: the server may read it, nothing else. */
    private static final int READ_ONLY = Access.mask(Access.REMOTE_READ);
    /** The rights a write chunk gets: the server may write it. */
    private static final int WRITABLE = Access.mask(Access.LOCAL_WRITE, Access.REMOTE_WRITE);

    /**
     * The client's state for one request (by request id): its staging areas, and for a call with
     * chunks the two FRWR MRs that expose exactly those areas to the server, with the REG_MR and
     * LOCAL_INV work requests that open and close them.
     */
    private static final class Call {
        Req req;
        int xid;
        boolean chunks;
        /** Its reply arrived (a second one for the same call is the server's error). */
        boolean replied;
        int size;
        long started;
        final MemorySegment argsArea;
        final MemorySegment resultArea;
        final ScatterList argSg = new ScatterList(1, false, 1);
        final ScatterList resultSg = new ScatterList(1, false, 1);
        MemoryRegion argMr;
        MemoryRegion resultMr;
        final WorkRequest regArgs = new WorkRequest(1);
        final WorkRequest regResult = new WorkRequest(1);
        final WorkRequest invArgs = new WorkRequest(1);
        final WorkRequest invResult = new WorkRequest(1);

        Call(MemorySegment argsArea, MemorySegment resultArea) {
            this.argsArea = argsArea;
            this.resultArea = resultArea;
        }
    }

    private final QueuePair qp;
    private final RpcBuffer buf;
    private final SendLock lock;
    private final MemorySegment pattern;
    private final Call[] byReq;
    private final int[] reqOfXid = new int[1 << 20];
    private final RpcTransport transport;
    private final Histogram latency = new ConcurrentHistogram(3);
    private final AtomicLong errors = new AtomicLong();
    private final AtomicLong done = new AtomicLong();
    private final AtomicLong failed = new AtomicLong();
    private final AtomicLong bytes = new AtomicLong();
    private final AtomicInteger credits = new AtomicInteger(1);

    /**
     * @param staging DMA-mapped memory for {@code reqs} calls: an argument and a result area of
     *                {@code area} bytes each (the chunks' pages)
     * @param pattern the bytes every call's arguments are made from ({@link RpcDemo#fillArgs})
     */
    RpcDemoClient(QueuePair qp, CompletionQueue cq, RpcBuffer buf,
                  SendLock lock, MemorySegment staging, long area, MemorySegment pattern, int reqs) {
        this.qp = qp;
        this.buf = buf;
        this.lock = lock;
        this.pattern = pattern;
        this.byReq = new Call[reqs];
        for (int i = 0; i < reqs; i++) {
            byReq[i] = new Call(staging.asSlice(2L * i * area, area), staging.asSlice((2L * i + 1) * area, area));
        }
        this.transport = new RpcTransport(qp, cq, buf, lock, this, (int) (area / 4096), 2 * reqs);
        transport.postRecvs(1);
    }

    /**
     * Sends call {@code xid} with {@code size} bytes of arguments (and as many of result), after
     * making sure {@code receives} receives are posted for the replies. False, with nothing held, when it cannot go now:
     * no free request, no MR yet (a refresh was started), or no send context; try again after polling.
     */
    boolean start(int xid, int size, int receives) {
        Req req = buf.get();
        if (req == null) {
            return false;
        }
        Call c = byReq[req.id()];
        c.req = req;
        c.replied = false;
        c.xid = xid;
        c.size = size;
        c.chunks = size > RpcDemo.INLINE;
        c.started = System.nanoTime();
        reqOfXid[xid & (reqOfXid.length - 1)] = req.id();
        MemorySegment h = req.header().segment();
        h.set(ValueLayout.JAVA_INT, RpcDemo.H_XID, xid);
        h.set(ValueLayout.JAVA_LONG, RpcDemo.H_SIZE, size);
        long sendBytes = 0;
        WorkRequest before = null;
        if (!c.chunks) {
            h.set(ValueLayout.JAVA_INT, RpcDemo.H_FLAGS, FLAG_ARGS_INLINE | FLAG_RESULT_INLINE);
            RpcPayloads.fillArgs(pattern, req.send().segment(), xid, size);
            sendBytes = size;
        } else {
            if (!openChunks(c)) {
                c.req = null;
                buf.put(req);
                return false;
            }
            before = c.regArgs;
        }
        transport.postRecvs(receives);
        boolean sent = false;
        lock.lock();
        try {
            sent = transport.send(req, HEADER, sendBytes, true, before);
        } finally {
            lock.unlock();
            if (!sent) { // no room in the ring, or the post was refused (then rethrown): nothing was posted
                if (c.chunks) {
                    transport.mrPut(req, c.argMr);
                    transport.mrPut(req, c.resultMr);
                }
                c.req = null;
                buf.put(req);
            }
        }
        return sent;
    }

    /**
     * Takes two MRs, fills the arguments, maps each chunk into its MR under a fresh key and chains the
     * two REG_MRs; the header names the chunks. False (no MR held) if the MRs are not there yet.
     */
    private boolean openChunks(Call c) {
        c.argMr = transport.mrGet(c.req);
        c.resultMr = c.argMr == null ? null : transport.mrGet(c.req);
        if (c.resultMr == null) { // no MR yet (a refresh was made): try again next round
            if (c.argMr != null) {
                transport.mrPut(c.req, c.argMr);
            }
            return false;
        }
        MemorySegment h = c.req.header().segment();
        h.set(ValueLayout.JAVA_INT, RpcDemo.H_FLAGS, 0);
        RpcPayloads.fillArgs(pattern, c.argsArea, c.xid, c.size);
        c.argSg.clear().add(c.argsArea.address(), c.size);
        c.resultSg.clear().add(c.resultArea.address(), c.size);
        c.argMr.mapSg(c.argSg, 1, 0, 4096);
        c.resultMr.mapSg(c.resultSg, 1, 0, 4096);
        int argKey = MemoryRegion.incRkey(c.argMr.rkey());
        int resultKey = MemoryRegion.incRkey(c.resultMr.rkey());
        c.regArgs.reset().regMr(c.argMr, argKey, READ_ONLY).next(c.regResult);
        c.regResult.reset().regMr(c.resultMr, resultKey, WRITABLE);
        h.set(ValueLayout.JAVA_LONG, RpcDemo.H_ARG_ADDR, c.argMr.address());
        // The keys travel in the call in their exported form (the next generations: the REG_MRs posted
        // in front of the Send give them to the MRs), as the kernel's FRWR puts the rkey in the message.
        c.argMr.exportRemoteKey(argKey, h.asSlice(RpcDemo.H_ARG_RKEY, RpcDemo.KEY_BYTES));
        h.set(ValueLayout.JAVA_LONG, RpcDemo.H_RESULT_ADDR, c.resultMr.address());
        c.resultMr.exportRemoteKey(resultKey, h.asSlice(RpcDemo.H_RESULT_RKEY, RpcDemo.KEY_BYTES));
        return true;
    }

    @Override
    public void received(Rep rep, long n) {
        MemorySegment h = rep.buffer().segment();
        int xid = h.get(ValueLayout.JAVA_INT, RpcDemo.H_XID);
        credits.set(Math.clamp(h.get(ValueLayout.JAVA_INT, RpcDemo.H_CREDITS), 1, byReq.length));
        Call c = byReq[reqOfXid[xid & (reqOfXid.length - 1)]];
        if (c.req == null || c.xid != xid || c.replied) { // no such call waits: a reply the server should not have sent
            errors.incrementAndGet();
            buf.repPut(rep);
            return;
        }
        c.replied = true;
        MemorySegment result = c.chunks ? c.resultArea : h.asSlice(HEADER, c.size);
        if (n < HEADER + (c.chunks ? 0 : c.size) || !RpcPayloads.check(pattern, result, xid, c.size)) {
            errors.incrementAndGet();
        }
        latency.recordValue(Math.max(1, System.nanoTime() - c.started));
        bytes.addAndGet(2L * c.size);
        c.req.attachReply(rep);
        if (!c.chunks) {
            transport.replyDone(c.req);
            return;
        }
        // Close both chunks before the call completes: the server's keys stop working now.
        c.invArgs.reset().opcode(Opcode.LOCAL_INV).invalidateRkey(c.argMr.rkey()).next(c.invResult);
        c.invResult.reset().opcode(Opcode.LOCAL_INV).invalidateRkey(c.resultMr.rkey()).signaled(true)
                .wrId(RpcTransport.USER_TAG | c.req.id());
        c.invArgs.wrId(RpcTransport.USER_TAG | FIRST_INV | c.req.id());
        qp.postSend(c.invArgs);
        c.invArgs.next(null);
    }

    @Override
    public void rwCompleted(long id, WcStatus status) {
        if ((id & FIRST_INV) != 0) {
            return; // the first LOCAL_INV of a pair, flushed: the second one's completion finishes the call
        }
        Call c = byReq[(int) id];
        if (status == WcStatus.SUCCESS) { // both LOCAL_INVs done: the MRs go back to the request's cache
            transport.mrPut(c.req, c.argMr);
            transport.mrPut(c.req, c.resultMr);
        } else {
            failed.incrementAndGet(); // the connection failed: the MRs' state is unknown, the flush destroys them
        }
        c.argMr = null;
        c.resultMr = null;
        transport.replyDone(c.req);
    }

    @Override
    public void completed(Req req) {
        done.incrementAndGet();
        byReq[req.id()].req = null;
        buf.put(req);
    }

    /** A call whose reply never came (the connection was flushed first): its request goes back, not counted as done. */
    @Override
    public void aborted(Req req) {
        failed.incrementAndGet();
        Call c = byReq[req.id()];
        c.req = null;
        c.argMr = null; // destroyed with the transport's MRs
        c.resultMr = null;
        buf.put(req);
    }

    /** Calls started and not yet finished. */
    int calls() {
        int n = 0;
        for (Call c : byReq) {
            n += c.req != null ? 1 : 0;
        }
        return n;
    }

    /** Calls that ended without their answer because the connection failed. */
    long failed() {
        return failed.get();
    }

    /** Starts the measured run: latencies and bytes so far are forgotten (errors and calls done are kept). */
    void resetMeasurements() {
        latency.reset();
        bytes.set(0);
    }

    /** The client's end of the connection. */
    RpcTransport transport() {
        return transport;
    }

    /** Calls completed. */
    long done() {
        return done.get();
    }

    /** The credits the server granted last (1 until the first reply). */
    int credits() {
        return credits.get();
    }

    /** Replies whose bytes were wrong, and chunks that failed to close. */
    long errors() {
        return errors.get();
    }

    /** Argument and result bytes moved by completed calls. */
    long bytes() {
        return bytes.get();
    }

    /** Call latency in nanoseconds, from start to reply. */
    Histogram latency() {
        return latency;
    }
}
