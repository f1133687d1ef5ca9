package io.regmem.bench;

import io.regmem.cli.OptionCheck;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.Callable;
import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;
import org.openjdk.jmh.results.Result;
import org.openjdk.jmh.results.RunResult;
import org.openjdk.jmh.results.format.ResultFormatType;
import org.openjdk.jmh.runner.BenchmarkList;
import org.openjdk.jmh.runner.BenchmarkListEntry;
import org.openjdk.jmh.runner.Runner;
import org.openjdk.jmh.runner.options.ChainedOptionsBuilder;
import org.openjdk.jmh.runner.options.OptionsBuilder;
import org.openjdk.jmh.runner.options.TimeValue;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * Runs the allocator benchmarks with JMH and {@code -prof gc} in a short profile and prints
 * Markdown tables of nanoseconds, bytes allocated per operation and ratios to the peers (a ratio
 * above 1 means regmem is faster). README's tables are copied from this output.
 */
@Command(name = "bench", mixinStandardHelpOptions = true,
        description = "Run the JMH benchmarks beside their peers and print ratio tables.")
final class BenchCommand implements Callable<Integer> {

    @Option(names = "--include", description = "Regex of benchmarks to run (default: ${DEFAULT-VALUE}).",
            defaultValue = "io.regmem.bench.(AllocatorBenchmark|CrossThreadBenchmark|SoftWriteBenchmark|RegistrationCacheBenchmark"
                    + "|RwContextBenchmark|RwWriteBenchmark|RpcBufferBenchmark|SendCtxRingBenchmark|GracePeriodBenchmark)")
    String include;

    @Option(names = "--warmup", description = "Warm-up iterations of 1 s, 0 to 100 (default: ${DEFAULT-VALUE}).", defaultValue = "3")
    int warmup;

    @Option(names = "--iterations", description = "Measured iterations of 1 s, 1 to 100 (default: ${DEFAULT-VALUE}).", defaultValue = "5")
    int iterations;

    @Option(names = "--forks", description = "JVM forks per benchmark, 0 (in this JVM) to 20 (default: ${DEFAULT-VALUE}).", defaultValue = "1")
    int forks;

    @Option(names = "--json", description = "Also write JMH's JSON results to this file.")
    String json;

    @Option(names = "--size", split = ",", description = "Override the benchmarks' size parameter, e.g. --size 4096.")
    String[] sizes;

    @Option(names = "--param", description = "Set a benchmark parameter, NAME=V1[,V2...], e.g. --param job=randread-4k-direct.")
    Map<String, String> params;

    @picocli.CommandLine.Spec
    picocli.CommandLine.Model.CommandSpec spec;

    /** Every option checked before JMH starts: the first bad one is one line and exit status 2. */
    private boolean optionsOk() {
        OptionCheck check = new OptionCheck("bench", spec.commandLine().getErr())
                .range("--warmup", warmup, 0, 100)
                .range("--iterations", iterations, 1, 100)
                .range("--forks", forks, 0, 20);
        boolean regexOk = true;
        try {
            Pattern.compile(include);
        } catch (PatternSyntaxException e) {
            regexOk = false;
            check.rule(false, "--include '" + include + "' is not a regular expression: " + e.getDescription());
        }
        if (regexOk) {
            Set<String> all = new TreeSet<>();
            Pattern p = Pattern.compile(include);
            boolean any = false;
            for (BenchmarkListEntry e : BenchmarkList.defaultList()
                    .getAll(null, List.of())) {
                all.add(e.getUserClassQName());
                any |= p.matcher(e.getUsername()).find(); // as JMH matches its includes
            }
            check.rule(any, "--include '" + include + "' matches no benchmark (the benchmarks: "
                    + String.join(", ", all.stream().map(n -> n.substring(n.lastIndexOf('.') + 1)).toList()) + ")");
        }
        if (sizes != null) {
            for (String size : sizes) {
                check.rule(size.matches("[1-9][0-9]{0,9}"), "--size '" + size + "' is not a size: allowed 1 to 9999999999 bytes");
            }
        }
        if (json != null) {
            Path dir = Path.of(json).toAbsolutePath().getParent();
            check.rule(dir != null && Files.isDirectory(dir) && Files.isWritable(dir),
                    "--json '" + json + "': directory " + dir + " does not exist or is not writable");
        }
        return check.ok();
    }

