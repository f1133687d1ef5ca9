package io.regmem.bench;

import io.regmem.core.BufferPool;
import io.regmem.core.LeakReport;
import io.regmem.core.ScatterList;
import io.regmem.registration.Access;
import io.regmem.registration.DmaDirection;
import io.regmem.registration.DmaMapping;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.Opcode;
import io.regmem.registration.WorkRequest;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.WcStatus;
import io.regmem.registration.rpc.Rep;
import io.regmem.registration.rpc.Req;
import io.regmem.registration.rpc.RpcBuffer;
import io.regmem.registration.rpc.RpcTransport;
import io.regmem.registration.rpc.SendLock;
import io.regmem.registration.rw.RwContext;
import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayDeque;
import java.util.Locale;
import java.util.Map;
import org.HdrHistogram.Histogram;

/**
 * The RPC-over-RDMA workload of {@code regmem demo}: a client and a server in one JVM on two soft
 * devices, each with an {@link RpcBuffer} and an {@link RpcTransport}. A call carries a 64-byte
 * header by SEND; small arguments travel inline after it. Large arguments stay in the client's memory
 * and are read by the server with RDMA READ (a read chunk, through an {@link RwContext}); large
 * results are written by the server with RDMA WRITE into the client's reply area (a write chunk).
 * As the kernel's client does, the client registers each chunk for this call only, with an FRWR MR
 * (REG_MR chained in front of the Send, rights for exactly that area), and invalidates both MRs
 * (LOCAL_INV) before the call completes, so a late or stray access by the server fails. Replies carry
 * credits. Every reply byte is checked.
 */
final class RpcDemo {
    static final int HEADER = 64;
    /** The rights a read chunk gets: the server may read it, nothing else. */
    private static final int READ_ONLY = Access.mask(Access.REMOTE_READ);
    /** The rights a write chunk gets: the server may write it. */
    private static final int WRITABLE = Access.mask(Access.LOCAL_WRITE, Access.REMOTE_WRITE);
    static final int INLINE = 1024;
    private static final int FLAG_ARGS_INLINE = 1;
    private static final int FLAG_RESULT_INLINE = 2;

    private final PrintStream out;
    private final long calls;
    private final long durationNanos;
    private final int[] payloads;
    private final int concurrency;
    private final boolean progress;
    private final boolean threads;

    RpcDemo(PrintStream out, long calls, long durationMillis, int[] payloads, int concurrency, boolean progress,
            boolean threads) {
        this.threads = threads;
        this.out = out;
        this.calls = calls;
        this.durationNanos = durationMillis * 1_000_000L;
        this.payloads = payloads;
        this.concurrency = concurrency;
        this.progress = progress;
    }

    /**
     * The client's state for one request (by request id): its staging areas, and for a call with
     * chunks the two FRWR MRs that expose exactly those areas to the server, with the REG_MR and
     * LOCAL_INV work requests that open and close them.
     */
    private static final class Call {
        Req req;
        int xid;
        boolean chunks;
        int size;
        long started;
        MemorySegment argsArea;
        MemorySegment resultArea;
        final ScatterList argSg = new ScatterList(1, false, 1);
        final ScatterList resultSg = new ScatterList(1, false, 1);
        MemoryRegion argMr;
        MemoryRegion resultMr;
        final WorkRequest regArgs = new WorkRequest(1);
        final WorkRequest regResult = new WorkRequest(1);
        final WorkRequest invArgs = new WorkRequest(1);
        final WorkRequest invResult = new WorkRequest(1);
    }

    /** One call being served. */
    private static final class Slot {
        final int index;
        final RwContext rw = new RwContext();
        final ScatterList argSg = new ScatterList(1, false, 1);
        final ScatterList resSg = new ScatterList(1, false, 1);
        MemorySegment argArea;
        MemorySegment resArea;
        int xid;
        int flags;
        long size;
        long resAddr;
        int resRkey;

        Slot(int index) {
            this.index = index;
        }
    }

