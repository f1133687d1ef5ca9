package io.regmem.registration.ucx;

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
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.HexFormat;
import java.util.concurrent.ConcurrentLinkedQueue;

/**
 * The other process of {@link UcxProcessTest}: a UCX device that listens at the address in its
 * first argument, registers 1 MiB (filled with {@link #pattern}) for remote reads and writes, and
 * serves one connection after another: it executes what the peer sends (its CQ is polled all the
 * time), echoes every message it receives back with a SEND, and tells the test on stdout what it
 * needs ({@code REGMEM LISTENING}, {@code REGMEM KEY <hex> <address>}, {@code REGMEM DEREGISTERED}).
 * Commands on stdin: {@code DEREG} deregisters the region; {@code DEREGWATCH} deregisters it and
 * fills it with {@link #WATCH}, and {@code CHECK} then says {@code INTACT} if nothing wrote it since
 * (else {@code CHANGED at <offset>}); end of input tears everything down and
 * prints {@code REGMEM CLEAN} when nothing was left. With {@code writer} as second argument it is a
 * client instead, which WRITEs into the test's memory ({@link #writer}).
 */
public final class UcxPeerMain {
    private static final int RECVS = 16;
    private static final int RECV_SIZE = 8192;
    /** What DEREGWATCH fills the deregistered region with. */
    static final byte WATCH = 0x5A;

    private UcxPeerMain() {
    }

    /** Which of its device's workers serves {@code qp}: {@code channel=<serial>}, 0 the main one. */
    static String channelOf(QueuePair qp) {
        return "channel=" + qp.unwrap(UcxQp.class).channel.serial;
    }

    /** The byte at offset {@code i} of the registered region. */
    static byte pattern(long i) {
        return (byte) (i * 31 + 7);
    }

