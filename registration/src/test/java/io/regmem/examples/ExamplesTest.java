package io.regmem.examples;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.BufferPool;
import io.regmem.registration.testkit.NoLeaks;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** Every guide's example runs as a program and prints what its guide says it prints. */
@ExtendWith(NoLeaks.class)
class ExamplesTest {

    interface Main {
        void run(String[] args) throws Exception;
    }

    static String run(Main main) throws Exception {
        PrintStream original = System.out;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        try {
            System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
            main.run(new String[0]);
        } finally {
            System.setOut(original);
        }
        assertThat(BufferPool.openPools()).as("pools left open by the example").isEmpty();
        return captured.toString(StandardCharsets.UTF_8);
    }

    @Test
    void allocator() throws Exception {
        assertThat(run(AllocatorExample::main)).isEqualTo("""
                described 4160 bytes in 2 entries
                page starts with 7
                live buffers: 0
                """);
    }

    @Test
    void rdmaWrite() throws Exception {
        assertThat(run(RdmaWriteExample::main)).isEqualTo("""
                completion: SUCCESS, 64 bytes
                server reads: hello, registered memory
                """);
    }

    @Test
    void marketData() throws Exception {
        assertThat(run(MarketDataExample::main)).isEqualTo("""
                subscriber A: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
                subscriber B: [0, 1, 2, 3], then no receive posted: 6 dropped
                subscriber B: the heartbeat says the last tick is 9: recovering 4 to 9 over RC
                subscriber B: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9] (6 recovered)
                """);
    }

    @Test
    void sleepingServer() throws Exception {
        assertThat(run(SleepingServerExample::main)).isEqualTo("""
                server woke for: message 1
                server woke for: message 2
                server woke for: message 3
                """);
    }

    @Test
    void cache() throws Exception {
        assertThat(run(CacheExample::main)).isEqualTo("""
                first get: lkey assigned
                gets 4, hits 3, misses 1
                invalidated 1 region(s)
                """);
    }

    @Test
    void rw() throws Exception {
        assertThat(run(RwExample::main)).isEqualTo("""
                WRITE: 1 work request(s), SUCCESS
                peer memory: abc
                READ: SUCCESS, first byte of page 3: c
                """);
    }

    @Test
    void rpc() throws Exception {
        long sum = 0;
        for (long x = 0; x < RpcExample.CALLS; x++) {
            sum += x * x;
        }
        assertThat(run(RpcExample::main)).isEqualTo(RpcExample.CALLS + " calls answered, sum of squares " + sum
                + "\nrequests still out: 0 + 0\n");
    }
}
