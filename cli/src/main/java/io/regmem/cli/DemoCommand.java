package io.regmem.cli;

import io.regmem.core.BufferPool;
import io.regmem.core.Errno;
import io.regmem.core.LeakReport;
import io.regmem.core.PoolStats;
import io.regmem.core.PooledBuffer;
import io.regmem.core.RdmaException;
import io.regmem.core.SafetyMode;
import io.regmem.core.ScatterList;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.spi.RdmaProvider;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.ServiceLoader;
import java.util.SplittableRandom;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.Callable;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Collectors;
import org.HdrHistogram.Histogram;
import org.jctools.queues.SpscArrayQueue;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * The main job. First a storage-style allocator workload. Each worker builds requests of a 64-byte
 * header, a 4 KiB-page payload list and an occasional 64 KiB block, describes each request as a
 * {@link ScatterList}, checks the bytes, and frees half of the buffers itself and hands the other
 * half to the next worker, which frees them (cross-thread free). It prints latency percentiles of
 * allocate and free, the pool's accounting and the leak report. Then {@link RdmaDemo}: the same
 * memory registered and moved by RDMA WRITE, READ and SEND between two soft devices.
 */
@Command(name = "demo", mixinStandardHelpOptions = true,
        description = {"Run regmem's four workloads on one provider, check every byte, and end with PASS or FAIL:",
            "  1. RPC over RDMA: a client and a server (RpcTransport) exchange calls with registered buffers, "
                + "request pools and the send-context ring; latency percentiles per payload size.",
            "  2. Allocator: worker threads allocate, write, describe in scatter lists and free buffers (half of "
                + "them freed on another thread); allocate/free latency and pool statistics.",
            "  3. RDMA loopback: WRITE and READ between two queue pairs, every byte compared.",
            "  4. Storage (where io_uring works): a file read with READ_FIXED into registered buffers and served "
                + "by RDMA WRITE from the same memory, and written back with WRITE_FIXED.",
            "A part is skipped with 0 as its count. Exit status 0 on PASS, 1 on FAIL, 2 on a bad option "
                + "(a --device-option the provider refuses included)."})
final class DemoCommand implements Callable<Integer> {

    @Option(names = "--threads", description = "Worker threads, 1 to 64 (default: ${DEFAULT-VALUE}).", defaultValue = "2")
    int threads;

    @Option(names = "--requests", description = "Requests per worker, at least 1 (default: ${DEFAULT-VALUE}).", defaultValue = "200000")
    int requests;

    @Option(names = "--safety", description = "FAST, CHECKED or PARANOID (default: ${DEFAULT-VALUE}).", defaultValue = "CHECKED")
    SafetyMode safety;

    @Option(names = "--rdma-requests", description = "Requests of the RDMA loopback part (default: ${DEFAULT-VALUE}; 0 skips it).",
            defaultValue = "20000")
    int rdmaRequests;

    @Option(names = "--rdma-size", description = "Bytes per RDMA request, 8 to 16 MiB (default: ${DEFAULT-VALUE}).", defaultValue = "4096")
    int rdmaSize;

    @Option(names = "--rpc-calls", description = "Calls of the RPC-over-RDMA part (default: ${DEFAULT-VALUE}; 0 skips it).",
            defaultValue = "100000")
    long rpcCalls;

    @Option(names = "--rpc-duration", description = "Run the RPC part for this many seconds (1 to 86400) instead of a call count.")
    Integer rpcSeconds;

    @Option(names = "--rpc-warmup", description = "Seconds of calls before the RPC part is measured, 0 to 600 (default: "
            + "${DEFAULT-VALUE}): the JIT compiles the paths first; those calls are checked but not counted.", defaultValue = "2")
    int rpcWarmupSeconds;

    @Option(names = "--rpc-payloads", split = ",", description = "Argument and result sizes in bytes, used in turn "
            + "(default: ${DEFAULT-VALUE}); above 1024 they go by RDMA READ and WRITE; each 1 to 2 MiB.",
            defaultValue = "64,512,4096,65536")
    int[] rpcPayloads;

