package io.regmem.cli;

import io.regmem.registration.testkit.NoLeaks;
import org.junit.jupiter.api.extension.ExtendWith;
import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.BufferPool;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/** `regmem demo` (a short run) completes, prints its report and leaks nothing. */
@ExtendWith(NoLeaks.class)
class DemoCommandTest {

    /** Runs the command line with standard output captured; asserts exit status 0 and returns the output. */
    private static String runClean(String... args) {
        PrintStream original = System.out;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        int status;
        try {
            System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
            status = RegmemCommand.commandLine().execute(args);
        } finally {
            System.setOut(original);
        }
        String out = captured.toString(StandardCharsets.UTF_8);
        assertThat(status).as(out).isZero();
        return out;
    }

    @Test
    void demoRunsAndReportsNoLeaks(@org.junit.jupiter.api.io.TempDir java.nio.file.Path dir) {
        java.nio.file.Path jfr = dir.resolve("demo.jfr");
        String out = runClean("demo", "--requests", "3000", "--safety", "PARANOID",
                    "--rdma-requests", "500", "--rpc-calls", "3000", "--rpc-warmup", "0", "--storage-mib", "32",
                    "--storage-calls", "1000", "--storage-block", "16384", "--jfr", jfr.toString());
        assertThat(out).contains("RPC over RDMA (soft provider): 3,000 calls", "Replies checked byte by byte: 0 wrong",
                "Requests free after the run: client 16/16, server requests free 16/16; rpc-server-buffers: no buffers leaked", "stale completions 0",
                "Chunks: each registered for its call only", "rpc-client-buffers: no buffers leaked",
                "Workload: 6,000 requests", "Latency (ns)", "Pool 'demo' (PARANOID",
                "allocations", "demo: no buffers leaked", "RDMA loopback on the soft provider: 500 requests",
                "WRITE", "READ", "Registration cache of B: 501 gets, ", "misses (one per chunk)",
                "rdma-a: no buffers leaked; rdma-b: no buffers leaked",
                "Storage: a 32 MiB file of known content", "Served on the soft provider, io_uring ",
                "reads : 1,000 blocks READ_FIXED then RDMA WRITE", "writes: 250 blocks RDMA READ then WRITE_FIXED",
                "Bytes checked: 20,480,000 read by the client, every byte (the 250 written blocks read back included); "
                        + "the file afterwards: as written",
                "Copies between file and wire on the server: 0 (1,500 blocks",
                "Pools: storage-server: no buffers leaked; storage-client: no buffers leaked. Rings open: 0",
                "JFR: ", "io.regmem.Registration", "io.regmem.ChunkMap", "io.regmem.Connection");
        assertThat(out).containsPattern("Devices: soft\\d+ \\(client\\): no live objects; soft\\d+ \\(server\\): no live objects")
                .containsPattern("Devices: soft\\d+ \\(A\\): no live objects; soft\\d+ \\(B\\): no live objects")
                .containsPattern("Devices: soft\\d+ \\(server\\): no live objects; soft\\d+ \\(client\\): no live objects")
                .endsWith("PASS: every byte checked, nothing leaked (RPC, allocator, RDMA loopback and storage parts as run above)"
                        + System.lineSeparator())
                .doesNotContain("\r");
        assertThat(jfr).isNotEmptyFile();
        assertThat(BufferPool.openPools()).isEmpty();
    }

