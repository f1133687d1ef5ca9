package io.regmem.registration.ucx;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * A child JVM running {@link UcxPeerMain} (a UCX listener on the loopback), and what it says: its
 * {@code REGMEM ...} lines, one by one, and all of its output. {@link #finish()} ends it and
 * checks that it left nothing behind.
 */
final class UcxChild {
    final Process process;
    final String address;
    final BlockingQueue<String> lines = new LinkedBlockingQueue<>();
    final StringBuilder all = new StringBuilder();

    /** A child listening at 127.0.0.1:{@code port}, UCX restricted to {@code tls}, memory from an arena. */
    UcxChild(String tls, int port) throws IOException {
        this(tls, port, "arena", Map.of());
    }

    /**
     * @param memory "arena" or "chunk" (the region in memory from the device's chunk source)
     * @param env    more environment variables for the child (its device's secret, say); an
     *               entry {@code OPTIONS} is passed as the child's device options ({@code k=v,k=v})
     */
    UcxChild(String tls, int port, String memory, Map<String, String> env) throws IOException {
        address = "127.0.0.1:" + port;
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        ProcessBuilder b = new ProcessBuilder(java, "--enable-native-access=ALL-UNNAMED", "-cp",
                System.getProperty("java.class.path"),
                "-Djava.util.logging.SimpleFormatter.format=%4$s %3$s: %5$s%6$s%n",
                UcxPeerMain.class.getName(), address, memory, env.getOrDefault("OPTIONS", ""));
        b.environment().put("UCX_TLS", tls);
        env.forEach((k, v) -> {
            if (!k.equals("OPTIONS")) {
                b.environment().put(k, v);
            }
        });
        b.redirectErrorStream(true);
        process = b.start();
        Thread.ofPlatform().daemon().start(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(process.getInputStream()))) {
                for (String line; (line = r.readLine()) != null; ) {
                    synchronized (all) {
                        all.append(line).append('\n');
                    }
                    if (line.startsWith("REGMEM ")) {
                        lines.add(line.substring(7));
                    }
                }
            } catch (IOException ignored) {
                // the child is gone
            }
        });
    }

    /** The child's next line, which must start with {@code prefix}. */
    String expect(String prefix) throws InterruptedException {
        String line = lines.poll(30, TimeUnit.SECONDS);
        synchronized (all) {
            assertThat(line).as("the child's next line (its output so far:\n%s)", all).isNotNull().startsWith(prefix);
        }
        return line;
    }

    void command(String c) throws IOException {
        process.getOutputStream().write((c + "\n").getBytes());
        process.getOutputStream().flush();
    }

    /** Everything the child printed so far. */
    String output() {
        synchronized (all) {
            return all.toString();
        }
    }

    /** Lines of /proc/PID/maps and entries of /proc/PID/fd: the mappings and descriptors a process holds. */
    static long[] holdings(long pid) throws java.io.IOException {
        try (var maps = java.nio.file.Files.lines(java.nio.file.Path.of("/proc/" + pid + "/maps"));
             var fds = java.nio.file.Files.list(java.nio.file.Path.of("/proc/" + pid + "/fd"))) {
            return new long[] {maps.count(), fds.count()};
        }
    }

    /** Closes its input: it tears down, says whether it left anything, and exits. */
    void finish() throws Exception {
        process.getOutputStream().close();
        expect("CLEAN");
        assertThat(process.waitFor(30, TimeUnit.SECONDS)).isTrue();
        synchronized (all) {
            assertThat(process.exitValue()).as("the child's exit (its output:\n%s)", all).isZero();
        }
    }
}