    public static void main(String[] args) throws Throwable {
        ConcurrentLinkedQueue<String> commands = ChildSide.commands();
        // A third argument: the device's options, "k=v,k=v" (handshakeTimeoutMillis=500, say).
        java.util.Map<String, String> options = ChildSide.options(args, 2);
        if (args.length > 1 && args[1].equals("writer")) {
            writer(args[0], options, commands);
            return;
        }
        try (Arena arena = Arena.ofShared(); RdmaDevice dev = RdmaDevice.open("ucx", options)) {
            // "chunk" as second argument: the region lies in memory UCX allocated (device.chunkSource()),
            // which a peer opened with oneSided=true puts into directly.
            boolean chunkMemory = args.length > 1 && args[1].equals("chunk");
            io.regmem.core.Chunk chunk = chunkMemory ? dev.chunkSource().allocate(1 << 20, 4096) : null;
            MemorySegment region = chunkMemory ? MemorySegment.ofAddress(chunk.address()).reinterpret(chunk.size())
                    : arena.allocate(1 << 20, 4096);
            for (int i = 0; i < region.byteSize(); i++) {
                region.set(ValueLayout.JAVA_BYTE, i, pattern(i));
            }
            MemorySegment recvs = arena.allocate((long) RECVS * RECV_SIZE, 4096);
            ProtectionDomain pd = dev.allocPd();
            CompletionQueue cq = dev.createCq(256);
            MemoryRegion mr = pd.register(region, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ,
                    Access.REMOTE_ATOMIC);
            MemoryRegion recvMr = pd.register(recvs, Access.LOCAL_WRITE);
            CmId listener = dev.createCmId();
            listener.listen(args[0]);
            ChildSide.say("LISTENING");
            CmId id = null;
            QueuePair qp = null;
            // Connections that arrive while one is served: accepted too (no receives), for the test's
            // look at which worker serves them, and destroyed when they end.
            java.util.List<CmId> more = new java.util.ArrayList<>();
            WorkCompletion[] wcs = new WorkCompletion[16];
            for (int i = 0; i < wcs.length; i++) {
                wcs[i] = new WorkCompletion();
            }
            boolean end = false;
            while (!end) {
                for (String c; (c = commands.poll()) != null; ) {
                    if (c.equals("END")) {
                        end = true;
                    } else if (c.equals("DEREG") && mr != null) {
                        mr.close();
                        mr = null;
                        ChildSide.say("DEREGISTERED");
                    } else if (c.equals("DEREGWATCH") && mr != null) {
                        // Deregisters, then fills the region with WATCH: after the close returned nothing
                        // may write it (CHECK says whether it still holds WATCH only) or read it.
                        mr.close();
                        mr = null;
                        region.fill(WATCH);
                        ChildSide.say("DEREGISTERED");
                    } else if (c.equals("CHECK")) {
                        long at = -1;
                        for (long i = 0; i < region.byteSize() && at < 0; i++) {
                            if (region.get(ValueLayout.JAVA_BYTE, i) != WATCH) {
                                at = i;
                            }
                        }
                        ChildSide.say(at < 0 ? "INTACT" : "CHANGED at " + at);
                    } else if (c.equals("FREECHUNK") && chunk != null) { // the region's UCX memory goes back to UCX
                        if (mr != null) {
                            mr.close();
                            mr = null;
                        }
                        dev.chunkSource().release(chunk);
                        chunk = null;
                        ChildSide.say("FREED");
                    }
                }
                for (java.util.Iterator<CmId> it = more.iterator(); it.hasNext(); ) {
                    CmId m = it.next();
                    if (m.qp().state() == QueuePair.State.ERROR) {
                        m.destroyQp();
                        m.close();
                        it.remove();
                        ChildSide.say("GONE");
                    }
                }
                if (id != null) {
                    CmId extra = listener.getRequest();
                    if (extra != null) {
                        CmId request = extra;
                        QueuePair q = request.createQp(pd, new QpInitAttributes().sendCq(cq).recvCq(cq).maxSendWr(64)
                                .maxRecvWr(RECVS));
                        request.accept();
                        more.add(request);
                        ChildSide.say("KEY " + (mr == null ? "none" : HexFormat.of().formatHex(mr.exportRemoteKey())
                                + " " + region.address()) + " " + channelOf(q));
                    }
                }
                CmId request = id == null ? listener.getRequest() : null;
                if (id == null && request == null && more.isEmpty()) {
                    Thread.sleep(1);
                    continue;
                }
                if (request != null) {
                    id = request;
                    qp = id.createQp(pd, new QpInitAttributes().sendCq(cq).recvCq(cq).maxSendWr(64).maxRecvWr(RECVS));
                    for (int i = 0; i < RECVS; i++) {
                        qp.postRecv(new WorkRequest(1).wrId(i).addSge(recvs.address() + (long) i * RECV_SIZE, RECV_SIZE,
                                recvMr.lkey()));
                    }
                    id.accept();
                    ChildSide.say("KEY " + (mr == null ? "none" : HexFormat.of().formatHex(mr.exportRemoteKey())
                            + " " + region.address()) + " " + channelOf(qp));
                }
                int n = cq.poll(wcs);
                for (int i = 0; i < n; i++) {
                    WorkCompletion wc = wcs[i];
                    if (wc.opcode() == Opcode.RECV && wc.status() == WcStatus.SUCCESS) {
                        long slot = wc.wrId();
                        long at = recvs.address() + slot * RECV_SIZE;
                        // Echo it back, then give the buffer back to the receive queue once the echo is out.
                        qp.postSend(new WorkRequest(1).wrId(1000 + slot).opcode(Opcode.SEND).signaled(true)
                                .addSge(at, wc.byteLen(), recvMr.lkey()));
                    } else if (wc.opcode() == Opcode.SEND && wc.status() == WcStatus.SUCCESS) {
                        long slot = wc.wrId() - 1000;
                        qp.postRecv(new WorkRequest(1).wrId(slot).addSge(recvs.address() + slot * RECV_SIZE, RECV_SIZE,
                                recvMr.lkey()));
                    }
                }
                if (qp != null && qp.state() == QueuePair.State.ERROR) {
                    while (cq.poll(wcs) > 0) {
                        // flushed receives and sends
                    }
                    id.destroyQp();
                    id.close();
                    id = null;
                    qp = null;
                    ChildSide.say("GONE");
                }
                if (n == 0) {
                    Thread.onSpinWait();
                }
            }
            if (id != null) {
                id.disconnect();
                id.destroyQp();
                id.close();
            }
            for (CmId m : more) {
                m.disconnect();
                m.destroyQp();
                m.close();
            }
            listener.close();
            if (mr != null) {
                mr.close();
            }
            if (chunk != null) {
                dev.chunkSource().release(chunk);
            }
            recvMr.close();
            cq.close();
            pd.close();
            if (dev.resources().survivors().isEmpty()) {
                ChildSide.say("CLEAN");
            } else {
                ChildSide.say("LEFT " + dev.resources().report());
            }
        }
    }