    @Override
    public Integer call() throws Exception {
        if (!optionsOk()) {
            return OptionCheck.USAGE;
        }
        ChainedOptionsBuilder opts = new OptionsBuilder()
                .include(include)
                .addProfiler("gc")
                .warmupIterations(warmup)
                .warmupTime(TimeValue.seconds(1))
                .measurementIterations(iterations)
                .measurementTime(TimeValue.seconds(1))
                .forks(forks)
                .shouldFailOnError(true);
        if (sizes != null && sizes.length > 0) {
            opts.param("size", sizes);
        }
        if (params != null) {
            params.forEach((k, v) -> opts.param(k, v.split(",")));
        }
        if (json != null) {
            opts.resultFormat(ResultFormatType.JSON).result(json);
        }
        Collection<RunResult> results = new Runner(opts.build()).run();
        print(System.out, results);
        return 0;
    }

    /** One measured benchmark: ns/op with its error, and B/op from the gc profiler. */
    record Row(String method, String size, double ns, double error, double bytesPerOp) {
    }

    @SuppressWarnings("rawtypes") // JMH gives its secondary results as raw Result
    static void print(PrintStream out, Collection<RunResult> results) {
        Map<String, Map<String, Row>> bySize = new LinkedHashMap<>();
        List<Row> cross = new ArrayList<>();
        Map<String, Map<String, Row>> soft = new LinkedHashMap<>();
        Map<String, Row> cacheRows = new LinkedHashMap<>();
        Map<String, Map<String, Row>> rw = new LinkedHashMap<>(); // entries -> path -> row
        Map<String, Map<String, Row>> rwWrite = new LinkedHashMap<>(); // path -> method -> row
        Map<String, Row> rpc = new LinkedHashMap<>(); // method -> row (ns/op or ops/us)
        Map<String, Row> grace = new LinkedHashMap<>(); // method or group -> row
        Map<String, Map<String, Row>> ucxReg = new LinkedHashMap<>(); // size -> method -> row
        Map<String, Map<String, Row>> ucxPut = new LinkedHashMap<>(); // "transport size" -> method -> row
        Map<String, Map<String, double[]>> storage = new LinkedHashMap<>(); // job -> engine -> {ios/s, cpu ns/io, B/op}
        Map<String, Row> nops = new LinkedHashMap<>(); // method -> row
        for (RunResult r : results) {
            String label = r.getParams().getBenchmark();
            String method = label.substring(label.lastIndexOf('.') + 1);
            String size = r.getParams().getParam("size");
            double norm = gcNorm(r.getSecondaryResults());
            if (label.contains("CrossThreadBenchmark")) {
                for (var e : r.getSecondaryResults().entrySet()) {
                    if (e.getKey().endsWith("Allocate") || e.getKey().endsWith("Free")) {
                        cross.add(new Row(e.getKey(), size, e.getValue().getScore(), e.getValue().getScoreError(), norm));
                    }
                }
            } else if (label.contains("RwContextBenchmark")) {
                Result<?> p = r.getPrimaryResult();
                String path = r.getParams().getParam("path");
                rw.computeIfAbsent(r.getParams().getParam("entries"), k -> new LinkedHashMap<>())
                        .put(path, new Row(method, path, p.getScore(), p.getScoreError(), norm));
            } else if (label.contains("GracePeriodBenchmark")) {
                Result<?> p = r.getPrimaryResult();
                grace.put(method, new Row(method, p.getScoreUnit(), p.getScore(), p.getScoreError(), norm));
            } else if (label.contains("RpcBufferBenchmark") || label.contains("SendCtxRingBenchmark")) {
                Result<?> p = r.getPrimaryResult();
                String requests = r.getParams().getParam("maxRequests"); // the ring's size, if the benchmark has one
                String at = requests == null ? "" : "@" + requests;
                rpc.put(method + at, new Row(method + at, p.getScoreUnit(), p.getScore(), p.getScoreError(), norm));
                for (var e : r.getSecondaryResults().entrySet()) {
                    if (e.getKey().startsWith("ring") || e.getKey().startsWith("spsc") || e.getKey().startsWith("signaled")) {
                        rpc.put(e.getKey() + at, new Row(e.getKey() + at, e.getValue().getScoreUnit(), e.getValue().getScore(),
                                e.getValue().getScoreError(), norm));
                    }
                }
            } else if (label.contains("RwWriteBenchmark")) {
                Result<?> p = r.getPrimaryResult();
                String path = r.getParams().getParam("path");
                rwWrite.computeIfAbsent(path, k -> new LinkedHashMap<>())
                        .put(method, new Row(method, path, p.getScore(), p.getScoreError(), norm));
            } else if (label.contains("UcxPutBenchmark")) {
                Result<?> p = r.getPrimaryResult();
                ucxPut.computeIfAbsent(r.getParams().getParam("transport") + "/" + r.getParams().getParam("mode") + " " + size,
                        k -> new LinkedHashMap<>())
                        .put(method, new Row(method, size, p.getScore(), p.getScoreError(), norm));
            } else if (label.contains("UringNopBenchmark")) {
                Result<?> p = r.getPrimaryResult();
                nops.put(method, new Row(method, null, p.getScore(), p.getScoreError(), norm));
            } else if (label.contains("UringBenchmark")) {
                Result<?> ios = r.getSecondaryResults().get("ios");
                Result<?> cpu = r.getSecondaryResults().get("cpuNs");
                if (ios != null && cpu != null) {
                    storage.computeIfAbsent(r.getParams().getParam("job"), k -> new LinkedHashMap<>())
                            .put(r.getParams().getParam("engine"), new double[] {ios.getScore(), cpu.getScore() / ios.getScore(),
                                    norm});
                }
            } else if (label.contains("UcxRegistrationBenchmark")) {
                Result<?> p = r.getPrimaryResult();
                ucxReg.computeIfAbsent(size, k -> new LinkedHashMap<>())
                        .put(method, new Row(method, size, p.getScore(), p.getScoreError(), norm));
            } else if (label.contains("RegistrationCacheBenchmark")) {
                Result<?> p = r.getPrimaryResult();
                cacheRows.put(method, new Row(method, size, p.getScore(), p.getScoreError(), norm));
            } else if (label.contains("SoftWriteBenchmark")) {
                Result<?> p = r.getPrimaryResult();
                soft.computeIfAbsent(size, k -> new LinkedHashMap<>())
                        .put(method, new Row(method, size, p.getScore(), p.getScoreError(), norm));
            } else {
                Result<?> p = r.getPrimaryResult();
                bySize.computeIfAbsent(size, k -> new LinkedHashMap<>())
                        .put(method, new Row(method, size, p.getScore(), p.getScoreError(), norm));
            }
        }
        printAllocator(out, bySize);
        printCross(out, cross);
        printSoft(out, soft);
        printCache(out, cacheRows);
        printRw(out, rw, rwWrite);
        printRpc(out, rpc);
        printGrace(out, grace);
        printUcxRegistration(out, ucxReg);
        printUcxPut(out, ucxPut);
        printStorage(out, storage);
        if (!nops.isEmpty()) {
            out.printf("%n### io_uring: the ring's own cost per NOP (no device)%n%n| benchmark | ns/op, B/op |%n|---|---:|%n");
            nops.forEach((m, row) -> out.printf(Locale.ROOT, "| %s | %s |%n", m, fmt(row)));
        }
        out.printf("%nJDK %s, %s %s, %d cores%n", Runtime.version(), System.getProperty("os.name"),
                System.getProperty("os.arch"), Runtime.getRuntime().availableProcessors());
    }

