package io.regmem.bench;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.BufferPool;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/** `regmem demo` (a short run) completes, prints its report and leaks nothing. */
class DemoCommandTest {

    @Test
    void demoRunsAndReportsNoLeaks() {
        PrintStream original = System.out;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        int status;
        try {
            System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
            status = new CommandLine(new RegmemCommand()).execute("demo", "--requests", "3000", "--safety", "PARANOID",
                    "--rdma-requests", "500", "--rpc-calls", "3000", "--quiet-progress");
        } finally {
            System.setOut(original);
        }
        String out = captured.toString(StandardCharsets.UTF_8);
        assertThat(status).as(out).isZero();
        assertThat(out).contains("RPC over RDMA (soft provider): 3,000 calls", "Replies checked byte by byte: 0 wrong",
                "Requests free after the run: client 16/16, server 16/16", "stale completions 0",
                "Devices: no live objects; no live objects", "Chunks: each registered for its call only", "rpc-client-buffers: no buffers leaked",
                "Workload: 6,000 requests", "Latency (ns)", "Pool 'demo' (PARANOID",
                "allocations", "demo: no buffers leaked", "RDMA loopback on the soft provider: 500 requests",
                "WRITE", "READ", "Registration cache of B: 501 gets, ", "misses (one per chunk)",
                "Device A: no live objects; device B: no live objects",
                "rdma-a: no buffers leaked; rdma-b: no buffers leaked");
        assertThat(BufferPool.openPools()).isEmpty();
    }

    @Test
    void theRpcPartOnThreeThreadsChecksItsDataAndLeaksNothing() {
        PrintStream original = System.out;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        int status;
        try {
            System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
            status = new CommandLine(new RegmemCommand()).execute("demo", "--requests", "100", "--rdma-requests", "0",
                    "--rpc-calls", "3000", "--rpc-threads", "--quiet-progress");
        } finally {
            System.setOut(original);
        }
        String out = captured.toString(StandardCharsets.UTF_8);
        assertThat(status).as(out).isZero();
        assertThat(out).contains("3,000 calls", "on three threads", "Replies checked byte by byte: 0 wrong",
                "Requests free after the run: client 16/16, server 16/16", "Devices: no live objects; no live objects");
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
        RpcDemo.fillArgs(pattern, args, 7, 100);
        RpcDemo.transform(args, result, 100);
        assertThat(RpcDemo.check(pattern, result, 7, 100)).isTrue();
        assertThat(RpcDemo.check(pattern, result, 8, 100)).as("another call's answer").isFalse();
        result.set(java.lang.foreign.ValueLayout.JAVA_BYTE, 99, (byte) (result.get(java.lang.foreign.ValueLayout.JAVA_BYTE, 99) ^ 1));
        assertThat(RpcDemo.check(pattern, result, 7, 100)).as("one byte off, in the tail").isFalse();
    }

    @Test
    void unknownSubcommandFailsWithUsage() {
        int status = new CommandLine(new RegmemCommand()).setErr(new java.io.PrintWriter(new java.io.StringWriter()))
                .execute("nonsense");
        assertThat(status).isNotZero();
    }
}
