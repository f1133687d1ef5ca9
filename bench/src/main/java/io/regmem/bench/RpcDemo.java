package io.regmem.bench;

import io.regmem.core.BufferPool;
import io.regmem.core.LeakReport;
import io.regmem.registration.DmaMapping;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.rpc.RpcBuffer;
import io.regmem.registration.rpc.RpcTransport;
import io.regmem.registration.rpc.SendLock;
import io.regmem.registration.rw.RwContext;
import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Locale;
import java.util.Map;
import org.HdrHistogram.Histogram;

/**
 * The RPC-over-RDMA workload of {@code regmem demo}: a client ({@link RpcDemoClient}) and a server
 * ({@link RpcDemoServer}) in one JVM on two soft devices, each with an {@link RpcBuffer} and an
 * {@link RpcTransport}. A call carries a 64-byte header by SEND; small arguments travel inline after
 * it. Large arguments stay in the client's memory and are read by the server with RDMA READ (a read
 * chunk, through an {@link RwContext}); large results are written by the server with RDMA WRITE into
 * the client's reply area (a write chunk). Replies carry credits. Every reply byte is checked. This
 * class sets the two ends up, drives the calls (on one thread, or with the server and the client's
 * completions on threads of their own), tears everything down and reports.
 */
final class RpcDemo {
    /** The call and reply header's size, sent first in every Send. */
    static final int HEADER = 64;
    /** Arguments and results up to this many bytes travel inline; larger ones in chunks. */
    static final int INLINE = 1024;
    static final int FLAG_ARGS_INLINE = 1;
    static final int FLAG_RESULT_INLINE = 2;
    // The header's fields (byte offsets). A call: xid, flags, argument size, the read chunk's address
    // and key, the write chunk's address and key. A reply: xid, the credits granted, the result size.
    static final long H_XID = 0;
    static final long H_FLAGS = 4;
    static final long H_SIZE = 8;
    static final long H_ARG_ADDR = 16;
    static final long H_ARG_RKEY = 24;
    static final long H_CREDITS = 28;
    static final long H_RESULT_SIZE = 32;
    static final long H_RESULT_ADDR = 40;
    static final long H_RESULT_RKEY = 48;
    /**
     * The bytes a per-call key takes in the header: the exported form of a fast-reg key, 4 on soft
     * (a provider with larger keys cannot fast-register; it uses registrations that persist).
     */
    static final int KEY_BYTES = 4;

    private final PrintStream out;
    private final long calls;
    private final long durationNanos;
    private final int[] payloads;
    private final int concurrency;
    private final boolean progress;
    private final boolean threads;
    private final long warmupNanos;
    private final String provider;

    /**
     * @param warmupMillis how long the calls run before the measured run starts (0: none); they are
     *                     checked like every call but not counted
     */
    RpcDemo(PrintStream out, long calls, long durationMillis, long warmupMillis, int[] payloads, int concurrency, boolean progress,
            boolean threads) {
        this(out, calls, durationMillis, warmupMillis, payloads, concurrency, progress, threads, "soft");
    }

    /** As above, on two devices of {@code provider} in this JVM. */
    RpcDemo(PrintStream out, long calls, long durationMillis, long warmupMillis, int[] payloads, int concurrency, boolean progress,
            boolean threads, String provider) {
        this.provider = provider;
        this.threads = threads;
        this.warmupNanos = warmupMillis * 1_000_000L;
        this.out = out;
        this.calls = calls;
        this.durationNanos = durationMillis * 1_000_000L;
        this.payloads = payloads;
        this.concurrency = concurrency;
        this.progress = progress;
    }

