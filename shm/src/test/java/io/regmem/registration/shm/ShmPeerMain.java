package io.regmem.registration.shm;

import io.regmem.registration.Access;
import io.regmem.registration.CmId;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.Opcode;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import io.regmem.registration.testkit.ChildSide;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.HexFormat;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;

/**
 * The other process of the shm process tests: an shm device that listens at the address in its first
 * argument (its second: device options {@code k=v,k=v}), registers {@link #SIZE} bytes (filled with
 * {@link #pattern}) for remote reads, writes and atomics, and serves one connection after another,
 * polling its CQ all the time: it echoes every message it receives back with a SEND. It tells the
 * test what it needs on stdout ({@code REGMEM LISTENING}, {@code REGMEM KEY <hex> <address>},
 * {@code REGMEM CONNECTED <diagnostics>}, {@code REGMEM DISCONNECTED}); the command {@code STATS} prints
 * {@code REGMEM STATS fds=N ...}; {@code DEREGWATCH} deregisters the region and fills it with
 * {@link #WATCH}, and {@code CHECK} then says {@code INTACT} if nothing wrote it since (else
 * {@code CHANGED at <offset>}); {@code DIAG} prints its QP's diagnostics; with the option
 * {@code progressThread=true} its main thread only looks every 5 ms; the end of its input tears
 * everything down and prints {@code REGMEM CLEAN} when nothing was left.
 */
public final class ShmPeerMain {
    static final long SIZE = 4L << 20;
    /** What DEREGWATCH fills the deregistered region with. */
    static final byte WATCH = 0x5A;
    private static final int RECVS = 16;
    private static final int RECV_SIZE = 65536;

    private ShmPeerMain() {
    }

    /**
     * This process's open descriptors, its mappings of lane memfds, all its mappings and its resident
     * set: {@code fds=N lanes=L maps=M rssKiB=R}.
     */
    static String stats() throws IOException {
        long fds;
        try (var f = java.nio.file.Files.list(java.nio.file.Path.of("/proc/self/fd"))) {
            fds = f.count();
        }
        java.util.List<String> maps = java.nio.file.Files.readAllLines(java.nio.file.Path.of("/proc/self/maps"));
        long lanes = maps.stream().filter(l -> l.contains("regmem-shm-lane")).count();
        long rss = java.nio.file.Files.readAllLines(java.nio.file.Path.of("/proc/self/status")).stream()
                .filter(l -> l.startsWith("VmRSS:")).mapToLong(l -> Long.parseLong(l.replaceAll("[^0-9]", ""))).sum();
        return "fds=" + fds + " lanes=" + lanes + " maps=" + maps.size() + " rssKiB=" + rss + " offHeapKiB=" + offHeap();
    }

    /**
     * Off-heap memory the JVM's code allocated and still holds (Native Memory Tracking's "Other"
     * category: FFM arenas, direct buffers), in KiB; -1 without {@code -XX:NativeMemoryTracking}.
     */
    static long offHeap() {
        try {
            Object out = java.lang.management.ManagementFactory.getPlatformMBeanServer().invoke(
                    new javax.management.ObjectName("com.sun.management:type=DiagnosticCommand"), "vmNativeMemory",
                    new Object[] {new String[] {"summary"}}, new String[] {String[].class.getName()});
            for (String line : String.valueOf(out).split("\n")) {
                int at = line.indexOf("Other (reserved=");
                if (at >= 0) {
                    String c = line.substring(line.indexOf("committed=") + 10);
                    return Long.parseLong(c.substring(0, c.indexOf("KB")));
                }
            }
            return -1;
        } catch (Exception e) {
            return -1;
        }
    }

    /** The figure {@code name} of a {@link #stats()} line. */
    static long stat(String line, String name) {
        for (String part : line.split(" ")) {
            if (part.startsWith(name + "=")) {
                return Long.parseLong(part.substring(name.length() + 1));
            }
        }
        throw new IllegalArgumentException(name + " not in " + line);
    }