    @Option(names = "--rpc-concurrency", description = "Calls in flight, 1 to 1024 (default: ${DEFAULT-VALUE}).", defaultValue = "16")
    int rpcConcurrency;

    @Option(names = "--rpc-threads", description = "Run the server on a thread of its own while the main thread sends "
            + "the calls and handles their completions: the two ends of the connection progress in parallel. By "
            + "default one thread drives both ends.")
    boolean rpcThreads;

    @Option(names = "--provider", description = "RDMA provider (default: soft, the embedded provider; ucx with --connect).")
    String provider;

    @Option(names = "--device-option", paramLabel = "KEY=VALUE", description = "An option for every device the demo "
            + "opens (and its child server), as RdmaDevice.open(provider, options) takes it; repeatable. ucx and shm: "
            + "secret=TEXT, secretFile=PATH (the connection secret; else REGMEM_SECRET or ~/.regmem/secret), "
            + "handshakeTimeoutMillis=N, progressThread=true, ...")
    Map<String, String> deviceOptions = new LinkedHashMap<>();

    @Option(names = "--connect", description = "host:port of a 'regmem serve': the RPC part's server runs there "
            + "(ucx, shm). Without it, --provider ucx or shm starts one as a child process on the loopback.")
    String connect;

    @Option(names = "--storage-mib", description = "Size of the storage part's file in MiB, 1 to 65536 (default: "
            + "${DEFAULT-VALUE}; 0 skips the part).", defaultValue = "256")
    long storageMib;

    @Option(names = "--storage-calls", description = "Block reads of the storage part; a quarter as many writes "
            + "(default: ${DEFAULT-VALUE}).", defaultValue = "10000")
    long storageCalls;

    @Option(names = "--storage-block", description = "Bytes per block, a multiple of 4096 up to 4 MiB (default: "
            + "${DEFAULT-VALUE}).", defaultValue = "65536")
    int storageBlock;

    @Option(names = "--storage-depth", description = "Calls in flight, 1 to 64 (default: ${DEFAULT-VALUE}).", defaultValue = "16")
    int storageDepth;

    @Option(names = "--quiet-progress", description = "No progress line (it is written only to a terminal anyway).")
    boolean quietProgress;

    @Option(names = "--jfr", paramLabel = "FILE", description = "Record regmem's JFR events (registrations, cache misses, "
            + "chunk map/unmap, QP errors, connections, leaks) to FILE and count them at the end.")
    Path jfr;

    @picocli.CommandLine.Spec
    picocli.CommandLine.Model.CommandSpec spec;

    @picocli.CommandLine.Mixin
    MulticastDemo.Options multicast = new MulticastDemo.Options();

    /** Upper bounds of the options, each one a value the demo was run with. */
    static final int MAX_THREADS = 64;
    static final int MAX_RPC_CONCURRENCY = 1024;
    /** An RPC payload goes by one FRWR MR of at most 512 pages of 4 KiB. */
    static final int MAX_RPC_PAYLOAD = 2 << 20;
    static final int MAX_RDMA_SIZE = 16 << 20;

    /** regmem's modules in this JVM's boot layer (the ones a child needs native access for). */
    private static List<String> nativeModules(Module self) {
        return self.getLayer().modules().stream().map(Module::getName).filter(n -> n.startsWith("io.regmem.")).sorted().toList();
    }

    /** Where the child server listens, from its listening line. */
    private String childAddress;

    /** Lines the child server printed (read by a thread of their own). */
    private final BlockingQueue<String> serverLines = new LinkedBlockingQueue<>();