    /**
     * Empty polls a thread of the threaded run spins before it yields its core. Two spinning threads
     * fill this machine's two cores; when a third (the JIT compiler while the run warms up) wants one,
     * a spinner that yields lets it run now instead of at the next scheduler tick (4 ms), which the
     * calls in flight would all wait for.
     */
    static final int IDLE_SPINS = Integer.getInteger("regmem.demo.idleSpins", 256);

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
        QpInitAttributes clientQp = new QpInitAttributes().maxSendWr(8 * reqs + 64).maxRecvWr(reqs + 16).maxSendSge(3)
                .signalAll(false);
        QpInitAttributes serverQp = new QpInitAttributes().maxSendWr(16 * reqs + 64).maxRecvWr(reqs + 16).maxSendSge(3)
                .signalAll(false);
        SoftPair pair = new SoftPair(provider, Map.of(), 8192, clientQp, serverQp);
        Arena arena = Arena.ofShared();
        BufferPool rpcPoolC = BufferPool.builder().name("rpc-client-buffers").build();
        BufferPool rpcPoolS = BufferPool.builder().name("rpc-server-buffers").build();
        RpcBuffer bufC = RpcBuffer.builder(pair.pdA, rpcPoolC).maxRequests(reqs).inline(INLINE + HEADER, INLINE + HEADER).build();
        RpcBuffer bufS = RpcBuffer.builder(pair.pdB, rpcPoolS).maxRequests(reqs).inline(INLINE + HEADER, INLINE + HEADER).build();
        long area = Math.max(maxPayload, 4096);
        long slotBytes = Math.max(maxPayload, 64);
        MemorySegment staging = arena.allocate(2L * reqs * slotBytes, 4096);
        MemorySegment stagingC = arena.allocate(2L * reqs * area, 4096);
        DmaMapping stagingCMap = pair.devA.dmaMap(stagingC); // FRWR pages must be DMA-mapped
        MemorySegment pattern = arena.allocate(slotBytes, 8);
        java.util.SplittableRandom rnd = new java.util.SplittableRandom(2026);
        for (long i = 0; i < pattern.byteSize(); i += 8) {
            pattern.set(ValueLayout.JAVA_LONG, i, rnd.nextLong());
        }
        DmaMapping stagingMap = pair.devB.dmaMap(staging);
        RpcDemoServer server = new RpcDemoServer(pair, bufS, new SendLock(), staging, reqs, slotBytes);
        RpcDemoClient client = new RpcDemoClient(pair, bufC, new SendLock(), stagingC, area, pattern, reqs);
        RpcTransport[] transports = {client.transport(), server.transport()};

        // With threads: the server runs on a thread of its own, the client (sending and handling its
        // completions) on this one: one thread per end of the connection, on two cores.
        java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
        java.util.concurrent.atomic.AtomicReference<Throwable> failure = new java.util.concurrent.atomic.AtomicReference<>();
        java.util.List<Thread> pollers = new java.util.ArrayList<>();
        if (threads) {
            pollers.add(startPoller(transports[1], "rpc-server", stop, failure));
        }
        boolean ok = true;
        long start = 0;
        long measuredFrom = 0;
        try {
            if (warmupNanos > 0) { // the same calls, not counted: the JIT compiles the paths first
                drive(client, transports, failure, 0, warmupNanos, false);
                measuredFrom = client.done();
                client.resetMeasurements();
            }
            start = System.nanoTime();
            ok = drive(client, transports, failure, calls, durationNanos, progress);
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

        long done = client.done() - measuredFrom;
        Histogram latency = client.latency();
        out.printf(Locale.ROOT, "%nRPC over RDMA (%s provider): %,d calls in %.2f s, %,.0f calls/s, %,.1f MiB/s of arguments and results; "
                + "payloads %s B, %d concurrent, %s%n", provider, done, elapsed / 1e9, done / (elapsed / 1e9),
                client.bytes() / (elapsed / 1e9) / (1 << 20), java.util.Arrays.toString(payloads), concurrency,
                threads ? "client and server on a thread each" : "one thread");
        if (warmupNanos > 0) {
            out.printf(Locale.ROOT, "Measured after a warm-up of %.1f s: %,d calls before it, checked the same way, not counted%n",
                    warmupNanos / 1e9, measuredFrom);
        }
        out.printf(Locale.ROOT, "Call latency (us)   p50 %d   p90 %d   p99 %d   p99.9 %d   max %d%n",
                latency.getValueAtPercentile(50), latency.getValueAtPercentile(90), latency.getValueAtPercentile(99),
                latency.getValueAtPercentile(99.9), latency.getMaxValue());
        out.printf(Locale.ROOT, "Replies checked byte by byte: %,d wrong%n", client.errors());
        out.printf(Locale.ROOT, "Requests free after the run: client %d/%d, server %d/%d; client replies %d made, %d free; "
                + "stale completions %d%n", reqsFreeC, reqs, reqsFreeS, reqs, repsC, repsFreeC, stale);
        out.printf(Locale.ROOT, "Chunks: each registered for its call only (FRWR: REG_MR before the Send, LOCAL_INV before "
                + "the call completes); %d MRs made%n", mrsMade);
        out.printf(Locale.ROOT, "Devices: %s; %s%n", devC, devS);
        out.printf(Locale.ROOT, "Pools: %s; %s%n", leaksC.describe().strip(), leaksS.describe().strip());
        return ok && client.errors() == 0 && !leakedReqs && reqsFreeC == reqs && reqsFreeS == reqs && leaksC.clean()
                && leaksS.clean() && devC.equals("no live objects") && devS.equals("no live objects")
                && (durationNanos > 0 || done == calls);
    }