    /** The byte at offset {@code i} of the registered region. */
    static byte pattern(long i) {
        return (byte) (i * 31 + 7);
    }

    public static void main(String[] args) throws Exception {
        ConcurrentLinkedQueue<String> commands = ChildSide.commands();
        Map<String, String> options = ChildSide.options(args, 1);
        if (args.length > 2 && args[2].startsWith("client ")) {
            client(args[0], options, args[2].substring(7));
            return;
        }
        try (Arena arena = Arena.ofShared(); RdmaDevice dev = RdmaDevice.open("shm", options)) {
            MemorySegment mem = arena.allocate(SIZE, 4096);
            for (long i = 0; i < SIZE; i++) {
                mem.set(ValueLayout.JAVA_BYTE, i, pattern(i));
            }
            MemorySegment recvMem = arena.allocate((long) RECVS * RECV_SIZE, 4096);
            ProtectionDomain pd = dev.allocPd();
            MemoryRegion mr = pd.register(mem, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ,
                    Access.REMOTE_ATOMIC);
            MemoryRegion recvMr = pd.register(recvMem, Access.LOCAL_WRITE);
            CompletionQueue cq = dev.createCq(256);
            CmId listener = dev.createCmId();
            listener.listen(args[0]);
            System.out.println("REGMEM KEY " + HexFormat.of().formatHex(mr.exportRemoteKey()) + " " + mem.address());
            System.out.println("REGMEM LISTENING");
            System.out.flush();
            WorkCompletion[] wcs = new WorkCompletion[32];
            for (int i = 0; i < wcs.length; i++) {
                wcs[i] = new WorkCompletion();
            }
            WorkRequest wr = new WorkRequest(1);
            CmId id = null;
            QueuePair qp = null;
            boolean end = false;
            // With a progress thread, this thread only looks now and then (the progress thread serves).
            boolean lazy = "true".equals(options.get("progressThread"));
            while (!end) {
                if (lazy) {
                    Thread.sleep(5);
                }
                for (String c; (c = commands.poll()) != null; ) {
                    if (c.equals("END")) {
                        end = true;
                    } else if (c.equals("STATS")) {
                        System.out.println("REGMEM STATS " + stats());
                        System.out.flush();
                    } else if (c.equals("DEREGWATCH") && !mr.isDestroyed()) {
                        mr.close(); // deregistered while the peer's WRITEs and READs flow: then nothing may touch it
                        mem.fill(WATCH);
                        System.out.println("REGMEM DEREGISTERED");
                        System.out.flush();
                    } else if (c.equals("DIAG")) {
                        System.out.println("REGMEM DIAG " + (qp == null ? "no connection" : qp.diagnostics()));
                        System.out.flush();
                    } else if (c.equals("CHECK")) {
                        long changed = -1;
                        for (long i = 0; i < SIZE && changed < 0; i++) {
                            if (mem.get(ValueLayout.JAVA_BYTE, i) != WATCH) {
                                changed = i;
                            }
                        }
                        System.out.println(changed < 0 ? "REGMEM INTACT" : "REGMEM CHANGED at " + changed);
                        System.out.flush();
                    }
                }
                if (id == null) {
                    CmId req = listener.getRequest();
                    if (req != null) {
                        id = req;
                        qp = id.createQp(pd, new QpInitAttributes().sendCq(cq).recvCq(cq).maxSendWr(64).maxRecvWr(RECVS)
                                .maxSendSge(4).maxRecvSge(1));
                        for (int i = 0; i < RECVS; i++) {
                            qp.postRecv(wr.reset().wrId(i).addSge(recvMem.address() + (long) i * RECV_SIZE, RECV_SIZE,
                                    recvMr.lkey()));
                        }
                        id.accept();
                        System.out.println("REGMEM CONNECTED " + qp.diagnostics());
                        System.out.flush();
                    } else {
                        Thread.onSpinWait();
                    }
                }
                if (qp != null) {
                    int n = cq.poll(wcs);
                    for (int k = 0; k < n; k++) {
                        WorkCompletion wc = wcs[k];
                        if (wc.opcode() == Opcode.RECV && wc.status() == WcStatus.SUCCESS) {
                            int slot = (int) wc.wrId();
                            // echo it, then post the receive again
                            qp.postSend(wr.reset().wrId(1000 + slot).opcode(Opcode.SEND).signaled(true)
                                    .addSge(recvMem.address() + (long) slot * RECV_SIZE, wc.byteLen(), recvMr.lkey()));
                            qp.postRecv(wr.reset().wrId(slot).addSge(recvMem.address() + (long) slot * RECV_SIZE, RECV_SIZE,
                                    recvMr.lkey()));
                        }
                    }
                    if (id.connState() == CmId.ConnState.DISCONNECTED) {
                        while (cq.poll(wcs) > 0) {
                            Thread.onSpinWait();
                        }
                        id.destroyQp();
                        id.close();
                        id = null;
                        qp = null;
                        System.out.println("REGMEM DISCONNECTED");
                        System.out.flush();
                    }
                }
            }
            if (id != null) {
                id.disconnect();
                while (cq.poll(wcs) > 0) {
                    Thread.onSpinWait();
                }
                id.destroyQp();
                id.close();
            }
            listener.close();
            if (!mr.isDestroyed()) {
                mr.close();
            }
            recvMr.close();
            cq.close();
            pd.close();
            System.out.println(dev.resources().survivors().isEmpty() ? "REGMEM CLEAN" : "REGMEM LEFT " + dev.resources().report());
            System.out.flush();
        }
    }

