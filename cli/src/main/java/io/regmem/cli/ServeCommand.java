package io.regmem.cli;

import io.regmem.registration.CmId;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.QueuePair;
import io.regmem.registration.RdmaDevice;
import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine;

/**
 * {@code regmem serve}: the server of the RPC demo in a process of its own, for
 * {@code regmem demo --connect host:port} in another process or on another host. Serves one
 * connection after another (each: its QP, request buffers and staging memory, torn down and
 * checked when the client disconnects), until {@code --connections} were served or the process
 * is stopped. Give both sides the same {@code --rpc-payloads} and {@code --rpc-concurrency} (a client
 * asking for more calls in flight or larger payloads than this server serves is refused, with both
 * sides' values in one line). A connection that fails in any way (a client that vanishes or stalls at
 * any step, breaks the protocol, or cannot be reached) is one line naming the client and the reason;
 * its resources are given back and the server goes on. Only a signal or a listener error ends it.
 */
@Command(name = "serve", mixinStandardHelpOptions = true,
        description = "Run the RPC demo's server (for regmem demo --connect).")
final class ServeCommand implements Callable<Integer> {

    @Option(names = "--provider", description = "RDMA provider (default: ${DEFAULT-VALUE}).", defaultValue = "ucx")
    String provider;

    @Option(names = "--listen", required = true, description = "host:port to listen at (the port must be free; 0: one the "
            + "system picks, which the listening line names).")
    String listen;

    @Option(names = "--rpc-payloads", split = ",", description = "The clients' argument and result sizes "
            + "(default: ${DEFAULT-VALUE}): the largest sets the staging memory.", defaultValue = "64,512,4096,65536")
    int[] rpcPayloads;

    @Option(names = "--rpc-concurrency", description = "Calls in flight per client, 1 to 1024 (default: ${DEFAULT-VALUE}).",
            defaultValue = "16")
    int rpcConcurrency;

    @Option(names = "--device-option", paramLabel = "KEY=VALUE", description = "An option for the device, as "
            + "RdmaDevice.open(provider, options) takes it; repeatable. ucx: secret=TEXT or secretFile=PATH (the "
            + "connection secret clients must hold; else REGMEM_SECRET or ~/.regmem/secret), handshakeTimeoutMillis=N.")
    Map<String, String> deviceOptions = new LinkedHashMap<>();