    private static void printRw(PrintStream out, Map<String, Map<String, Row>> rw, Map<String, Map<String, Row>> rwWrite) {
        if (!rw.isEmpty()) {
            out.printf("%n### RDMA read/write context: init + wrs + destroy (soft provider, page-sized entries)%n%n");
            out.println("| entries | multi-SGE path (one SGE for 1 entry) | MR path (forced) |");
            out.println("|---:|---:|---:|");
            for (Map.Entry<String, Map<String, Row>> e : rw.entrySet()) {
                Row sge = e.getValue().get("SGE");
                Row mr = e.getValue().get("MR");
                out.printf(Locale.ROOT, "| %s | %s | %s |%n", e.getKey(), sge == null ? "-" : fmt(sge), mr == null ? "-" : fmt(mr));
            }
        }
        if (!rwWrite.isEmpty()) {
            out.printf("%n### 16 x 4 KiB RDMA WRITE through a context (init, post, poll, destroy) vs MemorySegment.copy of the same pages%n%n");
            out.println("| path | WRITE | copy | copy / WRITE |");
            out.println("|---|---:|---:|---:|");
            for (Map.Entry<String, Map<String, Row>> e : rwWrite.entrySet()) {
                Row w = e.getValue().get("write16x4k");
                Row c = e.getValue().get("copy16x4k");
                out.printf(Locale.ROOT, "| %s | %s | %s | %s |%n", e.getKey(), w == null ? "-" : fmt(w), c == null ? "-" : fmt(c),
                        w == null || c == null ? "-" : String.format(Locale.ROOT, "%.0f%%", 100 * c.ns() / w.ns()));
            }
        }
    }