    private static final ValueLayout.OfLong WORD = ValueLayout.JAVA_LONG_UNALIGNED;

    /** The argument bytes of call xid: a fixed pattern with every byte XORed with the call's byte. */
    static void fillArgs(MemorySegment pattern, MemorySegment to, int xid, long size) {
        xor(pattern, to, size, spread((byte) xid));
    }

    /** The server's work: every argument byte XORed with 0x5A. */
    static void transform(MemorySegment args, MemorySegment to, long size) {
        xor(args, to, size, spread((byte) 0x5A));
    }

    /**
     * True if {@code result} is call xid's answer: the pattern XORed with the call's byte and 0x5A,
     * every byte of it (another call's answer differs wherever the calls' bytes differ).
     */
    static boolean check(MemorySegment pattern, MemorySegment result, int xid, long size) {
        long mask = spread((byte) (xid ^ 0x5A));
        long i = 0;
        for (; i + 8 <= size; i += 8) {
            if (result.get(WORD, i) != (pattern.get(WORD, i) ^ mask)) {
                return false;
            }
        }
        for (; i < size; i++) {
            if (result.get(ValueLayout.JAVA_BYTE, i) != (byte) (pattern.get(ValueLayout.JAVA_BYTE, i) ^ mask)) {
                return false;
            }
        }
        return true;
    }

    private static long spread(byte b) {
        return (b & 0xFFL) * 0x0101_0101_0101_0101L;
    }

    private static void xor(MemorySegment from, MemorySegment to, long size, long mask) {
        long i = 0;
        for (; i + 8 <= size; i += 8) {
            to.set(WORD, i, from.get(WORD, i) ^ mask);
        }
        for (; i < size; i++) {
            to.set(ValueLayout.JAVA_BYTE, i, (byte) (from.get(ValueLayout.JAVA_BYTE, i) ^ mask));
        }
    }