    /**
     * The writer mode ({@code writer} as second argument): connects to the listener at {@code address},
     * says {@code CONNECTED}; on {@code WRITE <key hex> <address> <length> <count>} it WRITEs 8 bytes
     * to {@code address + length}, says {@code WARM <status>} once that completed, and on {@code GO}
     * posts {@code count} WRITEs of {@code length} bytes (0x77) to {@code address}, progresses for
     * 200 ms and says {@code POSTED} with what completed meanwhile; then it waits to be killed.
     */
    private static void writer(String address, java.util.Map<String, String> options, ConcurrentLinkedQueue<String> commands)
            throws Exception {
        try (Arena arena = Arena.ofShared(); RdmaDevice dev = RdmaDevice.open("ucx", options)) {
            MemorySegment mem = arena.allocate(1 << 20, 4096);
            mem.fill((byte) 0x77);
            ProtectionDomain pd = dev.allocPd();
            CompletionQueue cq = dev.createCq(256);
            MemoryRegion mr = pd.register(mem, Access.LOCAL_WRITE);
            CmId id = dev.createCmId();
            QueuePair qp = id.createQp(pd, new QpInitAttributes().sendCq(cq).recvCq(cq).maxSendWr(64).maxRecvWr(1));
            id.connect(address);
            WorkCompletion[] wcs = {new WorkCompletion()};
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (id.connState() != CmId.ConnState.CONNECTED && System.nanoTime() < deadline) {
                cq.poll(wcs);
                Thread.sleep(1);
            }
            ChildSide.say("CONNECTED");
            int key = 0;
            long remote = 0;
            int length = 0;
            int count = 0;
            while (true) {
                String c = commands.poll();
                if (c == null) {
                    cq.poll(wcs);
                    Thread.sleep(1);
                    continue;
                }
                if (c.equals("END")) {
                    return; // (the test kills it before)
                }
                if (c.equals("GO")) {
                    for (int i = 0; i < count; i++) {
                        qp.postSend(new WorkRequest(1).wrId(i).opcode(Opcode.RDMA_WRITE).signaled(true)
                                .addSge(mem.address(), length, mr.lkey()).remote(remote, key));
                    }
                    long until = System.nanoTime() + 200_000_000L;
                    StringBuilder done = new StringBuilder();
                    while (System.nanoTime() < until) {
                        if (cq.poll(wcs) == 1) {
                            done.append(' ').append(wcs[0].status());
                        }
                    }
                    ChildSide.say("POSTED" + done);
                    continue;
                }
                String[] w = c.split(" ");
                key = qp.importRemoteKey(MemorySegment.ofArray(HexFormat.of().parseHex(w[1])));
                remote = Long.parseLong(w[2]);
                length = Integer.parseInt(w[3]);
                count = Integer.parseInt(w[4]);
                // One small WRITE first (behind the big ones' range), completed: the connection is up at both ends.
                qp.postSend(new WorkRequest(1).wrId(-1).opcode(Opcode.RDMA_WRITE).signaled(true)
                        .addSge(mem.address(), 8, mr.lkey()).remote(remote + length, key));
                long until = System.nanoTime() + 10_000_000_000L;
                while (cq.poll(wcs) == 0 && System.nanoTime() < until) {
                    Thread.onSpinWait();
                }
                ChildSide.say("WARM " + wcs[0].status());
            }
        }
    }

    private static final java.lang.foreign.Linker LINKER = java.lang.foreign.Linker.nativeLinker();

    /** {@code length} bytes of fresh anonymous memory ({@code mmap}), for tests that unmap it under UCX. */
    static MemorySegment mapAnonymous(long length) throws Throwable {
        java.lang.invoke.MethodHandle mmap = LINKER.downcallHandle(LINKER.defaultLookup().find("mmap").orElseThrow(),
                java.lang.foreign.FunctionDescriptor.of(ValueLayout.ADDRESS, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG,
                        ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG));
        MemorySegment m = (MemorySegment) mmap.invokeExact(MemorySegment.NULL, length, 3, 0x22, -1, 0L); // RW, PRIVATE|ANONYMOUS
        if (m.address() == -1L) {
            throw new IllegalStateException("mmap failed");
        }
        return m.reinterpret(length);
    }

    static void unmap(MemorySegment m) throws Throwable {
        java.lang.invoke.MethodHandle munmap = LINKER.downcallHandle(LINKER.defaultLookup().find("munmap").orElseThrow(),
                java.lang.foreign.FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG));
        if ((int) munmap.invokeExact(m, m.byteSize()) != 0) {
            throw new IllegalStateException("munmap failed");
        }
    }

    /**
     * Takes every right from memory {@link #mapAnonymous} gave ({@code mprotect(PROT_NONE)}): any
     * access to it fails as to unmapped memory, and its addresses stay reserved (nothing else is
     * mapped there meanwhile, as after an {@code munmap}).
     */
    static void protectNone(MemorySegment m) throws Throwable {
        java.lang.invoke.MethodHandle mprotect = LINKER.downcallHandle(LINKER.defaultLookup().find("mprotect").orElseThrow(),
                java.lang.foreign.FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG,
                        ValueLayout.JAVA_INT));
        if ((int) mprotect.invokeExact(m, m.byteSize(), 0) != 0) {
            throw new IllegalStateException("mprotect failed");
        }
    }

}
