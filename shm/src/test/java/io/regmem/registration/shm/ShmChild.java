package io.regmem.registration.shm;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * A child JVM running {@link ShmPeerMain} (an shm listener on the loopback), and what it says: its
 * {@code REGMEM ...} lines one by one, and all of its output. {@link #finish()} ends it and checks
 * that it left nothing behind.
 */
final class ShmChild implements AutoCloseable {
    final Process process;
    final String address;
    final BlockingQueue<String> lines = new LinkedBlockingQueue<>();
    private final StringBuilder all = new StringBuilder();

    /** A child listening at 127.0.0.1:{@code port} with the device options {@code options} ({@code k=v,k=v}). */
    ShmChild(int port, String options) throws IOException {
        this("127.0.0.1:" + port, options, "");
    }

    /** A child with a mode of its own ({@code client <hex key> <address>}: it connects to {@code address}). */
    ShmChild(String address, String options, String mode) throws IOException {
        this(address, ShmPeerMain.class, address, options, mode);
    }

    /** A child running {@code main} with {@code args}. */
    ShmChild(String address, Class<?> main, String... args) throws IOException {
        this.address = address;
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        // A fixed heap, touched at start: the child's resident memory then grows only by what is not heap.
        List<String> command = new ArrayList<>(List.of(java, "--enable-native-access=ALL-UNNAMED", "-Xms96m", "-Xmx96m",
                "-XX:+AlwaysPreTouch", "-XX:NativeMemoryTracking=summary", "-cp",
                System.getProperty("java.class.path"),
                "-Djava.util.logging.SimpleFormatter.format=%4$s %3$s: %5$s%6$s%n", main.getName()));
        command.addAll(List.of(args));
        ProcessBuilder b = new ProcessBuilder(command);
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

    /** The child's next line that starts with {@code prefix}, skipping the others. */
    String find(String prefix) throws InterruptedException {
        while (true) {
            String line = lines.poll(30, TimeUnit.SECONDS);
            assertThat(line).as("a line %s of the child (its output so far:\n%s)", prefix, output()).isNotNull();
            if (line.startsWith(prefix)) {
                return line;
            }
        }
    }

    /** The child's next line, which must start with {@code prefix}. */
    String expect(String prefix) throws InterruptedException {
        String line = lines.poll(30, TimeUnit.SECONDS);
        assertThat(line).as("the child's next line (its output so far:\n%s)", output()).isNotNull().startsWith(prefix);
        return line;
    }

    /** Everything the child printed so far. */
    String output() {
        synchronized (all) {
            return all.toString();
        }
    }

    /** Sends the child a signal ({@code STOP}, {@code CONT}, {@code KILL}). */
    void signal(String name) throws IOException, InterruptedException {
        Process k = new ProcessBuilder("kill", "-" + name, Long.toString(process.pid())).start();
        assertThat(k.waitFor(10, TimeUnit.SECONDS)).isTrue();
        assertThat(k.exitValue()).isZero();
        if (name.equals("STOP")) { // kill returns once the signal is queued; the child's threads stop as they take it
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (!stopped()) {
                assertThat(System.nanoTime()).as("the child's threads stop").isLessThan(deadline);
                Thread.sleep(1);
            }
        }
    }

    /** True if every thread of the child is stopped (state T in its /proc stat). */
    private boolean stopped() throws IOException {
        try (var tasks = Files.list(Path.of("/proc/" + process.pid() + "/task"))) {
            for (Path t : (Iterable<Path>) tasks::iterator) {
                try {
                    String s = Files.readString(t.resolve("stat"));
                    char state = s.charAt(s.lastIndexOf(')') + 2);
                    if (state != 'T' && state != 't') {
                        return false;
                    }
                } catch (NoSuchFileException gone) {
                    // a thread that ended meanwhile
                }
            }
        }
        return true;
    }

    /** Sends the child a command line. */
    void command(String c) throws IOException {
        process.getOutputStream().write((c + "\n").getBytes());
        process.getOutputStream().flush();
    }

    /** Closes its input: it tears down, says whether it left anything, and exits. */
    void finish() throws Exception {
        process.getOutputStream().close();
        expect("CLEAN");
        assertThat(process.waitFor(30, TimeUnit.SECONDS)).isTrue();
        assertThat(process.exitValue()).as("the child's exit (its output:\n%s)", output()).isZero();
    }

    @Override
    public void close() throws InterruptedException {
        process.destroyForcibly();
        process.waitFor(30, TimeUnit.SECONDS);
    }
}