    /** A table of operations with their score (and its unit, kept in the row's size column) and B/op. */
    private static void printScores(PrintStream out, String heading, Map<String, Row> rows) {
        out.printf("%n### %s%n%n", heading);
        out.println("| operation | score | B/op |");
        out.println("|---|---:|---:|");
        for (Row r : rows.values()) {
            out.printf(Locale.ROOT, "| %s | %.1f ± %.1f %s | %.0f |%n", r.method(), r.ns(), r.error(), r.size(), r.bytesPerOp());
        }
    }

    private static void printGrace(PrintStream out, Map<String, Row> grace) {
        if (!grace.isEmpty()) {
            printScores(out, "Grace-period section beside read locks (peers in the same run; two-reader groups: per "
                    + "operation of the group)", grace);
        }
    }

    private static void printRpc(PrintStream out, Map<String, Row> rpc) {
        if (rpc.isEmpty()) {
            return;
        }
        printScores(out, "Request pool and send-context ring (peers in the same run)", rpc);
        Row ours = rpc.get("reqGetPut");
        Row mpmc = rpc.get("mpmcPollOffer");
        if (ours != null && mpmc != null) {
            out.printf(Locale.ROOT, "%nreq get + put: %.1f ns, %.2fx a JCTools MPMC poll + offer%n", ours.ns(), ours.ns() / mpmc.ns());
        }
        for (String key : rpc.keySet()) {
            if (!key.startsWith("ringGet@")) {
                continue;
            }
            String at = key.substring("ringGet".length());
            Row ring = rpc.get(key);
            Row spsc = rpc.get("spscPoll" + at);
            Row signaled = rpc.get("signaledGet" + at);
            out.printf(Locale.ROOT, "ring for %s requests: %.1f M slots/s handed out and released%s%s%n", at.substring(1),
                    ring.ns(), spsc == null ? "" : String.format(Locale.ROOT, ", SPSC queue %.1f M tokens/s", spsc.ns()),
                    signaled == null ? "" : String.format(Locale.ROOT, "; with completions as the transport gets them (one "
                            + "signaled Send in batch + 1, through a stand-in CQ) %.1f M slots/s", signaled.ns()));
        }
    }

    private static void printAllocator(PrintStream out, Map<String, Map<String, Row>> bySize) {
        if (bySize.isEmpty()) {
            return;
        }
        out.printf("%n### Same thread: allocate + write 8 bytes + free (ns/op, lower is better; B/op from -prof gc)%n%n");
        String[] peers = {"nettyPooledDirect", "arenaConfined", "byteBufferAllocateDirect", "slicingAllocatorOverOneArena"};
        out.println("| size | regmem FAST | regmem CHECKED | Netty pooled direct | Arena.ofConfined | allocateDirect | slicing over one Arena |");
        out.println("|---:|---:|---:|---:|---:|---:|---:|");
        for (Map.Entry<String, Map<String, Row>> e : bySize.entrySet()) {
            Map<String, Row> m = e.getValue();
            StringBuilder line = new StringBuilder("| " + e.getKey() + " B");
            for (String k : new String[] {"regmemFast", "regmemChecked", peers[0], peers[1], peers[2], peers[3]}) {
                Row row = m.get(k);
                line.append(" | ").append(row == null ? "-" : fmt(row));
            }
            out.println(line.append(" |"));
        }
        out.printf("%n### Ratios: peer time / regmem CHECKED time (above 1: regmem is faster)%n%n");
        out.println("| size | vs Netty pooled direct | vs Arena.ofConfined | vs allocateDirect | vs slicing over one Arena |");
        out.println("|---:|---:|---:|---:|---:|");
        for (Map.Entry<String, Map<String, Row>> e : bySize.entrySet()) {
            Map<String, Row> m = e.getValue();
            Row ours = m.get("regmemChecked");
            StringBuilder line = new StringBuilder("| " + e.getKey() + " B");
            for (String peer : peers) {
                Row row = m.get(peer);
                line.append(" | ").append(ours == null || row == null ? "-"
                        : String.format(Locale.ROOT, "%.1fx", row.ns() / ours.ns()));
            }
            out.println(line.append(" |"));
        }
    }

