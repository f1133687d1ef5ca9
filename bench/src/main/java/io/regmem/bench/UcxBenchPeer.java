package io.regmem.bench;

import io.regmem.core.Chunk;
import io.regmem.core.ChunkSource;
import io.regmem.registration.Access;
import io.regmem.registration.CmId;
import io.regmem.registration.CompletionChannel;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.WorkCompletion;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.HexFormat;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The target process of {@link UcxPutBenchmark}: a UCX device whose progress thread executes what
 * arrives without anybody polling (idling as its second argument says; default busy), 16 MiB that UCX allocated ({@code chunkSource()})
 * registered for remote writes and reads,
 * one connection accepted at the address in its first argument. Prints {@code KEY <hex> <address>}
 * once connected; exits when its standard input ends. With {@code channel} for the idle strategy the
 * device has no progress thread: a thread of this process serves the peer by waiting on a completion
 * channel ({@code CompletionChannel.getEvent}) with the connection's CQ armed, as an event loop does.
 */
public final class UcxBenchPeer {
    private UcxBenchPeer() {
    }

    public static void main(String[] args) throws Exception {
        String provider = args.length > 3 ? args[3] : "ucx";
        boolean channel = args.length > 1 && args[1].equals("channel");
        Map<String, String> options = channel ? Map.of() : provider.equals("ucx")
                ? Map.of("progressThread", "true", "idleStrategy", args.length > 1 ? args[1] : "busy",
                        "rndvThreshold", args.length > 2 ? args[2] : "65536")
                : Map.of("progressThread", "true", "idleStrategy", args.length > 1 ? args[1] : "busy");
        try (Arena arena = Arena.ofShared(); RdmaDevice dev = RdmaDevice.open(provider, options)) {
            // ucx: memory UCX allocates (a peer that trusts this one may put into it directly); shm: an arena's.
            ChunkSource source = dev.chunkSource();
            Chunk chunk = source == null ? null : source.allocate(16 << 20, 4096);
            MemorySegment memory = chunk != null ? MemorySegment.ofAddress(chunk.address()).reinterpret(chunk.size())
                    : arena.allocate(16 << 20, 4096);
            ProtectionDomain pd = dev.allocPd();
            CompletionChannel events = channel ? dev.createCompletionChannel() : null;
            CompletionQueue cq = dev.createCq(1024, events);
            MemoryRegion mr = pd.register(memory, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ,
                    Access.REMOTE_ATOMIC);
            CmId listener = dev.createCmId();
            listener.listen(args[0]);
            System.out.println("LISTENING");
            System.out.flush();
            CmId id;
            while ((id = listener.getRequest()) == null) {
                Thread.sleep(1);
            }
            id.createQp(pd, new QpInitAttributes().sendCq(cq).recvCq(cq).maxSendWr(256).maxRecvWr(16));
            id.accept();
            AtomicBoolean stop = new AtomicBoolean();
            Thread waiter = channel ? Thread.ofPlatform().name("peer-channel-waiter").start(() -> {
                WorkCompletion[] wcs = {new WorkCompletion()};
                while (!stop.get()) {
                    cq.requestNotify(false);
                    if (cq.poll(wcs) == 0 && events.getEvent(100, TimeUnit.MILLISECONDS) != null) {
                        cq.ackEvents(1);
                    }
                }
            }) : null;
            System.out.println("KEY " + HexFormat.of().formatHex(mr.exportRemoteKey()) + " " + memory.address());
            System.out.flush();
            while (System.in.read() >= 0) {
                // until the benchmark ends
            }
            stop.set(true);
            if (waiter != null) {
                waiter.join();
            }
            id.disconnect();
            id.destroyQp();
            id.close();
            listener.close();
            mr.close();
            if (chunk != null) {
                source.release(chunk);
            }
            cq.close();
            if (events != null) {
                events.close();
            }
            pd.close();
        }
    }
}
