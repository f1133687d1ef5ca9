package io.regmem.registration.testkit;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.Access;
import io.regmem.registration.CmId;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.spi.ProgressFaults;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Connection churn against one listener whose progress thread alone serves the clients' one-sided
 * WRITEs and READs (this JVM never polls the listener's CQ): {@link ChurnClient} processes, a few at
 * a time, run connect / transfer / disconnect cycles, and most of them die abruptly, either by
 * SIGKILL at a random moment or by ending themselves at a chosen point (mid-handshake, mid-copy,
 * mid-ring-write, during close). At the end the listener's progress thread is alive, no thread of
 * this JVM ended by an exception, a new client's cycles are byte-exact, and the listener is left
 * with nothing.
 */
public final class Churn {
    private static final String[] DEATHS = {"handshake", "copy", "ring", "close"};

    private final String provider;
    private final Map<String, String> options;
    private final int slots;
    private final SplittableRandom random;
    private final AtomicInteger cycles = new AtomicInteger();
    private final StringBuffer failures = new StringBuffer();
    private int children;
    private int connections;
    /** Accepts that failed because their client died in the handshake (expected: said in the summary line). */
    private int acceptsFailed;
    /** What the first connection accepted said of itself ({@code QueuePair.diagnostics()}). */
    private String firstDiagnostics;
    private String expected = "";
    private int killed;
    private int ended;

    /**
     * A churn on {@code provider}, whose devices are opened with {@code options} (the listener's with a
     * progress thread too), {@code slots} clients at a time.
     */
    public Churn(String provider, Map<String, String> options, int slots, long seed) {
        this.provider = provider;
        this.options = options;
        this.slots = slots;
        this.random = new SplittableRandom(seed);
    }

    /** The connections must say {@code fragment} of themselves ({@code QueuePair.diagnostics()}): the transport they take. */
    public Churn expecting(String fragment) {
        this.expected = fragment;
        return this;
    }

    /** Runs until {@code target} cycles completed (or {@code maxSeconds} passed: then it fails), then checks. */
    public void run(int target, int maxSeconds) throws Exception {
        AtomicReference<Throwable> uncaught = new AtomicReference<>();
        Thread.UncaughtExceptionHandler before = Thread.getDefaultUncaughtExceptionHandler();
        Thread.setDefaultUncaughtExceptionHandler((t, e) -> uncaught.compareAndSet(null, new AssertionError(
                "thread " + t.getName() + " ended by an exception", e)));
        long survivedBefore = ProgressFaults.survivedCount();
        Map<String, String> listenerOptions = new HashMap<>(options);
        listenerOptions.put("progressThread", "true");
        String address = "127.0.0.1:" + Providers.address(provider, "churn").split(":")[1];
        try (Arena arena = Arena.ofShared(); RdmaDevice dev = RdmaDevice.open(provider, listenerOptions)) {
            MemorySegment mem = arena.allocate(slots * ChurnClient.SLOT + 1, 4096);
            ProtectionDomain pd = dev.allocPd();
            MemoryRegion mr = pd.register(mem, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ);
            CompletionQueue cq = dev.createCq(1024);
            CmId listener = dev.createCmId();
            listener.listen(address);
            String key = HexFormat.of().formatHex(mr.exportRemoteKey());
            List<CmId> live = new ArrayList<>();
            Child[] running = new Child[slots];
            long deadline = System.nanoTime() + maxSeconds * 1_000_000_000L;
            boolean passed = false;
            try {
                while (cycles.get() < target) {
                    assertThat(System.nanoTime()).as("%d of %d cycles in %d s (children %d, killed %d, ended themselves %d)",
                            cycles.get(), target, maxSeconds, children, killed, ended).isLessThan(deadline);
                    assertThat(failures).as("client failures").isEmpty();
                    for (int s = 0; s < slots; s++) {
                        Child c = running[s];
                        if (c != null && c.due()) {
                            c.kill();
                        }
                        if (c != null && !c.process.isAlive()) {
                            c.reap();
                            running[s] = null;
                        }
                        if (running[s] == null) {
                            running[s] = spawn(address, key, mem.address(), s, plan());
                        }
                    }
                    serve(listener, pd, cq, live);
                    Thread.sleep(1);
                }
                passed = true;
            } finally {
                for (Child c : running) {
                    if (c != null) {
                        c.kill();
                        c.process.waitFor(30, TimeUnit.SECONDS);
                    }
                }
                if (!passed) { // leave nothing behind for the next test
                    closeAll(live, listener, mr, cq, pd);
                }
            }
            // A new client after the churn: byte-exact cycles, served by the progress thread alone.
            Child last = spawn(address, key, mem.address(), 0, new Plan("none", 20, Long.MAX_VALUE));
            try {
                finish(last, listener, pd, cq, live, survivedBefore, uncaught);
            } catch (Throwable t) {
                last.kill();
                closeAll(live, listener, mr, cq, pd);
                throw t;
            }
            listener.close();
            mr.close();
            cq.close();
            pd.close();
            assertThat(dev.resources().survivors()).as(dev.resources().report()).isEmpty();
        } finally {
            Thread.setDefaultUncaughtExceptionHandler(before);
        }
    }

    /** What the last client and the listener must show at the end. */
    private void finish(Child last, CmId listener, ProtectionDomain pd, CompletionQueue cq, List<CmId> live,
                        long survivedBefore, AtomicReference<Throwable> uncaught) throws Exception {
        long lastDeadline = System.nanoTime() + 60_000_000_000L;
        while (last.process.isAlive()) {
            assertThat(System.nanoTime()).as("the last client's cycles end in time:\n%s", last.output()).isLessThan(lastDeadline);
            serve(listener, pd, cq, live);
            Thread.sleep(1);
        }
        last.reap();
        assertThat(last.process.exitValue()).as("the last client (its output:\n%s)", last.output()).isZero();
        assertThat(last.done).as("the last client's cycles").isEqualTo(20);
        assertThat(last.output()).contains("REGMEM CLEAN");
        long end = System.nanoTime() + 30_000_000_000L;
        while (!live.isEmpty()) {
            assertThat(System.nanoTime()).as("every connection ends").isLessThan(end);
            serve(listener, pd, cq, live);
            Thread.sleep(1);
        }
        assertThat(failures).as("client failures").isEmpty();
        assertThat(firstDiagnostics).as("the transport the connections take").contains(expected);
        assertThat(progressThreadAlive()).as("the listener's progress thread is alive").isTrue();
        assertThat(uncaught.get()).as("no thread ended by an exception").isNull();
        assertThat(ProgressFaults.survivedCount()).as("no failure reached a progress thread's last guard")
                .isEqualTo(survivedBefore);
        System.out.println(provider + " churn: " + cycles.get() + " cycles by " + children + " client processes ("
                + killed + " killed, " + ended + " ended themselves), " + connections + " connections accepted, " + acceptsFailed
                + " accepts failed as their client died in the handshake; the first connection: " + firstDiagnostics);
    }

    /** Ends every connection (forcibly) and closes the listener's objects, whatever state they are in. */
    private static void closeAll(List<CmId> live, CmId listener, MemoryRegion mr, CompletionQueue cq, ProtectionDomain pd) {
        for (CmId id : live) {
            try {
                if (id.connState() == CmId.ConnState.CONNECTED) {
                    id.disconnect();
                }
                id.destroyQp();
                id.close();
            } catch (RuntimeException ignored) {
                // best effort: the test fails anyway
            }
        }
        live.clear();
        for (AutoCloseable c : new AutoCloseable[] {listener, mr, cq, pd}) {
            try {
                c.close();
            } catch (Exception ignored) {
                // best effort
            }
        }
    }

    private boolean progressThreadAlive() {
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (t.getName().startsWith("regmem-" + provider + "-progress") && t.isAlive()) {
                return true;
            }
        }
        return false;
    }

    /** Accepts what came, and ends the connections whose client left or died. */
    private void serve(CmId listener, ProtectionDomain pd, CompletionQueue cq, List<CmId> live) {
        ChurnListener.serve(listener, pd, cq, live, id -> {
            if (connections++ == 0) {
                firstDiagnostics = id.qp().diagnostics();
            }
        }, e -> acceptsFailed++); // its client died in the handshake, as the plan has some do
    }

    /** How a client lives: dies at a point of a cycle, or is killed after a time. */
    private record Plan(String die, int at, long killAfterNanos) {
    }

    private Plan plan() {
        int k = random.nextInt(10);
        if (k < 4) { // killed from outside at a random moment
            return new Plan("none", 1_000_000, 100_000_000L + random.nextLong(900_000_000L));
        }
        if (k < 8) { // ends itself at a chosen point
            return new Plan(DEATHS[random.nextInt(DEATHS.length)], random.nextInt(200), Long.MAX_VALUE);
        }
        return new Plan("none", 50 + random.nextInt(300), Long.MAX_VALUE); // lives its cycles out
    }

    private Child spawn(String address, String key, long base, int slot, Plan p) throws IOException {
        children++;
        StringBuilder opts = new StringBuilder();
        options.forEach((k, v) -> opts.append(opts.isEmpty() ? "" : ",").append(k).append('=').append(v));
        return new Child(ChildJvm.of(ChurnClient.class).jvm("-Xms64m", "-Xmx64m", "-XX:TieredStopAtLevel=1", "-Xshare:auto")
                .args(provider, address, opts.toString(), key, Long.toString(base), Integer.toString(slot),
                        Long.toString(random.nextLong()), p.die(), Integer.toString(p.at())), p);
    }

    /** A client process and what it said (all but its cycle lines). */
    private final class Child {
        final ChildJvm jvm;
        final Process process;
        final Plan plan;
        final long started = System.nanoTime();
        /** The cycles it completed (its reader thread writes; read after {@link #reap}). */
        volatile int done;

        Child(ChildJvm.Spec spec, Plan plan) throws IOException {
            this.plan = plan;
            this.jvm = spec.keep(line -> !line.startsWith("REGMEM CYCLE ")).onLine(this::line).start();
            this.process = jvm.process;
        }

        private void line(String line) {
            if (line.startsWith("REGMEM CYCLE ")) {
                cycles.incrementAndGet();
                done++;
            }
            if (line.startsWith("REGMEM FAILED") || line.startsWith("REGMEM LEFT")) {
                failures.append(line).append('\n');
            }
        }

        String output() {
            return jvm.output();
        }

        private boolean killedHere;

        boolean due() {
            return !killedHere && process.isAlive() && System.nanoTime() - started > plan.killAfterNanos();
        }

        void kill() {
            if (!killedHere && process.isAlive()) {
                killedHere = true;
                killed++;
                process.destroyForcibly(); // SIGKILL
            }
        }

        void reap() throws InterruptedException {
            assertThat(process.waitFor(30, TimeUnit.SECONDS)).isTrue();
            jvm.drained();
            int exit = process.exitValue();
            if (exit == 137 && !plan.die().equals("none")) {
                ended++;
            } else if (exit != 0 && exit != 137 && plan.killAfterNanos() == Long.MAX_VALUE) {
                failures.append("a client exited ").append(exit).append(" (plan ").append(plan).append("):\n").append(output());
            }
        }
    }
}