    private static void printCross(PrintStream out, List<Row> cross) {
        if (!cross.isEmpty()) {
            out.printf("%n### Allocate on one thread, free on another (ns per buffer on each side; the slower side sets the rate)%n%n");
            out.println("| size | side | regmem CHECKED | Netty pooled direct | ratio |");
            out.println("|---:|---|---:|---:|---:|");
            Map<String, Row> c = new LinkedHashMap<>();
            for (Row r : cross) {
                c.put(r.size() + "/" + r.method(), r);
            }
            for (Row r : cross) {
                if (!r.method().startsWith("regmem")) {
                    continue;
                }
                String side = r.method().endsWith("Allocate") ? "Allocate" : "Free";
                Row netty = c.get(r.size() + "/netty" + side);
                out.printf(Locale.ROOT, "| %s B | %s | %.1f ± %.1f | %s | %s |%n", r.size(), side.toLowerCase(Locale.ROOT),
                        r.ns(), r.error(), netty == null ? "-" : String.format(Locale.ROOT, "%.1f ± %.1f", netty.ns(), netty.error()),
                        netty == null ? "-" : String.format(Locale.ROOT, "%.1fx", netty.ns() / r.ns()));
            }
            out.println("\n(B/op for the cross-thread groups is per group operation: regmem "
                    + cross.stream().filter(r -> r.method().startsWith("regmem")).findFirst().map(r -> fmtBytes(r.bytesPerOp())).orElse("-")
                    + ", Netty " + cross.stream().filter(r -> r.method().startsWith("netty")).findFirst().map(r -> fmtBytes(r.bytesPerOp())).orElse("-") + ")");
        }
    }

    private static void printSoft(PrintStream out, Map<String, Map<String, Row>> soft) {
        if (!soft.isEmpty()) {
            out.printf("%n### Soft provider: post one RDMA WRITE + poll its completion, beside MemorySegment.copy of the same bytes%n%n");
            out.println("| size | soft WRITE + poll | MemorySegment.copy | WRITE bandwidth / copy bandwidth |");
            out.println("|---:|---:|---:|---:|");
            for (Map.Entry<String, Map<String, Row>> e : soft.entrySet()) {
                Row w = e.getValue().get("softRdmaWrite");
                Row c = e.getValue().get("segmentCopy");
                out.printf(Locale.ROOT, "| %s B | %s | %s | %s |%n", e.getKey(), w == null ? "-" : fmt(w), c == null ? "-" : fmt(c),
                        w == null || c == null ? "-" : String.format(Locale.ROOT, "%.0f%%", 100 * c.ns() / w.ns()));
            }
        }
    }

    private static void printUcxPut(PrintStream out, Map<String, Map<String, Row>> rows) {
        if (rows.isEmpty()) {
            return;
        }
        out.printf("%n### UCX: RDMA WRITE between two processes (bench/ucx-compare.sh runs ucx_perftest beside it)%n%n");
        out.println("| transport/mode | size | round trip of one WRITE | per WRITE, 16 in flight | WRITE MB/s | READ MB/s |");
        out.println("|---|---:|---:|---:|---:|---:|");
        for (Map.Entry<String, Map<String, Row>> e : rows.entrySet()) {
            String[] key = e.getKey().split(" ");
            Row rt = e.getValue().get("writeRoundTrip");
            Row st = e.getValue().get("writeStreamed");
            Row rd = e.getValue().get("readStreamed");
            out.printf(Locale.ROOT, "| %s | %s B | %s | %s | %s | %s |%n", key[0], key[1], rt == null ? "-" : fmt(rt),
                    st == null ? "-" : fmt(st), mbPerSecond(key[1], st), mbPerSecond(key[1], rd));
        }
    }

