package io.regmem.bench;

import io.regmem.registration.CmId;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.QueuePair;
import io.regmem.registration.RdmaDevice;
import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.util.Locale;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code regmem serve}: the server of the RPC demo in a process of its own, for
 * {@code regmem demo --connect host:port} in another process or on another host. Serves one
 * connection after another (each: its QP, request buffers and staging memory, torn down and
 * checked when the client disconnects), until {@code --connections} were served or the process
 * is stopped. Give both sides the same {@code --rpc-payloads} and {@code --rpc-concurrency}.
 */
@Command(name = "serve", mixinStandardHelpOptions = true,
        description = "Run the RPC demo's server (for regmem demo --connect).")
final class ServeCommand implements Callable<Integer> {

    @Option(names = "--provider", description = "RDMA provider (default: ${DEFAULT-VALUE}).", defaultValue = "ucx")
    String provider;

    @Option(names = "--listen", required = true, description = "host:port to listen at (the port must be free).")
    String listen;

    @Option(names = "--rpc-payloads", split = ",", description = "The clients' argument and result sizes "
            + "(default: ${DEFAULT-VALUE}): the largest sets the staging memory.", defaultValue = "64,512,4096,65536")
    int[] rpcPayloads;

    @Option(names = "--rpc-concurrency", description = "Calls in flight per client, 1 to 1024 (default: ${DEFAULT-VALUE}).",
            defaultValue = "16")
    int rpcConcurrency;

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
        boolean allClean = true;
        try (RdmaDevice dev = RdmaDevice.open(provider)) {
            ProtectionDomain pd = dev.allocPd();
            CompletionQueue cq = dev.createCq(8192);
            CmId listener = dev.createCmId();
            listener.listen(listen);
            out.printf(Locale.ROOT, "regmem serve: listening at %s (%s provider, %d calls in flight, payloads up to %d B)%n",
                    listen, provider, reqs, slotBytes);
            out.flush();
            for (int served = 0; connections == 0 || served < connections; served++) {
                CmId id;
                while ((id = listener.getRequest()) == null) {
                    Thread.sleep(1);
                }
                allClean &= serve(out, pd, cq, id, reqs, slotBytes, served + 1);
            }
            listener.close();
            cq.close();
            pd.close();
            String report = dev.resources().report();
            out.printf(Locale.ROOT, "regmem serve: done; device: %s%n", report);
            allClean &= report.equals("no live objects");
        }
        return allClean ? 0 : 1;
    }

    /** One connection: accept, serve until the client disconnects, tear down; true if nothing was left. */
    private static boolean serve(PrintStream out, ProtectionDomain pd, CompletionQueue cq, CmId id, int reqs, long slotBytes,
                                 int number) {
        QueuePair qp = id.createQp(pd, RpcDemo.serverQp(reqs).sendCq(cq).recvCq(cq));
        boolean[] clean = {false};
        String report;
        try (Arena arena = Arena.ofShared()) {
            RpcDemo.ServerEnd end = new RpcDemo.ServerEnd(pd, qp, cq, arena, reqs, slotBytes, "rpc-server-buffers-" + number);
            id.accept();
            out.printf(Locale.ROOT, "regmem serve: connection %d accepted%n", number);
            out.flush();
            int idle = 0;
            while (end.server.transport().isConnected() && qp.state() != QueuePair.State.ERROR) {
                if (end.server.transport().poll() > 0) {
                    idle = 0;
                } else if (++idle > RpcDemo.IDLE_SPINS) {
                    Thread.yield();
                }
            }
            report = end.close(clean);
        }
        id.destroyQp();
        id.close();
        out.printf(Locale.ROOT, "regmem serve: connection %d ended; %s%n", number, report);
        out.flush();
        return clean[0];
    }
}