    @Option(names = "--connections", description = "Serve this many connections, then exit (default: ${DEFAULT-VALUE}: "
            + "until stopped).", defaultValue = "0")
    int connections;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Override
    public Integer call() throws Exception {
        PrintStream out = System.out;
        OptionCheck check = new OptionCheck("serve", spec.commandLine().getErr())
                .oneOf("--provider", provider, DemoCommand.providers(), "a known provider")
                .eachInRange("--rpc-payloads", rpcPayloads, 1, DemoCommand.MAX_RPC_PAYLOAD)
                .range("--rpc-concurrency", rpcConcurrency, 1, DemoCommand.MAX_RPC_CONCURRENCY)
                .range("--connections", connections, 0, Integer.MAX_VALUE);
        if (!check.ok()) {
            return OptionCheck.USAGE;
        }
        int reqs = RpcDemo.requestsFor(rpcConcurrency);
        long slotBytes = Math.max(RpcDemo.maxPayload(rpcPayloads), 64);
        RpcDemo.Terms offered = new RpcDemo.Terms(rpcConcurrency, RpcDemo.maxPayload(rpcPayloads));
        boolean allClean = true;
        // SIGTERM or SIGINT: the loops below stop, the connection under way is torn down, and the
        // closing lines are printed before the JVM goes (the hook waits up to 10 s for that).
        CountDownLatch finished = new CountDownLatch(1);
        Thread hook = new Thread(() -> {
            stopping = true;
            try {
                finished.await(10, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "regmem-serve-stop");
        Runtime.getRuntime().addShutdownHook(hook);
        int served = 0;
        try (RdmaDevice dev = RdmaDevice.open(provider, deviceOptions)) {
            ProtectionDomain pd = dev.allocPd();
            CompletionQueue cq = dev.createCq(8192);
            CmId listener = dev.createCmId();
            listener.bindAddr(listen); // port 0: the system picks one, and localAddress() says which
            listener.listen();
            out.printf(Locale.ROOT, "regmem serve: listening at %s (%s provider, %d calls in flight, payloads up to %d B)%n",
                    listener.localAddress(), provider, reqs, slotBytes);
            out.flush();
            while (!stopping && (connections == 0 || served < connections)) {
                CmId id;
                while ((id = listener.getRequest()) == null && !stopping) {
                    Thread.sleep(1);
                }
                if (id == null) {
                    break;
                }
                allClean &= serve(out, pd, cq, id, offered, reqs, slotBytes, ++served);
            }
            if (stopping) {
                out.printf(Locale.ROOT, "regmem serve: stopped by a signal after %d connections%n", served);
            }
            listener.close();
            cq.close();
            pd.close();
            String report = dev.resources().report();
            out.printf(Locale.ROOT, "regmem serve: done; device: %s%n", report);
            allClean &= report.equals("no live objects");
        } finally {
            out.flush();
            finished.countDown();
            try {
                Runtime.getRuntime().removeShutdownHook(hook);
            } catch (IllegalStateException shuttingDown) {
                // the hook is running: it returns now
            }
        }
        return allClean ? 0 : 1;
    }

    /** Set by the shutdown hook (SIGTERM, SIGINT): the serve loops stop. */
    private static volatile boolean stopping;

    /**
     * One connection: check the client's terms (or refuse it with this server's), accept, serve until
     * the client disconnects or goes away, tear down. Whatever fails on the way (the client vanishes,
     * stalls, breaks the protocol, UCX cannot reach it) is one line naming the client and the reason;
     * everything of the connection is given back either way. True if nothing was left behind.
     */
    private static boolean serve(PrintStream out, ProtectionDomain pd, CompletionQueue cq, CmId id, RpcDemo.Terms offered,
                                 int reqs, long slotBytes, int number) {
        String peer = id.peerAddress();
        RpcDemo.Terms asked = RpcDemo.Terms.parse(id.privateData());
        if (asked == null || !asked.fitIn(offered)) {
            id.reject(offered.bytes());
            id.close();
            out.printf(Locale.ROOT, "regmem serve: connection %d from %s refused: %s%n", number, peer, asked == null
                    ? "its request carries no demo terms (not a regmem demo client, or another version)"
                    : "it asks for " + asked + ", this server serves " + offered);
            out.flush();
            return true;
        }
        boolean[] clean = {true};
        String report = "nothing was set up";
        String failure = null;
        long calls = 0;
        Arena arena = Arena.ofShared();
        RpcDemo.ServerEnd end = null;
        try {
            QueuePair qp = id.createQp(pd, RpcDemo.serverQp(reqs).sendCq(cq).recvCq(cq));
            end = new RpcDemo.ServerEnd(pd, qp, cq, arena, reqs, slotBytes, "rpc-server-buffers-" + number);
            id.accept();
            out.printf(Locale.ROOT, "regmem serve: connection %d from %s accepted%n", number, peer);
            out.flush();
            int idle = 0;
            while (end.server.transport().isConnected() && qp.state() != QueuePair.State.ERROR && !stopping) {
                if (end.server.transport().poll() > 0) {
                    idle = 0;
                } else if (++idle > RpcDemo.IDLE_SPINS) {
                    Thread.yield();
                }
            }
        } catch (RuntimeException e) {
            failure = e.getMessage() == null ? e.toString() : e.getMessage();
        } finally {
            try {
                if (id.connState() == CmId.ConnState.CONNECTED) {
                    id.disconnect();
                }
                if (end != null) {
                    calls = end.server.replied();
                    report = end.close(clean);
                }
                if (id.qp() != null) {
                    id.destroyQp();
                }
                id.close();
            } finally {
                arena.close();
            }
        }
        if (failure != null) {
            out.printf(Locale.ROOT, "regmem serve: connection %d from %s failed after %,d calls: %s; %s%n", number, peer,
                    calls, failure.replace('\n', ' '), report);
        } else {
            out.printf(Locale.ROOT, "regmem serve: connection %d ended after %,d calls; %s%n", number, calls, report);
        }
        out.flush();
        return clean[0];
    }
}