    private static void printStorage(PrintStream out, Map<String, Map<String, double[]>> rows) {
        if (rows.isEmpty()) {
            return;
        }
        out.printf("%n### Storage: one file, queue depth 32 (bench/storage-compare.sh runs fio beside it)%n%n");
        out.println("| job | engine | I/Os per s | CPU ns per I/O | B per I/O call |");
        out.println("|---|---|---:|---:|---:|");
        for (Map.Entry<String, Map<String, double[]>> e : rows.entrySet()) {
            for (Map.Entry<String, double[]> x : e.getValue().entrySet()) {
                double[] v = x.getValue();
                out.printf(Locale.ROOT, "| %s | %s | %,.0f | %,.0f | %.0f |%n", e.getKey(), x.getKey(), v[0], v[1], v[2]);
            }
        }
    }

    private static String mbPerSecond(String bytes, Row perOp) {
        return perOp == null ? "-" : String.format(Locale.ROOT, "%.0f", Long.parseLong(bytes) / perOp.ns() * 1e9 / 1e6);
    }

    private static void printUcxRegistration(PrintStream out, Map<String, Map<String, Row>> bySize) {
        if (bySize.isEmpty()) {
            return;
        }
        out.printf("%n### UCX: register + deregister beside a registration-cache hit (1,024 regions)%n%n");
        out.println("| region size | register + deregister | cache hit | hit cheaper by |");
        out.println("|---:|---:|---:|---:|");
        for (Map.Entry<String, Map<String, Row>> e : bySize.entrySet()) {
            Row reg = e.getValue().get("registerAndDeregister");
            Row hit = e.getValue().get("cacheHit");
            if (reg != null && hit != null) {
                out.printf(Locale.ROOT, "| %s B | %s | %s | %.0fx |%n", e.getKey(), fmt(reg), fmt(hit), reg.ns() / hit.ns());
            }
        }
    }

    private static void printCache(PrintStream out, Map<String, Row> cacheRows) {
        if (!cacheRows.isEmpty()) {
            out.printf("%n### Registration cache (10,000 regions cached; soft provider)%n%n");
            out.println("| operation | ns/op, B/op |");
            out.println("|---|---:|");
            for (Row r : cacheRows.values()) {
                out.printf(Locale.ROOT, "| %s | %s |%n", r.method(), fmt(r));
            }
            Row pure = cacheRows.get("pureMissEvicting");
            Row miss = cacheRows.get("cacheMissAndInvalidate");
            Row raw = cacheRows.get("uncachedRegistration");
            Row fifo = cacheRows.get("uncachedRegistrationFifo");
            Row hit = cacheRows.get("cacheHit");
            Row search = cacheRows.get("cacheHitSearch");
            if (hit != null && search != null) {
                out.println();
                out.printf(Locale.ROOT, "A hit through its page's hint: %.1f ns; searching the index instead: %.1f ns%n",
                        hit.ns(), search.ns());
            }
            if (pure != null && fifo != null) {
                out.printf(Locale.ROOT, "Pure miss (register one, evict one) over the same provider work without the cache"
                        + " (uncachedRegistrationFifo): %.0f ns%n", pure.ns() - fifo.ns());
            }
            if (raw != null) {
                out.println();
                if (pure != null) {
                    out.printf(Locale.ROOT, "Pure miss (register one, evict one) over the provider's register + deregister of warm memory: %.0f ns%n",
                            pure.ns() - raw.ns());
                }
                if (miss != null) {
                    out.printf(Locale.ROOT, "Miss + invalidate (two index changes) over the provider's register + deregister: %.0f ns%n",
                            miss.ns() - raw.ns());
                }
                if (hit != null) {
                    out.printf(Locale.ROOT, "A hit costs %.1f%% of an uncached registration (%.0fx faster)%n",
                            100 * hit.ns() / raw.ns(), raw.ns() / hit.ns());
                }
            }
        }
    }

    private static double gcNorm(Map<String, ?> secondary) {
        for (var e : secondary.entrySet()) {
            if (e.getKey().endsWith("gc.alloc.rate.norm")) {
                return ((Result<?>) e.getValue()).getScore();
            }
        }
        return Double.NaN;
    }

    private static String fmt(Row r) {
        return String.format(Locale.ROOT, "%.1f ± %.1f ns, %s", r.ns(), r.error(), fmtBytes(r.bytesPerOp()));
    }

    private static String fmtBytes(double b) {
        if (Double.isNaN(b)) {
            return "? B/op";
        }
        return b < 0.5 ? "0 B/op" : String.format(Locale.ROOT, "%.0f B/op", b);
    }
}
