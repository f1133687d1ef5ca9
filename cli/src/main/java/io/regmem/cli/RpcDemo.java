package io.regmem.cli;

import io.regmem.core.BufferPool;
import io.regmem.core.LeakReport;
import io.regmem.registration.CmId;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.DmaMapping;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.rpc.RpcBuffer;
import io.regmem.registration.rpc.RpcTransport;
import io.regmem.registration.rpc.SendLock;
import io.regmem.registration.rw.RwContext;
import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
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
    /** The QPs' inline room: a header with up to 192 bytes of inline arguments or result goes inline. */
    static final int INLINE_SEND = HEADER + 192;
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
    /** Options for every device this part opens ({@code --device-option}). */
    private Map<String, String> deviceOptions = Map.of();

    /** Opens this part's devices with {@code options} (the provider's device options). */
    RpcDemo withDeviceOptions(Map<String, String> options) {
        this.deviceOptions = Map.copyOf(options);
        return this;
    }

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
    /** How long calls may be in flight with none completing before the run fails ({@code -Dregmem.demo.stallSeconds}). */
    static final long STALL_NANOS = Long.getLong("regmem.demo.stallSeconds", 30) * 1_000_000_000L;

    /** Where the client connects: null runs both ends in this JVM; else {@code host:port} of a {@code regmem serve}. */
    private String connect;

    /** Connects the client to a server of another process ({@code regmem serve}) instead of running one here. */
    RpcDemo connectTo(String address) {
        this.connect = address;
        return this;
    }

    /**
     * What a client asks of a server and what a server offers: calls in flight and the largest
     * payload. The client sends its terms as the private data of its connect; a server that cannot
     * serve them rejects the request with its own, so that both sides can say what differs.
     */
    record Terms(int concurrency, int maxPayload) {
        private static final int MAGIC = 0x524D_5250; // "RMRP"
        private static final byte VERSION = 1;

        byte[] bytes() {
            return ByteBuffer.allocate(13).putInt(MAGIC).put(VERSION).putInt(concurrency).putInt(maxPayload).array();
        }

        /** The terms in private data, or null if it holds none (not a regmem demo peer, or another version). */
        static Terms parse(byte[] data) {
            if (data == null || data.length != 13) {
                return null;
            }
            ByteBuffer b = ByteBuffer.wrap(data);
            if (b.getInt() != MAGIC || b.get() != VERSION) {
                return null;
            }
            return new Terms(b.getInt(), b.getInt());
        }

        /** True if a server offering {@code server} can serve a client asking for these. */
        boolean fitIn(Terms server) {
            return concurrency >= 1 && maxPayload >= 1 && requestsFor(concurrency) <= requestsFor(server.concurrency)
                    && maxPayload <= server.maxPayload;
        }

        @Override
        public String toString() {
            return "--rpc-concurrency " + concurrency + " with payloads up to " + maxPayload + " B";
        }
    }

    /** Why the run failed, for the verdict line, when the reason is known (else null). */
    private String failureReason;

    String failure() {
        return failureReason;
    }

    static int requestsFor(int concurrency) {
        return Math.max(4, concurrency);
    }

    static QpInitAttributes clientQp(int reqs) {
        return new QpInitAttributes().maxSendWr(8 * reqs + 64).maxRecvWr(reqs + 16).maxSendSge(3).signalAll(false)
                .maxInlineData(INLINE_SEND); // small Sends go inline
    }

    static QpInitAttributes serverQp(int reqs) {
        return new QpInitAttributes().maxSendWr(16 * reqs + 64).maxRecvWr(reqs + 16).maxSendSge(3).signalAll(false)
                .maxInlineData(INLINE_SEND);
    }

    /** Calls of the single-call phase after the measured run (a server counts them with the rest). */
    static final int SINGLE_CALLS = 2000;

    static int minPayload(int[] payloads) {
        return Arrays.stream(payloads).min().orElse(0);
    }

    static int maxPayload(int[] payloads) {
        int max = 0;
        for (int p : payloads) {
            max = Math.max(max, p);
        }
        return max;
    }

    /** The server's end: its buffers, staging memory and {@link RpcDemoServer} on a QP, torn down by {@link #close}. */
    static final class ServerEnd {
        final BufferPool pool;
        final RpcBuffer buf;
        final DmaMapping stagingMap;
        final RpcDemoServer server;
        final int reqs;

        ServerEnd(ProtectionDomain pd, QueuePair qp,
                  CompletionQueue cq, Arena arena, int reqs, long slotBytes, String name) {
            this.reqs = reqs;
            pool = BufferPool.builder().name(name).build();
            buf = RpcBuffer.builder(pd, pool).maxRequests(reqs).inline(INLINE + HEADER, INLINE + HEADER).build();
            MemorySegment staging = arena.allocate(2L * reqs * slotBytes, 4096);
            stagingMap = pd.device().dmaMap(staging);
            server = new RpcDemoServer(qp, cq, buf, new SendLock(), staging, reqs, slotBytes);
        }

        /**
         * After the connection (ended in any way): the transport flushed, the rw contexts of calls that
         * never finished destroyed, buffers and memory given back; the report's parts.
         */
        String close(boolean[] clean) {
            server.transport().flushDisconnect();
            server.releaseContexts();
            int free = buf.freeRequests();
            boolean leaked = !buf.destroy().isEmpty();
            stagingMap.close();
            LeakReport leaks = pool.closeAndReport();
            clean[0] = !leaked && free == reqs && leaks.clean();
            return String.format(Locale.ROOT, "requests free %d/%d; %s", free, reqs, leaks.describe().strip());
        }
    }

    boolean run() {
        int maxPayload = maxPayload(payloads);
        int reqs = requestsFor(concurrency);
        QpInitAttributes clientQp = clientQp(reqs);
        SoftPair pair = null;
        RdmaDevice devC;
        ProtectionDomain pdC;
        CompletionQueue cqC;
        CmId idC = null;
        QueuePair qpC;
        if (connect == null) {
            pair = new SoftPair(provider, deviceOptions, 8192, clientQp, serverQp(reqs));
            devC = pair.devA;
            pdC = pair.pdA;
            cqC = pair.cqA;
            qpC = pair.qpA;
        } else {
            devC = RdmaDevice.open(provider, deviceOptions);
            pdC = devC.allocPd();
            cqC = devC.createCq(8192);
            idC = devC.createCmId();
            qpC = idC.createQp(pdC, clientQp.sendCq(cqC).recvCq(cqC));
            Terms mine = new Terms(concurrency, maxPayload);
            try {
                idC.connect(connect, mine.bytes());
                long deadline = System.nanoTime() + 30_000_000_000L;
                while (idC.connState() == CmId.ConnState.CONNECTING && System.nanoTime() < deadline) {
                    Thread.sleep(1);
                }
            } catch (RuntimeException | InterruptedException e) {
                failureReason = "cannot connect to the server at " + connect + ": " + e.getMessage();
                out.println("regmem demo: " + failureReason);
                devC.forceClose();
                return false;
            }
            if (idC.connState() != CmId.ConnState.CONNECTED) {
                Terms theirs = Terms.parse(idC.privateData());
                failureReason = theirs != null
                        ? "the server at " + connect + " refused the connection: it serves " + theirs + ", this client asks "
                                + "for " + mine + " (give both sides the same --rpc-concurrency and --rpc-payloads)"
                        : "the server at " + connect + (idC.failureReason() != null ? " did not take the connection: "
                                + idC.failureReason() : " did not accept the connection (" + idC.connState() + ")");
                out.println("regmem demo: " + failureReason);
                devC.forceClose();
                return false;
            }
        }
        Arena arena = Arena.ofShared();
        BufferPool rpcPoolC = BufferPool.builder().name("rpc-client-buffers").build();
        RpcBuffer bufC = RpcBuffer.builder(pdC, rpcPoolC).maxRequests(reqs).inline(INLINE + HEADER, INLINE + HEADER).build();
        long area = Math.max(maxPayload, 4096);
        long slotBytes = Math.max(maxPayload, 64);
        MemorySegment stagingC = arena.allocate(2L * reqs * area, 4096);
        DmaMapping stagingCMap = devC.dmaMap(stagingC); // FRWR pages must be DMA-mapped
        MemorySegment pattern = arena.allocate(slotBytes, 8);
        SplittableRandom rnd = new SplittableRandom(2026);
        for (long i = 0; i < pattern.byteSize(); i += 8) {
            pattern.set(ValueLayout.JAVA_LONG, i, rnd.nextLong());
        }
        ServerEnd serverEnd = pair == null ? null
                : new ServerEnd(pair.pdB, pair.qpB, pair.cqB, arena, reqs, slotBytes, "rpc-server-buffers");
        RpcDemoClient client = new RpcDemoClient(qpC, cqC, bufC, new SendLock(), stagingC, area, pattern, reqs);
        RpcTransport[] transports = serverEnd == null ? new RpcTransport[] {client.transport()}
                : new RpcTransport[] {client.transport(), serverEnd.server.transport()};

        // With threads: the server runs on a thread of its own, the client (sending and handling its
        // completions) on this one: one thread per end of the connection, on two cores.
        AtomicBoolean stop = new AtomicBoolean();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        List<Thread> pollers = new ArrayList<>();
        if (threads && serverEnd != null) {
            pollers.add(startPoller(transports[1], "rpc-server", stop, failure));
        }
        boolean ok = true;
        long start = System.nanoTime();
        long measuredFrom = 0;
        long elapsed = 0;
        long done = 0;
        long bytes = 0;
        Histogram latency = client.latency().copy();
        Histogram single = null;
        try {
            if (warmupNanos > 0) { // the same calls, not counted: the JIT compiles the paths first
                drive(client, transports, failure, 0, warmupNanos, false, concurrency, payloads);
                measuredFrom = client.done();
                client.resetMeasurements();
            }
            start = System.nanoTime();
            ok = drive(client, transports, failure, calls, durationNanos, progress, concurrency, payloads);
            elapsed = System.nanoTime() - start;
            done = client.done() - measuredFrom;
            bytes = client.bytes();
            latency = client.latency().copy();
            if (ok) { // then one call at a time, of the smallest payload: the latency of a single call
                client.resetMeasurements();
                ok = drive(client, transports, failure, SINGLE_CALLS, 0, false, 1, new int[] {minPayload(payloads)});
                single = client.latency().copy();
            }
        } catch (RuntimeException e) {
            failureReason = connect != null && !client.transport().isConnected()
                    ? "the server at " + connect + " went away (" + e.getMessage() + ")" : String.valueOf(e);
            out.println("regmem demo: " + failureReason);
            ok = false;
        }
        if (elapsed == 0) {
            elapsed = System.nanoTime() - start;
        }
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
        long stale = transports[0].staleCompletions() + (serverEnd == null ? 0 : transports[1].staleCompletions());
        int reqsFreeC = bufC.freeRequests();
        int repsC = bufC.replies();
        int repsFreeC = bufC.freeReplies();
        boolean leakedReqs = !bufC.destroy().isEmpty();
        boolean[] serverClean = {true};
        String serverReport = serverEnd == null ? "in its own process" : serverEnd.close(serverClean);
        stagingCMap.close();
        LeakReport leaksC = rpcPoolC.closeAndReport();
        String devS = "in its own process";
        String nameS = "server";
        if (pair != null) {
            pair.disconnect();
            pair.close();
            devS = pair.devB.resources().report();
            nameS = pair.devB.name() + " (server)";
        } else {
            idC.disconnect();
            idC.destroyQp();
            idC.close();
            cqC.close();
            pdC.close();
            devC.close();
        }
        arena.close();
        String devCReport = devC.resources().report();

        out.printf(Locale.ROOT, "%nRPC over RDMA (%s provider%s): %,d calls in %.2f s, %,.0f calls/s, %,.1f MiB/s of arguments and results; "
                + "payloads %s B, %d concurrent, %s%n", provider, connect == null ? "" : ", server at " + connect, done,
                elapsed / 1e9, done / (elapsed / 1e9),
                bytes / (elapsed / 1e9) / (1 << 20), Arrays.toString(payloads), concurrency,
                connect != null ? "client on one thread, server in its own process"
                        : threads ? "client and server on a thread each" : "one thread");
        if (warmupNanos > 0) {
            out.printf(Locale.ROOT, "Measured after a warm-up of %.1f s: %,d calls before it, checked the same way, not counted%n",
                    warmupNanos / 1e9, measuredFrom);
        }
        out.printf(Locale.ROOT, "Call latency under that load (us, %d calls in flight, payloads up to %,d B: a call waits for "
                + "the ones ahead of it)%n  p50 %.2f   p90 %.2f   p99 %.2f   p99.9 %.2f   max %.1f%n", concurrency, maxPayload,
                latency.getValueAtPercentile(50) / 1e3, latency.getValueAtPercentile(90) / 1e3,
                latency.getValueAtPercentile(99) / 1e3, latency.getValueAtPercentile(99.9) / 1e3, latency.getMaxValue() / 1e3);
        if (single != null) {
            out.printf(Locale.ROOT, "Single-call latency (us, one call in flight, %d B, %,d calls after the run)%n"
                    + "  p50 %.2f   p90 %.2f   p99 %.2f   p99.9 %.2f   max %.1f%n", minPayload(payloads), single.getTotalCount(),
                    single.getValueAtPercentile(50) / 1e3, single.getValueAtPercentile(90) / 1e3,
                    single.getValueAtPercentile(99) / 1e3, single.getValueAtPercentile(99.9) / 1e3, single.getMaxValue() / 1e3);
        }
        out.printf(Locale.ROOT, "Replies checked byte by byte: %,d wrong; calls ended by a failed connection: %,d%n",
                client.errors(), client.failed());
        out.printf(Locale.ROOT, "Requests free after the run: client %d/%d, server %s; client replies %d made, %d free; "
                + "stale completions %d%n", reqsFreeC, reqs, serverReport, repsC, repsFreeC, stale);
        out.printf(Locale.ROOT, "Chunks: each registered for its call only (FRWR: REG_MR before the Send, LOCAL_INV before "
                + "the call completes); %d MRs made%n", mrsMade);
        out.printf(Locale.ROOT, "Devices: %s (client): %s; %s: %s%n", devC.name(), devCReport, nameS, devS);
        out.printf(Locale.ROOT, "Pools: %s%n", leaksC.describe().strip());
        return ok && client.errors() == 0 && !leakedReqs && reqsFreeC == reqs && serverClean[0] && leaksC.clean()
                && devCReport.equals("no live objects") && (pair == null || devS.equals("no live objects"))
                && (durationNanos > 0 || done == calls);
    }

    /** The next call's number; calls of the warm-up and the measured run are numbered on. */
    private int xid;
    private int idle;

    /**
     * Sends calls and polls until {@code calls} more calls completed, or for {@code nanos} (then
     * waits for the calls in flight). False if the connection failed.
     */
    private boolean drive(RpcDemoClient client, RpcTransport[] transports, AtomicReference<Throwable> failure,
                          long calls, long nanos, boolean progress, int inFlight, int[] sizes) {
        long start = System.nanoTime();
        long lastPrint = start;
        long base = client.done();
        long last = xid + calls;
        long lastDone = base;
        long lastChange = start;
        while (nanos > 0 ? System.nanoTime() - start < nanos || xid > client.done() : client.done() - base < calls) {
            boolean more = nanos > 0 ? System.nanoTime() - start < nanos : xid < last;
            while (more && xid - client.done() < Math.min(inFlight, client.credits() + inFlight)
                    && client.start(xid, sizes[xid % sizes.length], concurrency)) {
                xid++;
                more = nanos > 0 ? System.nanoTime() - start < nanos : xid < last;
            }
            if (!threads && transports.length > 1) {
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
            if (!transports[0].isConnected() || (transports.length > 1 && !transports[1].isConnected())) {
                failureReason = connect != null ? "the server at " + connect + " went away (the connection failed with "
                        + client.calls() + " calls in flight)" : "the connection failed";
                out.println("regmem demo: " + failureReason);
                return false;
            }
            long now = System.nanoTime();
            long done = client.done();
            if (done != lastDone) {
                lastDone = done;
                lastChange = now;
            } else if (xid > done && now - lastChange > STALL_NANOS) {
                // Bounded: calls in flight and none completed for a long time is a failure, with what is known.
                QueuePair qp = transports[0].qp();
                failureReason = "no call completed for " + (STALL_NANOS / 1_000_000_000L) + " s with " + (xid - done)
                        + " calls in flight (" + qp + ": " + qp.state() + ", sends outstanding " + qp.outstandingSends()
                        + ", receives posted " + qp.outstandingRecvs() + ", credits " + client.credits()
                        + (qp.diagnostics().isEmpty() ? "" : "; " + qp.diagnostics()) + ")";
                out.println("regmem demo: " + failureReason);
                return false;
            }
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
    private static Thread startPoller(RpcTransport t, String name, AtomicBoolean stop,
                                      AtomicReference<Throwable> failure) {
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
