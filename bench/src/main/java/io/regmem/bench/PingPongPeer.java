package io.regmem.bench;

import io.regmem.registration.CmId;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.QueuePair;
import io.regmem.registration.RdmaDevice;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The echo process of {@link PingPongBenchmark}'s {@code ucx-process} and {@code shm-process} pairs: a
 * device of the provider in its second argument (default ucx) with the options in its third ({@code
 * k=v;k=v}, default none; no progress thread: its one thread busy-polls the CQ, as the benchmark's
 * thread does), one connection accepted at the address in its first argument, every message sent back
 * ({@link VerbsEcho}). Prints {@code READY} once it accepted; exits when its standard input ends.
 */
public final class PingPongPeer {
    private PingPongPeer() {
    }

    public static void main(String[] args) throws Exception {
        try (Arena arena = Arena.ofShared(); RdmaDevice dev = RdmaDevice.open(args.length > 1 ? args[1] : "ucx",
                PingPongBenchmark.options(args.length > 2 ? args[2] : ""))) {
            ProtectionDomain pd = dev.allocPd();
            CompletionQueue cq = dev.createCq(256);
            CmId listener = dev.createCmId();
            listener.listen(args[0]);
            System.out.println("LISTENING");
            System.out.flush();
            CmId id;
            while ((id = listener.getRequest()) == null) {
                Thread.sleep(1);
            }
            var qp = id.createQp(pd, PingPongBenchmark.attributes(cq));
            VerbsEcho echo = new VerbsEcho(pd, qp, cq, arena);
            id.accept();
            System.out.println("READY");
            System.out.flush();
            AtomicBoolean stop = new AtomicBoolean();
            Thread.ofPlatform().daemon().start(() -> {
                try {
                    while (System.in.read() >= 0) {
                        // until the benchmark ends
                    }
                } catch (IOException ignored) {
                    // ended
                }
                stop.set(true);
            });
            echo.echo(() -> stop.get() || qp.state() == QueuePair.State.ERROR);
            echo.close();
            if (id.connState() == CmId.ConnState.CONNECTED) {
                id.disconnect();
            }
            id.destroyQp();
            id.close();
            listener.close();
            cq.close();
            pd.close();
        }
    }
}
