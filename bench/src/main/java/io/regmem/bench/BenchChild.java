package io.regmem.bench;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The peer process of a benchmark: a JVM running {@code main} on this class path, its output read
 * line by line ({@link #expect}) until the benchmark no longer needs it ({@link #drain}), ended by
 * closing its standard input ({@link #close}).
 */
final class BenchChild implements AutoCloseable {
    private final Process process;
    private final BufferedReader out;
    private final String name;

    private BenchChild(Process process, String name) {
        this.process = process;
        this.out = new BufferedReader(new InputStreamReader(process.getInputStream()));
        this.name = name;
    }

    /** A {@code 127.0.0.1:port} address whose port was free a moment ago. */
    static String loopbackAddress() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return "127.0.0.1:" + s.getLocalPort();
        }
    }

    /**
     * Starts {@code main} with {@code args} in a JVM with native access, {@code env} added to its
     * environment; {@code pinnable}: {@code REGMEM_BENCH_CHILD_CPUS=LIST} pins it to those CPUs
     * ({@code taskset -c LIST}: with two spinning threads on two vCPUs, the scheduler sometimes leaves
     * both on one). {@code name} names it in errors.
     */
    static BenchChild start(String name, boolean pinnable, Map<String, String> env, Class<?> main, String... args)
            throws IOException {
        List<String> command = new ArrayList<>();
        String cpus = System.getenv("REGMEM_BENCH_CHILD_CPUS");
        if (pinnable && cpus != null && !cpus.isEmpty()) {
            command.addAll(List.of("taskset", "-c", cpus));
        }
        command.addAll(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED", "--sun-misc-unsafe-memory-access=allow",
                "-cp", System.getProperty("java.class.path"), main.getName()));
        command.addAll(List.of(args));
        ProcessBuilder b = new ProcessBuilder(command);
        b.environment().putAll(env);
        b.redirectErrorStream(true);
        return new BenchChild(b.start(), name);
    }

    /** Reads its output up to the first line starting with {@code prefix}, and returns that line. */
    String expect(String prefix) throws IOException {
        StringBuilder seen = new StringBuilder();
        for (String line; (line = out.readLine()) != null; ) {
            if (line.startsWith(prefix)) {
                return line;
            }
            seen.append(line).append('\n');
        }
        throw new IllegalStateException("the " + name + " ended before saying " + prefix + "; it said:\n" + seen);
    }

    /** From now on its output is read and dropped by a daemon thread (so that it never blocks writing). */
    void drain() {
        Thread.ofPlatform().daemon().start(() -> {
            try {
                while (out.readLine() != null) {
                    // dropped
                }
            } catch (IOException ignored) {
                // the child is gone
            }
        });
    }

    /** Closes its standard input: it tears down and exits. */
    void endInput() throws IOException {
        process.getOutputStream().close();
    }

    /** Ends its input and waits up to 30 s for it to exit, then kills it (at once if this thread is interrupted, which stays set). */
    @Override
    public void close() throws IOException {
        endInput();
        try {
            if (!process.waitFor(30, TimeUnit.SECONDS)) {
                process.destroyForcibly();
            }
        } catch (InterruptedException e) {
            process.destroyForcibly();
            Thread.currentThread().interrupt();
        }
    }
}
