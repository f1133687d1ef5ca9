package io.regmem.registration.testkit;

import io.regmem.core.RdmaException;
import io.regmem.registration.Access;
import io.regmem.registration.CmId;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.RdmaDevice;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;

/**
 * A listener process for {@link ChurnClient}s (for tests that put the two in different namespaces):
 * a device with a progress thread listening at the address in its second argument, a region of
 * {@link ChurnClient#SLOT} for remote WRITEs and READs, connections accepted and ended as they come.
 * It prints {@code REGMEM KEY <hex> <address>}, {@code REGMEM LISTENING}, {@code REGMEM ACCEPTED <the
 * QP's diagnostics>} for each connection and, at the end of its input, {@code REGMEM CLEAN} if nothing
 * was left. Arguments: provider, address, options ({@code k=v,k=v}).
 */
public final class ChurnListener {
    private ChurnListener() {
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> options = ChildSide.options(args, 2);
        options.put("progressThread", "true");
        AtomicBoolean end = new AtomicBoolean();
        Thread.ofPlatform().daemon().start(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in))) {
                while (in.readLine() != null) {
                    // nothing but the end is a command
                }
            } catch (IOException ignored) {
                // the end either way
            }
            end.set(true);
        });
        try (Arena arena = Arena.ofShared(); RdmaDevice dev = RdmaDevice.open(args[0], options)) {
            MemorySegment mem = arena.allocate(ChurnClient.SLOT, 4096);
            ProtectionDomain pd = dev.allocPd();
            MemoryRegion mr = pd.register(mem, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ);
            CompletionQueue cq = dev.createCq(256);
            CmId listener = dev.createCmId();
            listener.listen(args[1]);
            ChildSide.say("KEY " + HexFormat.of().formatHex(mr.exportRemoteKey()) + " " + mem.address());
            ChildSide.say("LISTENING");
            List<CmId> live = new ArrayList<>();
            while (!end.get()) {
                serve(listener, pd, cq, live, id -> ChildSide.say("ACCEPTED " + id.qp().diagnostics()),
                        e -> ChildSide.say("ACCEPT FAILED " + e.getMessage()));
                Thread.sleep(1);
            }
            for (CmId id : live) {
                if (id.connState() == CmId.ConnState.CONNECTED) {
                    id.disconnect();
                }
                id.destroyQp();
                id.close();
            }
            listener.close();
            mr.close();
            cq.close();
            pd.close();
            ChildSide.say(dev.resources().survivors().isEmpty() ? "CLEAN" : "LEFT " + dev.resources().report());
        }
    }

    /**
     * One round of a listener's work: accepts every request that came (a QP each; {@code accepted} is
     * told, or {@code failed} when the requester died during the handshake) and ends the connections in
     * {@code live} whose peer left or died.
     */
    static void serve(CmId listener, ProtectionDomain pd, CompletionQueue cq, List<CmId> live, Consumer<CmId> accepted,
                      Consumer<RdmaException> failed) {
        for (CmId req; (req = listener.getRequest()) != null; ) {
            req.createQp(pd, new QpInitAttributes().sendCq(cq).recvCq(cq).maxSendWr(4).maxRecvWr(1));
            try {
                req.accept();
                live.add(req);
                accepted.accept(req);
            } catch (RdmaException e) {
                failed.accept(e);
                req.destroyQp();
                req.close();
            }
        }
        for (Iterator<CmId> it = live.iterator(); it.hasNext(); ) {
            CmId id = it.next();
            if (id.connState() == CmId.ConnState.DISCONNECTED) {
                id.destroyQp();
                id.close();
                it.remove();
            }
        }
    }

}