    @Test
    void demoRunsOnUcxWithItsServerInAChildProcess() {
        try (io.regmem.registration.RdmaDevice probe = io.regmem.registration.RdmaDevice.open("ucx")) {
            assertThat(probe.providerName()).isEqualTo("ucx");
        } catch (io.regmem.core.RdmaException e) {
            org.junit.jupiter.api.Assumptions.assumeFalse(!"true".equals(System.getenv("CI")), "UCX is not installed");
            throw e;
        }
        String out = runClean("demo", "--provider", "ucx", "--requests", "100",
                    "--rdma-requests", "300", "--rpc-calls", "2000", "--rpc-warmup", "0", "--storage-mib", "16",
                    "--storage-calls", "400", "--quiet-progress");
        assertThat(out).contains("started the RPC server as a child process", "RPC over RDMA (ucx provider, server at 127.0.0.1:",
                "): 2,000 calls", "client on one thread, server in its own process", "Replies checked byte by byte: 0 wrong",
                "server: connection 1 ended after 4,000 calls; requests free 16/16; rpc-server-buffers-1: no buffers leaked",
                "Single-call latency (us, one call in flight, 64 B, 2,000 calls after the run)",
                "server: done; device: no live objects", "RDMA loopback on the ucx provider: 300 requests",
                "rdma-a: no buffers leaked; rdma-b: no buffers leaked", "PASS: ",
                "Served on the ucx provider", "the file afterwards: as written", "Copies between file and wire on the server: 0",
                "Rings open: 0");
        assertThat(BufferPool.openPools()).isEmpty();
    }

    @Test
    void aPartThatCannotRunEndsInOneFailLineAndStatusOne() throws Exception {
        try (io.regmem.registration.RdmaDevice probe = io.regmem.registration.RdmaDevice.open("ucx")) {
            assertThat(probe.providerName()).isEqualTo("ucx");
        } catch (io.regmem.core.RdmaException e) {
            org.junit.jupiter.api.Assumptions.assumeFalse(!"true".equals(System.getenv("CI")), "UCX is not installed");
            throw e;
        }
        int closedPort;
        try (java.net.ServerSocket s = new java.net.ServerSocket(0)) {
            closedPort = s.getLocalPort(); // nobody listens there once this closes
        }
        PrintStream original = System.out;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        int status;
        try {
            System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
            status = RegmemCommand.commandLine().execute("demo", "--provider", "ucx", "--connect", "127.0.0.1:" + closedPort,
                    "--rpc-calls", "10", "--requests", "10", "--rdma-requests", "0", "--storage-mib", "0");
        } finally {
            System.setOut(original);
        }
        String out = captured.toString(StandardCharsets.UTF_8);
        assertThat(status).as(out).isEqualTo(1);
        String[] lines = out.strip().split("\n");
        assertThat(lines[lines.length - 1]).as(out).startsWith("FAIL: ");
        assertThat(out).doesNotContain("PASS: ");
        assertThat(BufferPool.openPools()).isEmpty();
    }

    @Test
    void theRpcPartOnTwoThreadsChecksItsDataAndLeaksNothing() {
        String out = runClean("demo", "--requests", "100", "--rdma-requests", "0",
                    "--rpc-calls", "3000", "--rpc-warmup", "1", "--rpc-threads", "--storage-mib", "0", "--quiet-progress");
        assertThat(out).contains("3,000 calls", "client and server on a thread each",
                "Measured after a warm-up of 1.0 s: ", "Replies checked byte by byte: 0 wrong",
                "Requests free after the run: client 16/16, server requests free 16/16; rpc-server-buffers: no buffers leaked", "PASS: ");
        assertThat(BufferPool.openPools()).isEmpty();
    }

    @Test
    void aWrongReplyByteFailsTheCheck() {
        java.lang.foreign.MemorySegment pattern = java.lang.foreign.Arena.global().allocate(100);
        java.lang.foreign.MemorySegment args = java.lang.foreign.Arena.global().allocate(100);
        java.lang.foreign.MemorySegment result = java.lang.foreign.Arena.global().allocate(100);
        for (int i = 0; i < 100; i++) {
            pattern.set(java.lang.foreign.ValueLayout.JAVA_BYTE, i, (byte) (i * 31));
        }
        RpcPayloads.fillArgs(pattern, args, 7, 100);
        RpcPayloads.transform(args, result, 100);
        assertThat(RpcPayloads.check(pattern, result, 7, 100)).isTrue();
        assertThat(RpcPayloads.check(pattern, result, 8, 100)).as("another call's answer").isFalse();
        result.set(java.lang.foreign.ValueLayout.JAVA_BYTE, 99, (byte) (result.get(java.lang.foreign.ValueLayout.JAVA_BYTE, 99) ^ 1));
        assertThat(RpcPayloads.check(pattern, result, 7, 100)).as("one byte off, in the tail").isFalse();
    }

