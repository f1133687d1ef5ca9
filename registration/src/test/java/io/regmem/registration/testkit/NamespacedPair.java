package io.regmem.registration.testkit;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;

/**
 * A {@link ChurnListener} process and a {@link ChurnClient} process, each started under a command
 * prefix that puts it into namespaces of its own ({@code unshare ...}, {@code ip netns exec ...}):
 * the client runs a few byte-checked connect / WRITE / READ / disconnect cycles against the listener,
 * and the test learns which way each connection went from the listener's diagnostics. Network
 * namespaces are made (two, joined by a veth pair with addresses of their own) and removed by
 * {@link #networkNamespaces}; nothing is sent outside them.
 */
public final class NamespacedPair {
    private NamespacedPair() {
    }

    /** Runs {@code command}; its exit status (output discarded). */
    public static int run(String... command) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
        if (!p.waitFor(30, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            return -1;
        }
        return p.exitValue();
    }

    /** Skips (fails where {@code CI=true}) unless {@code probe} runs and exits 0 here. */
    public static void assume(String what, String... probe) throws IOException, InterruptedException {
        int rc;
        try {
            rc = run(probe);
        } catch (IOException e) {
            rc = -1;
        }
        if (rc != 0) {
            if ("true".equals(System.getenv("CI"))) {
                throw new AssertionError("CI=true and " + what + " cannot be made here (" + String.join(" ", probe) + ")");
            }
            Assumptions.abort(what + " cannot be made here (" + String.join(" ", probe) + " exits " + rc + ")");
        }
    }

    /** Two network namespaces joined by a veth pair: {@link #a} at {@link #A_ADDRESS}, {@link #b} at {@link #B_ADDRESS}. */
    public static final class NetworkNamespaces implements AutoCloseable {
        public final String a;
        public final String b;
        public static final String A_ADDRESS = "10.213.7.1";
        public static final String B_ADDRESS = "10.213.7.2";

        private NetworkNamespaces(String a, String b) {
            this.a = a;
            this.b = b;
        }

        @Override
        public void close() throws IOException, InterruptedException {
            run("ip", "netns", "del", a);
            run("ip", "netns", "del", b);
        }
    }

    /** Makes two network namespaces and a veth pair between them (removed at close). */
    public static NetworkNamespaces networkNamespaces() throws IOException, InterruptedException {
        assume("a network namespace", "ip", "netns", "list");
        long id = ProcessHandle.current().pid() % 100000;
        String a = "rmtA" + id;
        String b = "rmtB" + id;
        NetworkNamespaces ns = new NetworkNamespaces(a, b);
        String va = "rmva" + id;
        String vb = "rmvb" + id;
        try {
            for (String[] c : new String[][] {
                {"ip", "netns", "add", a}, {"ip", "netns", "add", b},
                {"ip", "link", "add", va, "type", "veth", "peer", "name", vb},
                {"ip", "link", "set", va, "netns", a}, {"ip", "link", "set", vb, "netns", b},
                {"ip", "-n", a, "addr", "add", NetworkNamespaces.A_ADDRESS + "/30", "dev", va},
                {"ip", "-n", b, "addr", "add", NetworkNamespaces.B_ADDRESS + "/30", "dev", vb},
                {"ip", "-n", a, "link", "set", va, "up"}, {"ip", "-n", b, "link", "set", vb, "up"},
                {"ip", "-n", a, "link", "set", "lo", "up"}, {"ip", "-n", b, "link", "set", "lo", "up"}}) {
                int rc = run(c);
                if (rc != 0) {
                    throw new AssertionError(String.join(" ", c) + " exited " + rc);
                }
            }
        } catch (IOException | InterruptedException | RuntimeException | Error e) {
            ns.close();
            throw e;
        }
        return ns;
    }

    /** What a run showed: how each connection went at the listener, and both processes' output. */
    public record Result(List<String> accepted, String listenerOutput, String clientOutput) {
    }

    /**
     * Starts the listener under {@code listenerPrefix} at {@code listenHost}:{@code port}, then the client
     * under {@code clientPrefix}, connecting to {@code connectHost}:{@code port}, for {@code cycles}
     * cycles; both with the device options {@code options}. Checks that the client's cycles all passed
     * and that both ended clean.
     */
    public static Result run(String provider, String options, List<String> listenerPrefix, String listenHost,
                             List<String> clientPrefix, String connectHost, int port, int cycles) throws Exception {
        try (ChildJvm listener = child(listenerPrefix, ChurnListener.class, provider, listenHost + ":" + port,
                options)) {
            String[] key = listener.expect("KEY").split(" ");
            listener.expect("LISTENING");
            try (ChildJvm client = child(clientPrefix, ChurnClient.class, provider, connectHost + ":" + port,
                    options, key[1], key[2], "0", "2026", "none", Integer.toString(cycles))) {
                assertThat(client.process.waitFor(120, TimeUnit.SECONDS)).as("the client ends (its output:\n%s)",
                        client.output()).isTrue();
                client.drained();
                assertThat(client.process.exitValue()).as("the client's exit (its output:\n%s\nthe listener's:\n%s)",
                        client.output(), listener.output()).isZero();
                assertThat(client.output()).contains("REGMEM CYCLE " + (cycles - 1) + " ", "REGMEM CLEAN");
                List<String> accepted = new ArrayList<>();
                for (int i = 0; i < cycles; i++) {
                    accepted.add(listener.expect("ACCEPTED"));
                }
                listener.process.getOutputStream().close();
                listener.expect("CLEAN");
                assertThat(listener.process.waitFor(30, TimeUnit.SECONDS)).isTrue();
                assertThat(listener.process.exitValue()).isZero();
                return new Result(accepted, listener.output(), client.output());
            }
        }
    }

    /**
     * Runs one {@link ChurnClient} cycle against {@code address} (which may refuse it) and returns all it
     * printed once it ended (a connection that fails prints {@code REGMEM FAILED} and why).
     */
    public static String oneCycle(String provider, String address, String options) throws Exception {
        try (ChildJvm client = child(List.of(), ChurnClient.class, provider, address, options, "00000000", "0", "0",
                "1", "none", "1")) {
            assertThat(client.process.waitFor(60, TimeUnit.SECONDS)).as("the client ends").isTrue();
            client.drained();
            return client.output();
        }
    }

    /** A child JVM under a command prefix. */
    private static ChildJvm child(List<String> prefix, Class<?> main, String... args) throws IOException {
        return ChildJvm.of(main).under(prefix).jvm("-Xmx96m", "-XX:TieredStopAtLevel=1").args(args).start();
    }
}
