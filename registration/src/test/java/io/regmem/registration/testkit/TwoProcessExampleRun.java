package io.regmem.registration.testkit;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.examples.TwoProcessExample;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
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

    private static Process start(String role, String address, String provider, LinkedBlockingQueue<String> lines)
            throws IOException {
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        ProcessBuilder b = new ProcessBuilder(java, "--enable-native-access=ALL-UNNAMED", "-cp",
                System.getProperty("java.class.path"), TwoProcessExample.class.getName(), role, address, provider);
        b.redirectErrorStream(true);
        Process p = b.start();
        Thread.ofPlatform().daemon().start(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                for (String line; (line = r.readLine()) != null; ) {
                    lines.add(line);
                }
            } catch (IOException ignored) {
                // the process is gone
            }
        });
        return p;
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
        Process server = start("server", address, provider, serverLines);
        Process client = null;
        try {
            next(serverLines, "listening on " + address, serverSeen);
            client = start("client", address, provider, clientLines);
            assertThat(next(clientLines, "client: ", clientSeen)).isEqualTo("client: SUCCESS");
            assertThat(next(serverLines, "server: ", serverSeen))
                    .isEqualTo("server: SUCCESS RECV_RDMA_WITH_IMM, imm 42: hello from process " + client.pid());
            assertThat(client.waitFor(30, TimeUnit.SECONDS)).isTrue();
            assertThat(server.waitFor(30, TimeUnit.SECONDS)).isTrue();
            assertThat(client.exitValue()).as("client output %s", clientSeen).isZero();
            assertThat(server.exitValue()).as("server output %s", serverSeen).isZero();
        } finally {
            server.destroyForcibly();
            if (client != null) {
                client.destroyForcibly();
            }
        }
    }
}