    /**
     * Every bad value is refused before any work starts: one line on standard error naming the
     * option, the value and what is allowed, nothing on standard output, exit status 2.
     */
    @org.junit.jupiter.params.ParameterizedTest
    @org.junit.jupiter.params.provider.CsvSource(delimiter = '|', value = {
        "demo --rpc-concurrency 0           | --rpc-concurrency 0 | 1 to 1024",
        "demo --threads -1                  | --threads -1 | 1 to 64",
        "demo --requests -1                 | --requests -1 | 1 to",
        "demo --rpc-duration 0              | --rpc-duration 0 | 1 to 86400",
        "demo --rpc-calls -5                | --rpc-calls -5 | 0 to",
        "demo --rpc-warmup 601              | --rpc-warmup 601 | 0 to 600",
        "demo --rpc-payloads 2000000000     | --rpc-payloads 2000000000 | 1 to 2097152",
        "demo --rpc-payloads 64,0           | --rpc-payloads 0 | 1 to 2097152",
        "demo --rdma-size 0                 | --rdma-size 0 | 8 to",
        "demo --rdma-requests -1            | --rdma-requests -1 | 0 to",
        "demo --rpc-concurrency 100000      | --rpc-concurrency 100000 | 1 to 1024",
        "demo --provider foo                | --provider 'foo' | known: soft",
        "demo --storage-mib -1              | --storage-mib -1 | 0 to 65536",
        "demo --storage-block 5000          | --storage-block 5000 | multiple of 4096",
        "demo --storage-depth 65            | --storage-depth 65 | 1 to 64",
        "demo --storage-calls 0             | --storage-calls 0 | 1 to",
        "demo --storage-mib 1 --storage-block 1048576 | --storage-mib 1 | 8 x --storage-depth",
        "demo --provider soft --connect 127.0.0.1:1 | --connect | --provider ucx",
        "demo --device-option bogus=1       | --device-option | unknown option 'bogus'",
        "demo --jfr /nonexistent-regmem/x.jfr | --jfr | does not exist",
        "serve --listen 127.0.0.1:1 --provider foo | --provider 'foo' | known: soft",
        "serve --listen 127.0.0.1:1 --rpc-concurrency 0 | --rpc-concurrency 0 | 1 to 1024",
        "serve --listen 127.0.0.1:1 --connections -1 | --connections -1 | 0 to",
        "serve                              | --listen | Missing required option",
        "demo --threads abc                 | --threads | 'abc'",
        "demo --safety NOPE                 | --safety | FAST, CHECKED, PARANOID",
        "demo --nonsense                    | --nonsense | Unknown option",
        "demo --multicast --multicast-members 0 | --multicast-members 0 | 1 to 16",
        "demo --multicast --multicast-size 8 | --multicast-size 8 | 16 to 1024",
    })
    void aBadOptionIsOneClearLineAndExitStatusTwoBeforeAnyWork(String args, String names, String allowed) {
        PrintStream original = System.out;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        java.io.StringWriter err = new java.io.StringWriter();
        int status;
        try {
            System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
            status = RegmemCommand.commandLine().setErr(new java.io.PrintWriter(err, true)).execute(args.trim().split("\\s+"));
        } finally {
            System.setOut(original);
        }
        String line = err.toString();
        assertThat(status).as(line).isEqualTo(2);
        assertThat(line.strip()).as("one line").doesNotContain("\n").startsWith("regmem " + args.trim().split(" ")[0] + ": ")
                .contains(names.trim(), allowed.trim()).doesNotContain("Exception");
        assertThat(captured.toString(StandardCharsets.UTF_8)).as("no work started").isEmpty();
        assertThat(BufferPool.openPools()).isEmpty();
    }