    /**
     * Starts {@code regmem serve} for one connection as a child JVM listening at {@code address}, and
     * waits (at most 30 s) until it listens; null (its output printed) if it does not.
     */
    private Process startServer(String address) throws Exception {
        String javaBin = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        ProcessBuilder b = new ProcessBuilder(javaBin, "--sun-misc-unsafe-memory-access=allow");
        Module self = RegmemCommand.class.getModule();
        if (self.isNamed()) { // on the module path: the child runs the same modules the same way
            b.command().addAll(List.of("--enable-native-access=" + String.join(",", nativeModules(self)),
                    "--module-path", System.getProperty("jdk.module.path"), "--add-modules", "ALL-MODULE-PATH",
                    "-m", self.getName() + "/" + RegmemCommand.class.getName()));
        } else {
            b.command().addAll(List.of("--enable-native-access=ALL-UNNAMED", "-cp", System.getProperty("java.class.path"),
                    RegmemCommand.class.getName()));
        }
        b.command().addAll(List.of("serve", "--provider", provider, "--listen", address, "--connections", "1",
                "--rpc-concurrency", Integer.toString(rpcConcurrency), "--rpc-payloads",
                Arrays.stream(rpcPayloads).mapToObj(Integer::toString).collect(Collectors.joining(","))));
        deviceOptions.forEach((k, v) -> b.command().addAll(List.of("--device-option", k + "=" + v)));
        b.redirectErrorStream(true);
        Process p = b.start();
        Thread.ofPlatform().daemon().name("regmem-demo-server-output").start(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream()))) {
                for (String line; (line = r.readLine()) != null; ) {
                    serverLines.add(line);
                }
            } catch (IOException ignored) {
                // the child ended
            }
        });
        long deadline = System.nanoTime() + 30_000_000_000L;
        StringBuilder seen = new StringBuilder();
        while (System.nanoTime() < deadline) {
            String line = serverLines.poll(100, TimeUnit.MILLISECONDS);
            if (line != null) {
                seen.append("  server: ").append(line).append('\n');
                if (line.startsWith("regmem serve: listening at ")) {
                    childAddress = line.substring("regmem serve: listening at ".length()).split(" ", 2)[0];
                    System.out.printf(Locale.ROOT, "regmem demo: started the RPC server as a child process (pid %d) at %s%n",
                            p.pid(), childAddress);
                    return p;
                }
            } else if (!p.isAlive()) {
                break;
            }
        }
        p.destroyForcibly();
        System.out.print(seen);
        System.out.println("regmem demo: the child server did not start");
        return null;
    }

    /** Waits for the child server to end (it serves one connection) and prints what it said; true if it was clean. */
    private boolean awaitServer(PrintStream out, Process child) throws InterruptedException {
        boolean ended = child.waitFor(30, TimeUnit.SECONDS);
        if (!ended) {
            child.destroyForcibly();
        }
        Thread.sleep(50); // the last lines
        for (String line; (line = serverLines.poll()) != null; ) {
            if (line.startsWith("regmem serve:")) {
                out.println("  server: " + line.substring("regmem serve: ".length()));
            }
        }
        return ended && child.exitValue() == 0;
    }

    /** The providers present (found as {@code RdmaDevice.open} finds them). */
    static List<String> providers() {
        List<String> names = new ArrayList<>();
        for (RdmaProvider p : ServiceLoader.load(RdmaProvider.class,
                RdmaProvider.class.getClassLoader())) {
            names.add(p.name());
        }
        return names;
    }

    /** Every option checked before any work: the first bad one is one line and exit status 2. */
    private boolean optionsOk() {
        OptionCheck check = new OptionCheck("demo", spec.commandLine().getErr())
                .range("--threads", threads, 1, MAX_THREADS)
                .range("--requests", requests, 1, 1_000_000_000)
                .range("--rdma-requests", rdmaRequests, 0, 1_000_000_000)
                .range("--rdma-size", rdmaSize, 8, MAX_RDMA_SIZE)
                .range("--rpc-calls", rpcCalls, 0, 1_000_000_000_000L)
                .range("--rpc-warmup", rpcWarmupSeconds, 0, 600)
                .eachInRange("--rpc-payloads", rpcPayloads, 1, MAX_RPC_PAYLOAD)
                .range("--rpc-concurrency", rpcConcurrency, 1, MAX_RPC_CONCURRENCY)
                .oneOf("--provider", provider, providers(), "a known provider")
                .range("--storage-mib", storageMib, 0, 65536)
                .range("--storage-calls", storageCalls, 1, 1_000_000_000)
                .range("--storage-block", storageBlock, 4096, 4 << 20)
                .range("--storage-depth", storageDepth, 1, 64)
                .and(multicast::check)
                .rule(storageBlock % 4096 == 0, "--storage-block " + storageBlock + " is not a multiple of 4096")
                .rule(storageMib == 0 || storageMib * (1 << 20) >= (long) storageBlock * storageDepth * 8,
                        "--storage-mib " + storageMib + " holds fewer than 8 x --storage-depth blocks");
        if (rpcSeconds != null) {
            check.range("--rpc-duration", rpcSeconds, 1, 86_400);
        }
        Path jfrDir = jfr == null ? null : jfr.toAbsolutePath().getParent();
        check.rule(jfrDir == null || Files.isDirectory(jfrDir), "--jfr " + jfr + ": the directory " + jfrDir
                + " does not exist");
        return check.ok();
    }

    /**
     * The device options checked by the provider itself before any work starts (a device opened and
     * closed): one it refuses ({@code EINVAL}) is a bad option, exit status 2 with its message.
     */
    private boolean deviceOptionsOk() {
        if (deviceOptions.isEmpty()) {
            return true;
        }
        try (RdmaDevice d = RdmaDevice.open(provider, deviceOptions)) {
            return d != null;
        } catch (RdmaException e) {
            if (e.errno() != Errno.EINVAL) {
                return true; // not an option's fault (a provider missing): the run says so
            }
            spec.commandLine().getErr().println("regmem demo: --device-option: " + e.getMessage());
            return false;
        }
    }

    @Override
    public Integer call() throws Exception {
        PrintStream out = System.out;
        if (provider == null) {
            provider = connect != null ? "ucx" : "soft";
        }
        if (!optionsOk() || !deviceOptionsOk()) {
            return OptionCheck.USAGE;
        }
        if (connect != null && !SoftPair.connectsProcesses(provider)) {
            spec.commandLine().getErr().println("regmem demo: --connect needs --provider ucx or shm (soft reaches only this JVM)");
            return OptionCheck.USAGE;
        }
        if (multicast.enabled) {
            return MulticastDemo.main(multicast, provider, deviceOptions, out, spec.commandLine().getErr());
        }
        if (System.console() == null) {
            quietProgress = true; // a log gets no carriage-return progress line
        }
        FlightRecording recording = jfr == null ? null : FlightRecording.start(jfr);
        List<String> failures = new ArrayList<>();
        try {
            run(out, failures);
        } catch (RuntimeException e) { // a part that cannot go on: the verdict says which error stopped it
            out.flush();
            failures.add("stopped by " + (e instanceof RdmaException ? e.getMessage() : e.toString()));
        }
        if (recording != null) {
            recording.stopAndSummarize(out);
        }
        out.println();
        out.println(failures.isEmpty()
                ? "PASS: every byte checked, nothing leaked (RPC, allocator, RDMA loopback and storage parts as run above)"
                : "FAIL: " + String.join("; ", failures));
        return failures.isEmpty() ? 0 : 1;
    }

    /** Why the RPC part failed, when it knows. */
    private String rpcFailure;

    private int run(PrintStream out, List<String> failures) throws Exception {
        boolean rpcOk = true;
        boolean rpc = rpcCalls > 0 || rpcSeconds != null;
        String server = connect;
        Process child = null;
        if (rpc && server == null && SoftPair.connectsProcesses(provider)) {
            child = startServer("127.0.0.1:0"); // the system picks the port; the child's listening line names it
            server = childAddress;
            if (child == null) {
                failures.add("the RPC server child process did not start");
                return 1;
            }
        }
        if (rpc) {
            out.printf(Locale.ROOT, "regmem demo: RPC over RDMA, %s, payloads %s B, %d in flight%n",
                    rpcSeconds != null ? rpcSeconds + " s" : String.format(Locale.ROOT, "%,d calls", rpcCalls),
                    Arrays.toString(rpcPayloads), rpcConcurrency);
            RpcDemo demo = new RpcDemo(out, rpcCalls, rpcSeconds == null ? 0 : rpcSeconds * 1000L,
                    rpcWarmupSeconds * 1000L, rpcPayloads, rpcConcurrency,
                    !quietProgress, rpcThreads, provider);
            rpcOk = (server == null ? demo : demo.connectTo(server)).withDeviceOptions(deviceOptions).run();
            rpcFailure = demo.failure();
            if (child != null) {
                rpcOk &= awaitServer(out, child);
            }
        }
        out.printf(Locale.ROOT, "%nAllocator workload: %d workers x %d requests, safety %s, JDK %s%n", threads, requests, safety,
                Runtime.version());
        BufferPool pool = BufferPool.builder().name("demo").safetyMode(safety).build();
        @SuppressWarnings({"unchecked", "rawtypes"})
        SpscArrayQueue<PooledBuffer>[] handoff = new SpscArrayQueue[threads];
        for (int i = 0; i < threads; i++) {
            handoff[i] = new SpscArrayQueue<>(1 << 14);
        }
        Histogram allocNs = new Histogram(3);
        Histogram freeNs = new Histogram(3);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        long[] bytesMoved = new long[threads];
        List<Thread> workers = new ArrayList<>();
        long start = System.nanoTime();
        for (int w = 0; w < threads; w++) {
            int me = w;
            Thread t = new Thread(() -> {
                try {
                    bytesMoved[me] = work(pool, me, handoff[me], handoff[(me + 1) % threads], allocNs, freeNs);
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            }, "demo-worker-" + w);
            workers.add(t);
            t.start();
        }
        for (Thread t : workers) {
            t.join();
        }
        // whatever is still in flight between workers is freed here
        for (SpscArrayQueue<PooledBuffer> q : handoff) {
            PooledBuffer b;
            while ((b = q.poll()) != null) {
                b.close();
            }
        }
        long elapsed = System.nanoTime() - start;
        if (failure.get() != null) {
            pool.closeAndReport();
            throw new IllegalStateException("demo worker failed", failure.get());
        }
        long total = 0;
        for (long b : bytesMoved) {
            total += b;
        }
        PoolStats stats = pool.stats();
        out.printf(Locale.ROOT, "%nWorkload: %,d requests in %.2f s (%,.0f requests/s), %,d MiB described in scatter lists%n",
                (long) threads * requests, elapsed / 1e9, threads * (double) requests / (elapsed / 1e9), total >> 20);
        out.printf(Locale.ROOT, "  (a request allocates a 64 B header and 1-16 pages, writes and describes them in one scatter "
                + "list, checks and frees them: one request, several allocations)%n");
        out.printf(Locale.ROOT, "%nLatency (ns)       p50      p90      p99    p99.9      max%n");
        printLatency(out, "allocate", allocNs);
        printLatency(out, "free", freeNs);
        out.printf(Locale.ROOT, "%nPool '%s' (%s, chunks from %s)%n", stats.pool(), pool.safetyMode(), pool.chunkSource().name());
        out.printf(Locale.ROOT, "  reserved      %,14d bytes in %d chunk(s) of %d MiB%n", stats.reservedBytes(), stats.chunks(),
                pool.chunkSize() >> 20);
        out.printf(Locale.ROOT, "  in use        %,14d bytes in %d live buffers%n", stats.inUseBytes(), stats.liveBuffers());
        out.printf(Locale.ROOT, "  allocations   %,14d   frees %,d (buffers)%n", stats.allocations(), stats.frees());
        out.printf(Locale.ROOT, "  cache hits    %13.2f%%%n", 100 * stats.cacheHitRate());
        out.printf(Locale.ROOT, "  size class     slots   live   allocations%n");
        for (PoolStats.ClassStats c : stats.classes()) {
            out.printf(Locale.ROOT, "  %8d B %8d %6d %,13d%n", c.size(), c.slots(), c.live(), c.allocations());
        }
        LeakReport report = pool.closeAndReport();
        out.printf(Locale.ROOT, "%nClose: %s%n", report.describe().strip());
        boolean rdmaOk = rdmaRequests <= 0 || new RdmaDemo(out, rdmaRequests, rdmaSize, provider).withDeviceOptions(deviceOptions).run();
        boolean storageOk = storageMib <= 0 || !StorageDemo.available(out)
                || new StorageDemo(out, provider, storageMib << 20, storageBlock, storageDepth, storageCalls,
                        Math.max(1, storageCalls / 4), Path.of(System.getProperty("java.io.tmpdir")))
                        .withDeviceOptions(deviceOptions).run();
        if (!rpcOk) {
            failures.add(rpcFailure != null ? "the RPC part failed: " + rpcFailure : "the RPC part failed (see its report above)");
        }
        if (!report.clean()) {
            failures.add("the allocator pool closed with buffers still out");
        }
        if (!rdmaOk) {
            failures.add("the RDMA loopback part failed (see its report above)");
        }
        if (!storageOk) {
            failures.add("the storage part failed (see its report above)");
        }
        return failures.isEmpty() ? 0 : 1;
    }

    private long work(BufferPool pool, int me, SpscArrayQueue<PooledBuffer> inbox, SpscArrayQueue<PooledBuffer> next,
                      Histogram allocNs, Histogram freeNs) {
        SplittableRandom rnd = new SplittableRandom(42 + me);
        Histogram myAlloc = new Histogram(3);
        Histogram myFree = new Histogram(3);
        ScatterList sg = new ScatterList(32, true, 64);
        PooledBuffer[] held = new PooledBuffer[18];
        long described = 0;
        for (int r = 0; r < requests; r++) {
            int n = 0;
            sg.clear();
            int pages = 1 + rnd.nextInt(16);
            for (int i = 0; i <= pages; i++) {
                long size = i == 0 ? 64 : (rnd.nextInt(32) == 0 ? 65536 : 4096);
                long t0 = System.nanoTime();
                PooledBuffer b = pool.allocate(size);
                myAlloc.recordValue(System.nanoTime() - t0);
                b.segment().set(ValueLayout.JAVA_LONG, 0, ((long) me << 32) | r);
                sg.add(b, 0, size);
                held[n++] = b;
            }
            described += sg.totalLength();
            for (int i = 0; i < n; i++) {
                PooledBuffer b = held[i];
                if (b.segment().get(ValueLayout.JAVA_LONG, 0) != (((long) me << 32) | r)) {
                    throw new IllegalStateException("buffer " + b + " was overwritten while owned");
                }
                if ((i & 1) == 0 || !next.offer(b)) {
                    long t0 = System.nanoTime();
                    b.close();
                    myFree.recordValue(System.nanoTime() - t0);
                }
            }
            PooledBuffer in;
            while ((in = inbox.poll()) != null) {
                long t0 = System.nanoTime();
                in.close();
                myFree.recordValue(System.nanoTime() - t0);
            }
        }
        synchronized (allocNs) {
            allocNs.add(myAlloc);
            freeNs.add(myFree);
        }
        return described;
    }

    private static void printLatency(PrintStream out, String what, Histogram h) {
        out.printf(Locale.ROOT, "  %-10s %8d %8d %8d %8d %,10d%n", what, h.getValueAtPercentile(50), h.getValueAtPercentile(90),
                h.getValueAtPercentile(99), h.getValueAtPercentile(99.9), h.getMaxValue());
    }
}
