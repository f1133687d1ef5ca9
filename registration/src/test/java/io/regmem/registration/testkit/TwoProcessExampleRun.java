package io.regmem.registration.testkit;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.examples.TwoProcessExample;
import java.io.IOException;
import java.net.ServerSocket;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * Runs the two-process example (docs/providers.md) as it is meant to be: a server JVM and a client
 * JVM on one provider; the server prints what the client's WRITE put into its memory, with the
 * client's pid. The ucx and shm modules' tests call it with their provider.
 */
public final class TwoProcessExampleRun {
    private TwoProcessExampleRun() {
    }

    private static ChildJvm start(String role, String address, String provider, LinkedBlockingQueue<String> lines)
            throws IOException {
        return ChildJvm.of(TwoProcessExample.class).args(role, address, provider).onLine(lines::add).start();
    }

    private static String next(LinkedBlockingQueue<String> lines, String prefix, List<String> seen) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (System.nanoTime() < deadline) {
            String line = lines.poll(1, TimeUnit.SECONDS);
            if (line != null) {
                seen.add(line);
                if (line.startsWith(prefix)) {
                    return line;
                }
            }
        }
        throw new AssertionError("no line starting '" + prefix + "'; the process printed: " + seen);
    }

    /** A client process writes into a server process of {@code provider} with the key from the accept. */
    public static void check(String provider) throws Exception {
        int port;
        // A port below the kernel's ephemeral range (32768-60999), which any outgoing connection may take.
        for (port = 24_000 + (int) (ProcessHandle.current().pid() % 2000); ; port++) {
            try (ServerSocket s = new ServerSocket(port)) {
                break;
            } catch (IOException taken) {
                // the next one
            }
        }
        String address = "127.0.0.1:" + port;
        LinkedBlockingQueue<String> serverLines = new LinkedBlockingQueue<>();
        LinkedBlockingQueue<String> clientLines = new LinkedBlockingQueue<>();
        List<String> serverSeen = new ArrayList<>();
        List<String> clientSeen = new ArrayList<>();
        ChildJvm server = start("server", address, provider, serverLines);
        ChildJvm client = null;
        try {
            next(serverLines, "listening on " + address, serverSeen);
            client = start("client", address, provider, clientLines);
            assertThat(next(clientLines, "client: ", clientSeen)).isEqualTo("client: SUCCESS");
            assertThat(next(serverLines, "server: ", serverSeen))
                    .isEqualTo("server: SUCCESS RECV_RDMA_WITH_IMM, imm 42: hello from process " + client.process.pid());
            assertThat(client.process.waitFor(30, TimeUnit.SECONDS)).isTrue();
            assertThat(server.process.waitFor(30, TimeUnit.SECONDS)).isTrue();
            assertThat(client.process.exitValue()).as("client output %s", clientSeen).isZero();
            assertThat(server.process.exitValue()).as("server output %s", serverSeen).isZero();
        } finally {
            server.close();
            if (client != null) {
                client.close();
            }
        }
    }
}