    /** The next call's number; calls of the warm-up and the measured run are numbered on. */
    private int xid;
    private int idle;

    /**
     * Sends calls and polls until {@code calls} more calls completed, or for {@code nanos} (then
     * waits for the calls in flight). False if the connection failed.
     */
    private boolean drive(RpcDemoClient client, RpcTransport[] transports, java.util.concurrent.atomic.AtomicReference<Throwable> failure,
                          long calls, long nanos, boolean progress) {
        long start = System.nanoTime();
        long lastPrint = start;
        long base = client.done();
        long last = xid + calls;
        while (nanos > 0 ? System.nanoTime() - start < nanos || xid > client.done() : client.done() - base < calls) {
            boolean more = nanos > 0 ? System.nanoTime() - start < nanos : xid < last;
            while (more && xid - client.done() < Math.min(concurrency, client.credits() + concurrency)
                    && client.start(xid, payloads[xid % payloads.length], concurrency)) {
                xid++;
                more = nanos > 0 ? System.nanoTime() - start < nanos : xid < last;
            }
            if (!threads) {
                transports[1].poll();
                transports[0].poll();
            } else if (transports[0].poll() > 0) {
                idle = 0;
            } else if (++idle > IDLE_SPINS) { // waiting for the server: if a thread waits for a core, let it run
                Thread.yield();
            }
            if (failure.get() != null) {
                throw new IllegalStateException("a poller failed", failure.get());
            }
            if (!transports[0].isConnected() || !transports[1].isConnected()) {
                out.println("regmem demo: the connection failed");
                return false;
            }
            long now = System.nanoTime();
            if (progress && now - lastPrint > 1_000_000_000L) {
                lastPrint = now;
                long n = client.done() - base;
                out.printf(Locale.ROOT, "\r  %,d calls, %,.0f calls/s   ", n, n / ((now - start) / 1e9));
                out.flush();
            }
        }
        return true;
    }

    /** A thread that polls {@code t} until told to stop or the connection fails; a failure is recorded for the sender. */
    private static Thread startPoller(RpcTransport t, String name, java.util.concurrent.atomic.AtomicBoolean stop,
                                      java.util.concurrent.atomic.AtomicReference<Throwable> failure) {
        return Thread.ofPlatform().name(name).start(() -> {
            try {
                int idle = 0;
                while (!stop.get() && t.isConnected()) {
                    if (t.poll() > 0) {
                        idle = 0;
                    } else if (++idle > IDLE_SPINS) { // idle a while: let another thread have the core if one waits
                        Thread.yield(); // (a park would sleep 50-250 us on this kernel: every call waiting then pays it)
                    } else {
                        Thread.onSpinWait();
                    }
                }
            } catch (Throwable e) {
                failure.compareAndSet(null, e);
            }
        });
    }
}
