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
                    "--rdma-requests", "500");
        } finally {
            System.setOut(original);
        }
        String out = captured.toString(StandardCharsets.UTF_8);
        assertThat(status).as(out).isZero();
        assertThat(out).contains("Workload: 6,000 requests", "Latency (ns)", "Pool 'demo' (PARANOID",
                "allocations", "demo: no buffers leaked", "RDMA loopback on the soft provider: 500 requests",
                "WRITE", "READ", "Registration cache of B: 501 gets, ", "misses (one per chunk)",
                "Device A: no live objects; device B: no live objects",
                "rdma-a: no buffers leaked; rdma-b: no buffers leaked");
        assertThat(BufferPool.openPools()).isEmpty();
    }

    @Test
    void unknownSubcommandFailsWithUsage() {
        int status = new CommandLine(new RegmemCommand()).setErr(new java.io.PrintWriter(new java.io.StringWriter()))
                .execute("nonsense");
        assertThat(status).isNotZero();
    }
}