    /**
     * The client mode (third argument {@code client <hex key> <address>}): connects to the listener at
     * {@code address} and streams 1 MiB WRITEs and READs through the key, 8 in flight, for ever; prints
     * {@code REGMEM STREAMING} once the first completed. The test kills it in the middle.
     */
    private static void client(String address, Map<String, String> options, String keyAndAddress) throws Exception {
        String[] k = keyAndAddress.split(" ");
        try (Arena arena = Arena.ofShared(); RdmaDevice dev = RdmaDevice.open("shm", options)) {
            MemorySegment mem = arena.allocate(SIZE, 4096);
            ProtectionDomain pd = dev.allocPd();
            MemoryRegion mr = pd.register(mem, Access.LOCAL_WRITE);
            CompletionQueue cq = dev.createCq(64);
            CmId id = dev.createCmId();
            QueuePair qp = id.createQp(pd, new QpInitAttributes().sendCq(cq).recvCq(cq).maxSendWr(16).maxRecvWr(1));
            int rkey = qp.importRemoteKey(HexFormat.of().parseHex(k[0]));
            long remote = Long.parseLong(k[1]);
            id.connect(address);
            while (id.connState() != CmId.ConnState.CONNECTED) {
                Thread.onSpinWait();
            }
            WorkRequest w = new WorkRequest(1);
            WorkCompletion[] wcs = {new WorkCompletion(), new WorkCompletion(), new WorkCompletion(), new WorkCompletion()};
            long chunk = 1L << 20;
            int inFlight = 0;
            boolean said = false;
            for (long n = 0; qp.state() == QueuePair.State.RTS; n++) {
                while (inFlight < 8) {
                    qp.postSend(w.reset().wrId(n).opcode(n % 2 == 0 ? Opcode.RDMA_WRITE : Opcode.RDMA_READ).signaled(true)
                            .addSge(mem.address() + chunk * (n % 4), chunk, mr.lkey()).remote(remote, rkey));
                    inFlight++;
                }
                int c = cq.poll(wcs);
                inFlight -= c;
                if (c > 0 && !said) {
                    said = true;
                    System.out.println("REGMEM STREAMING");
                    System.out.flush();
                }
            }
        }
    }
}