    /** The multicast demo: every member gets or counts every message, in order, byte-exact; nothing left. */
    @Test
    void theMulticastDemoChecksEveryMessageAndLeaksNothing() {
        String out = runClean("demo", "--multicast", "--multicast-members", "3", "--multicast-messages", "20000",
                "--multicast-size", "100");
        assertThat(out).contains("Multicast on the soft provider: 1 publisher, 3 member(s)", "20,000 messages of 100 B",
                "Publisher: 20,000 messages in ", "every send completed", "member 1: received ", "member 3: received ",
                "out of order 0, bytes wrong 0; one-way latency p50 ")
                .containsPattern("Devices: soft\\d+ \\(member 1\\): no live objects; .*soft\\d+ \\(publisher\\): no live objects")
                .endsWith("PASS: every message received or counted as dropped or lost, in order, every byte "
                        + "checked, nothing leaked (multicast)" + System.lineSeparator());
        assertThat(BufferPool.openPools()).isEmpty();
    }

    /** The multicast demo on ucx and on shm: the same checks, over the kernel's UDP multicast on the loopback. */
    @org.junit.jupiter.params.ParameterizedTest
    @org.junit.jupiter.params.provider.ValueSource(strings = {"ucx", "shm"})
    void theMulticastDemoRunsOverUdp(String provider) {
        try (io.regmem.registration.RdmaDevice probe = io.regmem.registration.RdmaDevice.open(provider)) {
            assertThat(probe.supportsDatagrams()).isTrue();
        } catch (io.regmem.core.RdmaException e) {
            org.junit.jupiter.api.Assumptions.assumeFalse(!"true".equals(System.getenv("CI")), provider + " cannot open here");
            throw e;
        }
        String out = runClean("demo", "--multicast", "--provider", provider, "--multicast-members", "2",
                "--multicast-messages", "5000", "--multicast-size", "64", "--multicast-rate", "20000");
        assertThat(out).contains("Multicast on the " + provider + " provider: 1 publisher, 2 member(s)", "every send completed",
                "member 2: received ", "out of order 0, bytes wrong 0")
                .containsPattern("Devices: " + provider + "\\d+ \\(member 1\\): no live objects; .*" + provider
                        + "\\d+ \\(publisher\\): no live objects")
                .endsWith("nothing leaked (multicast)" + System.lineSeparator());
        assertThat(BufferPool.openPools()).isEmpty();
    }

    /** {@code --connect} without {@code --provider} means ucx (the provider that reaches other hosts). */
    @Test
    void connectWithoutAProviderMeansUcx() throws Exception {
        try (io.regmem.registration.RdmaDevice probe = io.regmem.registration.RdmaDevice.open("ucx")) {
            assertThat(probe.providerName()).isEqualTo("ucx");
        } catch (io.regmem.core.RdmaException e) {
            org.junit.jupiter.api.Assumptions.assumeFalse(!"true".equals(System.getenv("CI")), "UCX is not installed");
            throw e;
        }
        int closedPort;
        try (java.net.ServerSocket s = new java.net.ServerSocket(0)) {
            closedPort = s.getLocalPort();
        }
        PrintStream original = System.out;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        int status;
        try {
            System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
            status = RegmemCommand.commandLine().execute("demo", "--connect", "127.0.0.1:" + closedPort,
                    "--rpc-calls", "10", "--requests", "10", "--rdma-requests", "0", "--storage-mib", "0");
        } finally {
            System.setOut(original);
        }
        String out = captured.toString(StandardCharsets.UTF_8);
        assertThat(status).as(out).isEqualTo(1);
        assertThat(out).contains("cannot connect to the server at 127.0.0.1:" + closedPort, "ucx");
        assertThat(BufferPool.openPools()).isEmpty();
    }

    @Test
    void unknownSubcommandFailsWithUsage() {
        int status = RegmemCommand.commandLine().setErr(new java.io.PrintWriter(new java.io.StringWriter()))
                .execute("nonsense");
        assertThat(status).isNotZero();
    }
}
