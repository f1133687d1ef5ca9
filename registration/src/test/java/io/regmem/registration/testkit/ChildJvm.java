package io.regmem.registration.testkit;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.function.Predicate;
import java.util.stream.Stream;

/**
 * The one child JVM fixture of every cross-process test: starts a class of the test class path in a
 * JVM of its own (native access granted, UCX's signal handlers off, java.util.logging on one line a
 * record), talks to it over stdin/stdout, and collects what it says: its {@code REGMEM ...} lines one
 * by one ({@link #expect}, {@link #find}, without the prefix), and all of its output
 * ({@link #output()}, for assertion messages). {@link #finish()} closes its input and expects it to
 * say {@code CLEAN} and exit 0; {@link #close()} kills it and reaps it (tests use it in
 * try-with-resources, so that no child outlives its test).
 */
public class ChildJvm implements AutoCloseable {
    /** How long {@link #expect} and {@link #find} wait for a line. */
    private static final long LINE_SECONDS = 60;

    public final Process process;
    /** The child's {@code REGMEM} lines, without the prefix, as they come. */
    public final BlockingQueue<String> lines = new LinkedBlockingQueue<>();
    private final StringBuffer all = new StringBuffer();
    private final Thread reader;

    /** What to start: the class, and what comes before and after it. */
    public static final class Spec {
        private final String main;
        private final List<String> prefix = new ArrayList<>();
        private final List<String> jvm = new ArrayList<>();
        private final List<String> args = new ArrayList<>();
        private final Map<String, String> env = new LinkedHashMap<>();
        private Consumer<String> onLine = line -> { };
        private Predicate<String> keep = line -> true;

        private Spec(String main) {
            this.main = main;
            env.put("UCX_ERROR_SIGNALS", "");
        }

        /** A command the JVM runs under ({@code ip netns exec NAME}). */
        public Spec under(List<String> command) {
            prefix.addAll(command);
            return this;
        }

        /** JVM options ({@code -Xmx96m}, ...). */
        public Spec jvm(String... options) {
            jvm.addAll(List.of(options));
            return this;
        }

        /** The main class's arguments. */
        public Spec args(String... a) {
            args.addAll(List.of(a));
            return this;
        }

        /** An environment variable of the child. */
        public Spec env(String name, String value) {
            env.put(name, value);
            return this;
        }

        /** Sees every line the child prints, on the reader thread, as it comes. */
        public Spec onLine(Consumer<String> c) {
            onLine = c;
            return this;
        }

        /** Which lines {@link #output()} and {@link #lines} keep (all by default; a chatty child keeps what matters). */
        public Spec keep(Predicate<String> which) {
            keep = which;
            return this;
        }

        /** Starts the child. */
        public ChildJvm start() throws IOException {
            return new ChildJvm(this);
        }
    }

    /** A child running {@code main}. */
    public static Spec of(Class<?> main) {
        return new Spec(main.getName());
    }

    /** A child running the class named {@code main}. */
    public static Spec of(String main) {
        return new Spec(main);
    }

    protected ChildJvm(Spec s) throws IOException {
        List<String> command = new ArrayList<>(s.prefix);
        command.addAll(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED"));
        command.addAll(s.jvm);
        command.addAll(List.of("-cp", System.getProperty("java.class.path"),
                "-Djava.util.logging.SimpleFormatter.format=%4$s %3$s: %5$s%6$s%n", s.main));
        command.addAll(s.args);
        ProcessBuilder b = new ProcessBuilder(command).redirectErrorStream(true);
        b.environment().putAll(s.env);
        process = b.start();
        Consumer<String> onLine = s.onLine;
        Predicate<String> keep = s.keep;
        reader = Thread.ofPlatform().daemon().start(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
                for (String line; (line = r.readLine()) != null; ) {
                    onLine.accept(line);
                    if (keep.test(line)) {
                        all.append(line).append('\n');
                        if (line.startsWith("REGMEM ")) {
                            lines.add(line.substring(7));
                        }
                    }
                }
            } catch (IOException ignored) {
                // the child is gone
            }
        });
    }

    /** The child's next {@code REGMEM} line, which must start with {@code prefix}. */
    public String expect(String prefix) throws InterruptedException {
        String line = lines.poll(LINE_SECONDS, TimeUnit.SECONDS);
        assertThat(line).as("the child's next line (its output so far:\n%s)", output()).isNotNull().startsWith(prefix);
        return line;
    }

    /** The child's next {@code REGMEM} line that starts with {@code prefix}, skipping the others. */
    public String find(String prefix) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(LINE_SECONDS);
        while (true) {
            String line = lines.poll(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
            assertThat(line).as("a line %s of the child (its output so far:\n%s)", prefix, output()).isNotNull();
            if (line.startsWith(prefix)) {
                return line;
            }
        }
    }

    /** Everything the child printed so far (that its spec keeps). */
    public String output() {
        return all.toString();
    }

    /** Sends the child a command line on its standard input. */
    public void command(String c) throws IOException {
        process.getOutputStream().write((c + "\n").getBytes(StandardCharsets.UTF_8));
        process.getOutputStream().flush();
    }

    /**
     * Sends the child a signal ({@code STOP}, {@code CONT}, {@code KILL}); {@code STOP} returns once
     * every thread of the child is stopped.
     */
    public void signal(String name) throws IOException, InterruptedException {
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
        try (Stream<Path> tasks = Files.list(Path.of("/proc/" + process.pid() + "/task"))) {
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

    /** Waits (at most a minute) for the child to exit on its own and its output to be read; its exit status. */
    public int awaitExit() throws InterruptedException {
        assertThat(process.waitFor(60, TimeUnit.SECONDS)).as("the child exits (its output so far:\n%s)", output()).isTrue();
        drained();
        return process.exitValue();
    }

    /** Waits until the child's output has been read to its end (it exited, or closed its output). */
    public void drained() throws InterruptedException {
        reader.join(10_000);
    }

    /** Closes its input: it tears down, says {@code CLEAN} (it left nothing behind), and exits 0. */
    public void finish() throws Exception {
        process.getOutputStream().close();
        expect("CLEAN");
        assertThat(process.waitFor(30, TimeUnit.SECONDS)).isTrue();
        assertThat(process.exitValue()).as("the child's exit (its output:\n%s)", output()).isZero();
    }

    /** Kills the child (if it still runs) and reaps it. */
    @Override
    public void close() throws InterruptedException {
        process.destroyForcibly();
        process.waitFor(30, TimeUnit.SECONDS);
    }

    /** Lines of /proc/PID/maps and entries of /proc/PID/fd: the mappings and descriptors a process holds. */
    public static long[] holdings(long pid) throws IOException {
        try (Stream<String> maps = Files.lines(Path.of("/proc/" + pid + "/maps"));
             Stream<Path> fds = Files.list(Path.of("/proc/" + pid + "/fd"))) {
            return new long[] {maps.count(), fds.count()};
        }
    }
}