    boolean run() {
        int maxPayload = 0;
        for (int p : payloads) {
            maxPayload = Math.max(maxPayload, p);
        }
        int reqs = Math.max(4, concurrency);
        QpInitAttributes client = new QpInitAttributes().maxSendWr(8 * reqs + 64).maxRecvWr(reqs + 16).maxSendSge(3)
                .signalAll(false);
        QpInitAttributes server = new QpInitAttributes().maxSendWr(16 * reqs + 64).maxRecvWr(reqs + 16).maxSendSge(3)
                .signalAll(false);
        SoftPair pair = new SoftPair(Map.of(), 8192, client, server);
        Arena arena = Arena.ofShared();
        BufferPool rpcPoolC = BufferPool.builder().name("rpc-client-buffers").build();
        BufferPool rpcPoolS = BufferPool.builder().name("rpc-server-buffers").build();
        RpcBuffer bufC = RpcBuffer.builder(pair.pdA, rpcPoolC).maxRequests(reqs).inline(INLINE + HEADER, INLINE + HEADER).build();
        RpcBuffer bufS = RpcBuffer.builder(pair.pdB, rpcPoolS).maxRequests(reqs).inline(INLINE + HEADER, INLINE + HEADER).build();
        long area = Math.max(maxPayload, 4096);
        MemorySegment staging = arena.allocate(2L * reqs * Math.max(maxPayload, 64), 4096);
        MemorySegment stagingC = arena.allocate(2L * reqs * area, 4096);
        DmaMapping stagingCMap = pair.devA.dmaMap(stagingC); // FRWR pages must be DMA-mapped
        int mrPages = (int) (area / 4096);
        MemorySegment pattern = arena.allocate(Math.max(maxPayload, 64), 8);
        java.util.SplittableRandom rnd = new java.util.SplittableRandom(2026);
        for (long i = 0; i < pattern.byteSize(); i += 8) {
            pattern.set(ValueLayout.JAVA_LONG, i, rnd.nextLong());
        }
        DmaMapping stagingMap = pair.devB.dmaMap(staging);
        SendLock lockC = new SendLock();
        SendLock lockS = new SendLock();
        Call[] byReq = new Call[reqs];
        for (int i = 0; i < reqs; i++) {
            byReq[i] = new Call();
            byReq[i].argsArea = stagingC.asSlice(2L * i * area, area);
            byReq[i].resultArea = stagingC.asSlice((2L * i + 1) * area, area);
        }
        int[] reqOfXid = new int[1 << 20];
        Histogram latency = new org.HdrHistogram.ConcurrentHistogram(3);
        java.util.concurrent.atomic.AtomicLong errors = new java.util.concurrent.atomic.AtomicLong();
        java.util.concurrent.atomic.AtomicLong done = new java.util.concurrent.atomic.AtomicLong();
        java.util.concurrent.atomic.AtomicLong bytes = new java.util.concurrent.atomic.AtomicLong();
        java.util.concurrent.atomic.AtomicInteger credits = new java.util.concurrent.atomic.AtomicInteger(1);
        Slot[] slots = new Slot[reqs];
        ArrayDeque<Slot> freeSlots = new ArrayDeque<>();
        for (int i = 0; i < reqs; i++) {
            slots[i] = new Slot(i);
            slots[i].argArea = staging.asSlice(2L * i * Math.max(maxPayload, 64), Math.max(maxPayload, 64));
            slots[i].resArea = staging.asSlice((2L * i + 1) * Math.max(maxPayload, 64), Math.max(maxPayload, 64));
            freeSlots.push(slots[i]);
        }
        RpcTransport[] transports = new RpcTransport[2];

        // ---- the server ----
        RpcTransport.Handler serverHandler = new RpcTransport.Handler() {
            @Override
            public void received(Rep rep, long n) {
                MemorySegment h = rep.buffer().segment();
                Slot s = freeSlots.pop();
                s.xid = h.get(ValueLayout.JAVA_INT, 0);
                s.flags = h.get(ValueLayout.JAVA_INT, 4);
                s.size = h.get(ValueLayout.JAVA_LONG, 8);
                s.resAddr = h.get(ValueLayout.JAVA_LONG, 40);
                s.resRkey = h.get(ValueLayout.JAVA_INT, 48);
                if ((s.flags & FLAG_ARGS_INLINE) != 0) {
                    MemorySegment.copy(h, HEADER, s.argArea, 0, s.size);
                    bufS.repPut(rep);
                    process(s);
                } else { // a read chunk: RDMA READ the arguments from the client's memory
                    long argAddr = h.get(ValueLayout.JAVA_LONG, 16);
                    int argRkey = h.get(ValueLayout.JAVA_INT, 24);
                    bufS.repPut(rep);
                    s.argSg.clear().add(s.argArea.address(), s.size);
                    s.rw.init(pair.qpB, 1, s.argSg, 1, 0, argAddr, argRkey, DmaDirection.FROM_DEVICE);
                    s.rw.post(pair.qpB, 1, RpcTransport.USER_TAG | (long) s.index << 1);
                }
                transports[1].postRecvs(reqs);
            }

            @Override
            public void rwCompleted(long id, WcStatus status) {
                Slot s = slots[(int) (id >>> 1)];
                if ((id & 1) == 0) {
                    s.rw.destroy(pair.qpB, 1, s.argSg, 1, DmaDirection.FROM_DEVICE);
                    if (status == WcStatus.SUCCESS) {
                        process(s);
                    } else {
                        freeSlots.push(s);
                    }
                } else { // the write chunk landed (its reply was sent right behind it)
                    s.rw.destroy(pair.qpB, 1, s.resSg, 1, DmaDirection.TO_DEVICE);
                    freeSlots.push(s);
                }
            }

            private void process(Slot s) {
                transform(s.argArea, s.resArea, s.size);
                Req reply = bufS.get();
                MemorySegment h = reply.header().segment();
                h.set(ValueLayout.JAVA_INT, 0, s.xid);
                h.set(ValueLayout.JAVA_INT, 28, reqs); // credits granted
                h.set(ValueLayout.JAVA_LONG, 32, s.size);
                boolean inline = (s.flags & FLAG_RESULT_INLINE) != 0;
                lockS.lock();
                try {
                    if (inline) {
                        MemorySegment.copy(s.resArea, 0, reply.send().segment(), 0, s.size);
                        transports[1].send(reply, HEADER, s.size, false);
                        freeSlots.push(s);
                    } else { // a write chunk: RDMA WRITE into the client's reply buffer, then the reply
                        s.resSg.clear().add(s.resArea.address(), s.size);
                        s.rw.init(pair.qpB, 1, s.resSg, 1, 0, s.resAddr, s.resRkey, DmaDirection.TO_DEVICE);
                        s.rw.post(pair.qpB, 1, RpcTransport.USER_TAG | ((long) s.index << 1) | 1);
                        transports[1].send(reply, HEADER, 0, false);
                    }
                } finally {
                    lockS.unlock();
                }
            }

            @Override
            public void completed(Req req) {
                bufS.put(req);
            }
        };
        transports[1] = new RpcTransport(pair.qpB, pair.cqB, bufS, lockS, serverHandler, 16, 4);
        transports[1].postRecvs(reqs);

        // ---- the client ----
        RpcTransport.Handler clientHandler = new RpcTransport.Handler() {
            @Override
            public void received(Rep rep, long n) {
                MemorySegment h = rep.buffer().segment();
                int xid = h.get(ValueLayout.JAVA_INT, 0);
                credits.set(h.get(ValueLayout.JAVA_INT, 28));
                Call c = byReq[reqOfXid[xid & (reqOfXid.length - 1)]];
                MemorySegment result = c.chunks ? c.resultArea : h.asSlice(HEADER, c.size);
                if (c.xid != xid || !check(pattern, result, xid, c.size)) {
                    errors.incrementAndGet();
                }
                latency.recordValue(Math.max(1, (System.nanoTime() - c.started) / 1000));
                bytes.addAndGet(2L * c.size);
                c.req.attachReply(rep);
                if (!c.chunks) {
                    transports[0].replyDone(c.req);
                    return;
                }
                // Close both chunks before the call completes: the server's keys stop working now.
                c.invArgs.reset().opcode(Opcode.LOCAL_INV).invalidateRkey(c.argMr.rkey()).next(c.invResult);
                c.invResult.reset().opcode(Opcode.LOCAL_INV).invalidateRkey(c.resultMr.rkey()).signaled(true)
                        .wrId(RpcTransport.USER_TAG | c.req.id());
                c.invArgs.wrId(RpcTransport.USER_TAG | c.req.id());
                pair.qpA.postSend(c.invArgs);
                c.invArgs.next(null);
            }

            @Override
            public void rwCompleted(long id, WcStatus status) {
                Call c = byReq[(int) id]; // both LOCAL_INVs done: the MRs go back to the request's cache
                transports[0].mrPut(c.req, c.argMr);
                transports[0].mrPut(c.req, c.resultMr);
                c.argMr = null;
                c.resultMr = null;
                if (status != WcStatus.SUCCESS) {
                    errors.incrementAndGet();
                }
                transports[0].replyDone(c.req);
            }

            @Override
            public void completed(Req req) {
                done.incrementAndGet();
                bufC.put(req);
            }
        };
        transports[0] = new RpcTransport(pair.qpA, pair.cqA, bufC, lockC, clientHandler, mrPages, 2 * reqs);
        transports[0].postRecvs(1);

        // With threads: the server and the client's completions run on their own threads, so each side's
        // send-context ring has its consumer (the sender) and its producer (the completion handler) on
        // different threads, and requests are taken on one thread and put back on another.
        java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
        java.util.concurrent.atomic.AtomicReference<Throwable> failure = new java.util.concurrent.atomic.AtomicReference<>();
        java.util.List<Thread> pollers = new java.util.ArrayList<>();
        if (threads) {
            for (int side = 1; side >= 0; side--) {
                RpcTransport t = transports[side];
                pollers.add(Thread.ofPlatform().name(side == 1 ? "rpc-server" : "rpc-client-completions").start(() -> {
                    try {
                        int idle = 0;
                        while (!stop.get() && t.isConnected()) {
                            if (t.poll() > 0) {
                                idle = 0;
                            } else if (++idle > 64) { // three busy threads on two cores: nap when idle
                                java.util.concurrent.locks.LockSupport.parkNanos(10_000);
                            } else {
                                Thread.onSpinWait();
                            }
                        }
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    }
                }));
            }
        }
        long start = System.nanoTime();
        long lastPrint = start;
        int xid = 0;
        boolean ok = true;
        try {
            while (durationNanos > 0 ? System.nanoTime() - start < durationNanos || xid > done.get() : done.get() < calls) {
                boolean more = durationNanos > 0 ? System.nanoTime() - start < durationNanos : xid < calls;
                while (more && xid - done.get() < Math.min(concurrency, credits.get() + concurrency)) {
                    Req req = bufC.get();
                    if (req == null) {
                        break;
                    }
                    Call c = byReq[req.id()];
                    c.req = req;
                    c.xid = xid;
                    c.size = payloads[xid % payloads.length];
                    c.chunks = c.size > INLINE;
                    c.started = System.nanoTime();
                    reqOfXid[xid & (reqOfXid.length - 1)] = req.id();
                    MemorySegment h = req.header().segment();
                    h.set(ValueLayout.JAVA_INT, 0, xid);
                    h.set(ValueLayout.JAVA_LONG, 8, c.size);
                    long sendBytes = 0;
                    WorkRequest before = null;
                    if (!c.chunks) {
                        h.set(ValueLayout.JAVA_INT, 4, FLAG_ARGS_INLINE | FLAG_RESULT_INLINE);
                        fillArgs(pattern, req.send().segment(), xid, c.size);
                        sendBytes = c.size;
                    } else {
                        c.argMr = transports[0].mrGet(req);
                        c.resultMr = c.argMr == null ? null : transports[0].mrGet(req);
                        if (c.resultMr == null) { // no MR yet (a refresh was made): try again next round
                            if (c.argMr != null) {
                                transports[0].mrPut(req, c.argMr);
                            }
                            bufC.put(req);
                            break;
                        }
                        h.set(ValueLayout.JAVA_INT, 4, 0);
                        fillArgs(pattern, c.argsArea, xid, c.size);
                        c.argSg.clear().add(c.argsArea.address(), c.size);
                        c.resultSg.clear().add(c.resultArea.address(), c.size);
                        c.argMr.mapSg(c.argSg, 1, 0, 4096);
                        c.resultMr.mapSg(c.resultSg, 1, 0, 4096);
                        int argKey = MemoryRegion.incRkey(c.argMr.rkey());
                        int resultKey = MemoryRegion.incRkey(c.resultMr.rkey());
                        c.regArgs.reset().regMr(c.argMr, argKey, READ_ONLY).next(c.regResult);
                        c.regResult.reset().regMr(c.resultMr, resultKey, WRITABLE);
                        before = c.regArgs;
                        h.set(ValueLayout.JAVA_LONG, 16, c.argMr.address());
                        h.set(ValueLayout.JAVA_INT, 24, argKey);
                        h.set(ValueLayout.JAVA_LONG, 40, c.resultMr.address());
                        h.set(ValueLayout.JAVA_INT, 48, resultKey);
                    }
                    transports[0].postRecvs(concurrency);
                    lockC.lock();
                    try {
                        if (!transports[0].send(req, HEADER, sendBytes, true, before)) {
                            if (c.chunks) {
                                transports[0].mrPut(req, c.argMr);
                                transports[0].mrPut(req, c.resultMr);
                            }
                            bufC.put(req);
                            break;
                        }
                    } finally {
                        lockC.unlock();
                    }
                    xid++;
                    more = durationNanos > 0 ? System.nanoTime() - start < durationNanos : xid < calls;
                }
                if (threads) {
                    java.util.concurrent.locks.LockSupport.parkNanos(5_000); // the sender waits for completions
                } else {
                    transports[1].poll();
                    transports[0].poll();
                }
                if (failure.get() != null) {
                    throw new IllegalStateException("a poller failed", failure.get());
                }
                if (!transports[0].isConnected() || !transports[1].isConnected()) {
                    out.println("regmem demo: the connection failed");
                    ok = false;
                    break;
                }
                long now = System.nanoTime();
                if (progress && now - lastPrint > 1_000_000_000L) {
                    lastPrint = now;
                    out.printf(Locale.ROOT, "\r  %,d calls, %,.0f calls/s   ", done.get(), done.get() / ((now - start) / 1e9));
                    out.flush();
                }
            }
        } catch (RuntimeException e) {
            out.println("regmem demo: " + e);
            ok = false;
        }
        long elapsed = System.nanoTime() - start;
        stop.set(true);
        for (Thread t : pollers) {
            try {
                t.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        if (progress) {
            out.print("\r");
        }

        int mrsMade = transports[0].mrs();
        transports[0].flushDisconnect();
        transports[1].flushDisconnect();
        long stale = transports[0].staleCompletions() + transports[1].staleCompletions();
        int reqsFreeC = bufC.freeRequests();
        int reqsFreeS = bufS.freeRequests();
        int repsC = bufC.replies();
        int repsFreeC = bufC.freeReplies();
        boolean leakedReqs = !bufC.destroy().isEmpty() | !bufS.destroy().isEmpty();
        pair.disconnect();
        stagingMap.close();
        stagingCMap.close();
        LeakReport leaksC = rpcPoolC.closeAndReport();
        LeakReport leaksS = rpcPoolS.closeAndReport();
        pair.close();
        arena.close();
        String devC = pair.devA.resources().report();
        String devS = pair.devB.resources().report();

        out.printf(Locale.ROOT, "%nRPC over RDMA (soft provider): %,d calls in %.2f s, %,.0f calls/s, %,.1f MiB/s of arguments and results; "
                + "payloads %s B, %d concurrent, %s%n", done.get(), elapsed / 1e9, done.get() / (elapsed / 1e9),
                bytes.get() / (elapsed / 1e9) / (1 << 20), java.util.Arrays.toString(payloads), concurrency,
                threads ? "sender, client completions and server on three threads" : "one thread");
        out.printf(Locale.ROOT, "Call latency (us)   p50 %d   p90 %d   p99 %d   p99.9 %d   max %d%n",
                latency.getValueAtPercentile(50), latency.getValueAtPercentile(90), latency.getValueAtPercentile(99),
                latency.getValueAtPercentile(99.9), latency.getMaxValue());
        out.printf(Locale.ROOT, "Replies checked byte by byte: %,d wrong%n", errors.get());
        out.printf(Locale.ROOT, "Requests free after the run: client %d/%d, server %d/%d; client replies %d made, %d free; "
                + "stale completions %d%n", reqsFreeC, reqs, reqsFreeS, reqs, repsC, repsFreeC, stale);
        out.printf(Locale.ROOT, "Chunks: each registered for its call only (FRWR: REG_MR before the Send, LOCAL_INV before "
                + "the call completes); %d MRs made%n", mrsMade);
        out.printf(Locale.ROOT, "Devices: %s; %s%n", devC, devS);
        out.printf(Locale.ROOT, "Pools: %s; %s%n", leaksC.describe().strip(), leaksS.describe().strip());
        return ok && errors.get() == 0 && !leakedReqs && reqsFreeC == reqs && reqsFreeS == reqs && leaksC.clean() && leaksS.clean() && devC.equals("no live objects") && devS.equals("no live objects")
                && (durationNanos > 0 || done.get() == calls);
    }
}
