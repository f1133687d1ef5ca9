package io.regmem.registration.shm;

import static org.assertj.core.api.Assertions.assertThat;

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
import io.regmem.registration.testkit.NoLeaks;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.ServerSocket;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * shm between two processes ({@link ShmPeerMain} in a child JVM): WRITEs, READs, SENDs and atomics of
 * every size move byte-exact both ways, by pulls where the kernel allows them and through the rings
 * where a side may not copy ({@code pull=false}: the copy-refused path); a killed peer completes
 * everything outstanding with errors at once; a stopped peer fails requests by the answer timeout and
 * holds nothing up; both processes end with nothing left.
 */
@ExtendWith(NoLeaks.class)
class ShmProcessTest {
    private static final long SIZE = 4L << 20;

    private static final AtomicInteger PORTS = new AtomicInteger(26_000 + (int) (ProcessHandle.current().pid() % 2000));

    /**
     * A port nobody listens on, below the kernel's ephemeral range (32768-60999): a port from that range
     * may be taken by any outgoing connection between this call and the child's bind.
     */
    static int freePort() throws IOException {
        while (true) {
            int port = PORTS.incrementAndGet();
            try (ServerSocket s = new ServerSocket(port)) {
                return s.getLocalPort();
            } catch (IOException taken) {
                if (port > 32_000) {
                    throw taken;
                }
            }
        }
    }

    /** A completion as it was polled. */
    record Done(long wrId, WcStatus status, long byteLen) {
    }

    /** This side of a connection to a child: device, PD, CQ, ID, QP, 4 MiB registered, the child's key and address. */
    private static final class Side implements AutoCloseable {
        final Arena arena = Arena.ofShared();
        final RdmaDevice dev;
        final ProtectionDomain pd;
        final CompletionQueue cq;
        final CmId id;
        final QueuePair qp;
        final MemorySegment mem = arena.allocate(SIZE, 4096);
        final MemoryRegion mr;
        final int rkey;
        final long remote;
        final WorkCompletion[] wcs = new WorkCompletion[64];

        Side(ShmChild child, String keyLine, Map<String, String> options) throws InterruptedException {
            dev = RdmaDevice.open("shm", options);
            pd = dev.allocPd();
            cq = dev.createCq(256);
            mr = pd.register(mem, Access.LOCAL_WRITE);
            id = dev.createCmId();
            qp = id.createQp(pd, new QpInitAttributes().sendCq(cq).recvCq(cq).maxSendWr(64).maxRecvWr(16).maxSendSge(4)
                    .maxRecvSge(1));
            String[] k = keyLine.split(" ");
            rkey = qp.importRemoteKey(HexFormat.of().parseHex(k[1]));
            remote = Long.parseLong(k[2]);
            id.connect(child.address);
            long deadline = System.nanoTime() + 20_000_000_000L;
            while (id.connState() != CmId.ConnState.CONNECTED) {
                assertThat(System.nanoTime()).as("connected in time: %s", id.connState()).isLessThan(deadline);
                assertThat(id.connState()).isNotIn(CmId.ConnState.DISCONNECTED);
                Thread.sleep(1);
            }
            for (int i = 0; i < wcs.length; i++) {
                wcs[i] = new WorkCompletion();
            }
        }

        /** Polls until {@code n} completions came (30 s at most); returns them. */
        List<Done> await(int n) {
            List<Done> got = new ArrayList<>();
            long deadline = System.nanoTime() + 30_000_000_000L;
            while (got.size() < n) {
                int c = cq.poll(wcs);
                for (int i = 0; i < c; i++) {
                    got.add(new Done(wcs[i].wrId(), wcs[i].status(), wcs[i].byteLen()));
                }
                assertThat(System.nanoTime()).as("%d completions in time, got %s", n, got).isLessThan(deadline);
            }
            return got;
        }

        @Override
        public void close() {
            if (id.connState() == CmId.ConnState.CONNECTED) {
                id.disconnect();
            }
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (qp.outstandingSends() + qp.outstandingRecvs() > 0 && System.nanoTime() < deadline) {
                cq.poll(wcs);
            }
            id.destroyQp();
            id.close();
            if (!mr.isDestroyed()) {
                mr.close();
            }
            cq.close();
            pd.close();
            assertThat(dev.resources().survivors()).as(dev.resources().report()).isEmpty();
            dev.close();
            arena.close();
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"pull=true", "pull=false"})
    void bytesMoveExactlyBothWaysByPullsOrThroughTheRings(String pull) throws Exception {
        try (ShmChild child = new ShmChild(freePort(), pull)) {
            String key = child.expect("KEY");
            child.expect("LISTENING");
            try (Side s = new Side(child, key, Map.of(pull.substring(0, 4), pull.substring(5)))) {
                String diag = child.expect("CONNECTED");
                assertThat(diag).contains(pull.equals("pull=true") ? ", pulls" : ", no pulls");
                assertThat(s.qp.diagnostics()).contains(pull.equals("pull=true") ? ", pulls" : ", no pulls");
                SplittableRandom r = new SplittableRandom(7);
                WorkRequest w = new WorkRequest(4);
                for (long size : new long[] {1, 64, 4096, 16384, 16385, 65536, (1 << 20) + 3, 3L << 20}) {
                    long at = r.nextLong(0, SIZE - size);
                    for (long i = 0; i < size; i++) {
                        s.mem.set(ValueLayout.JAVA_BYTE, i, (byte) r.nextInt());
                    }
                    s.qp.postSend(w.reset().wrId(1).opcode(Opcode.RDMA_WRITE).signaled(true)
                            .addSge(s.mem.address(), size, s.mr.lkey()).remote(s.remote + at, s.rkey));
                    Done wc = s.await(1).get(0);
                    assertThat(wc.status()).as("WRITE of %d", size).isEqualTo(WcStatus.SUCCESS);
                    assertThat(wc.byteLen()).isEqualTo(size);
                    long back = SIZE / 2 - size / 2;
                    s.mem.asSlice(back, size).fill((byte) 0);
                    s.qp.postSend(w.reset().wrId(2).opcode(Opcode.RDMA_READ).signaled(true)
                            .addSge(s.mem.address() + back, size, s.mr.lkey()).remote(s.remote + at, s.rkey));
                    wc = s.await(1).get(0);
                    assertThat(wc.status()).as("READ of %d: %s %s", size, s.qp.diagnostics(), child.output()).isEqualTo(WcStatus.SUCCESS);
                    if (back >= size) {
                        assertThat(s.mem.asSlice(back, size).mismatch(s.mem.asSlice(0, size))).as("READ of %d", size)
                                .isEqualTo(-1);
                    }
                }
                // The child's region still holds its pattern where nothing was written: READ its last page.
                s.qp.postSend(w.reset().wrId(3).opcode(Opcode.RDMA_READ).signaled(true)
                        .addSge(s.mem.address(), 4096, s.mr.lkey()).remote(s.remote + SIZE - 4096, s.rkey));
                assertThat(s.await(1).get(0).status()).isEqualTo(WcStatus.SUCCESS);
                // SENDs come back echoed, small (inline) and large (pulled or streamed).
                for (int size : new int[] {100, 16384, 16385, 60000}) {
                    s.qp.postRecv(w.reset().wrId(50).addSge(s.mem.address() + (2L << 20), size, s.mr.lkey()));
                    for (int i = 0; i < size; i++) {
                        s.mem.set(ValueLayout.JAVA_BYTE, (1L << 20) + i, (byte) (i * 13 + size));
                    }
                    s.qp.postSend(w.reset().wrId(51).opcode(Opcode.SEND).signaled(true)
                            .addSge(s.mem.address() + (1L << 20), size, s.mr.lkey()));
                    List<Done> got = s.await(2);
                    assertThat(got).extracting(Done::status).containsOnly(WcStatus.SUCCESS);
                    assertThat(s.mem.asSlice(2L << 20, size).mismatch(s.mem.asSlice(1L << 20, size))).isEqualTo(-1);
                }
                // Atomics, executed by the child on its memory.
                long atomicAt = s.remote + 8 * 1000;
                s.qp.postSend(w.reset().wrId(60).opcode(Opcode.ATOMIC_FETCH_AND_ADD).signaled(true)
                        .addSge(s.mem.address(), 8, s.mr.lkey()).remote(atomicAt, s.rkey).atomic(5, 0));
                assertThat(s.await(1).get(0).status()).isEqualTo(WcStatus.SUCCESS);
                long first = s.mem.get(ValueLayout.JAVA_LONG, 0);
                s.qp.postSend(w.reset().wrId(61).opcode(Opcode.ATOMIC_CMP_AND_SWP).signaled(true)
                        .addSge(s.mem.address() + 8, 8, s.mr.lkey()).remote(atomicAt, s.rkey).atomic(first + 5, 42));
                assertThat(s.await(1).get(0).status()).isEqualTo(WcStatus.SUCCESS);
                assertThat(s.mem.get(ValueLayout.JAVA_LONG, 8)).isEqualTo(first + 5);
            }
            child.expect("DISCONNECTED");
            child.finish();
        }
    }

    @Test
    void aKilledPeerCompletesEverythingOutstandingWithErrorsAtOnce() throws Exception {
        try (ShmChild child = new ShmChild(freePort(), "")) {
            String key = child.expect("KEY");
            child.expect("LISTENING");
            try (Side s = new Side(child, key, Map.of())) {
                child.expect("CONNECTED");
                child.signal("STOP"); // nothing it is sent is answered now
                WorkRequest w = new WorkRequest(1);
                for (int i = 0; i < 4; i++) {
                    s.qp.postSend(w.reset().wrId(i).opcode(Opcode.RDMA_WRITE).signaled(true)
                            .addSge(s.mem.address() + 65536L * i, 65536, s.mr.lkey()).remote(s.remote, s.rkey));
                    s.qp.postSend(w.reset().wrId(10 + i).opcode(Opcode.RDMA_READ).signaled(true)
                            .addSge(s.mem.address() + (1L << 20) + 65536L * i, 65536, s.mr.lkey()).remote(s.remote, s.rkey));
                }
                assertThat(s.cq.poll(s.wcs)).as("nothing is answered by a stopped peer").isZero();
                long t0 = System.nanoTime();
                child.process.destroyForcibly(); // SIGKILL, stopped or not
                Thread reaper = Thread.ofPlatform().start(() -> {
                    try {
                        child.process.waitFor();
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                });
                List<Done> got = s.await(8);
                long micros = (System.nanoTime() - t0) / 1_000;
                reaper.join();
                long exitMicros = (System.nanoTime() - t0) / 1_000;
                long millis = micros / 1000;
                System.out.println("shm: a killed peer's 8 outstanding requests completed " + micros + " us after SIGKILL"
                        + " (the kernel reported its exit to waitpid by " + exitMicros + " us)");
                assertThat(got).extracting(Done::status).doesNotContain(WcStatus.SUCCESS);
                // A bound for a wait, not a measurement (the figure is printed above): the kernel tears a
                // JVM down in milliseconds, and nothing of the peer's is waited for.
                assertThat(millis).as("completed within the acceptance bound (measured above)").isLessThan(5_000);
                long deadline = System.nanoTime() + 10_000_000_000L;
                while (s.id.connState() != CmId.ConnState.DISCONNECTED) {
                    assertThat(System.nanoTime()).as("DISCONNECTED reported").isLessThan(deadline);
                    Thread.sleep(1);
                }
                assertThat(s.qp.state()).isEqualTo(QueuePair.State.ERROR);
            }
        }
    }

    @Test
    void aStoppedPeerFailsRequestsByTheAnswerTimeoutAndHoldsNothingUp() throws Exception {
        try (ShmChild child = new ShmChild(freePort(), "")) {
            String key = child.expect("KEY");
            child.expect("LISTENING");
            try (Side s = new Side(child, key, Map.of("answerTimeoutMillis", "300"))) {
                child.expect("CONNECTED");
                child.signal("STOP");
                try {
                    WorkRequest w = new WorkRequest(1);
                    s.qp.postSend(w.reset().wrId(1).opcode(Opcode.RDMA_READ).signaled(true)
                            .addSge(s.mem.address(), 65536, s.mr.lkey()).remote(s.remote, s.rkey));
                    s.qp.postSend(w.reset().wrId(2).opcode(Opcode.RDMA_WRITE).signaled(true)
                            .addSge(s.mem.address(), 65536, s.mr.lkey()).remote(s.remote, s.rkey));
                    List<Done> got = s.await(2); // (the first fails by the answer timeout: nothing else fails it so)
                    assertThat(got.get(0).status()).as("%s %s", got, child.output()).isEqualTo(WcStatus.RETRY_EXC_ERR);
                    assertThat(got.get(1).status()).isEqualTo(WcStatus.WR_FLUSH_ERR);
                    // Its memory is this side's again: deregistering it waits for nothing of the stopped peer.
                    long d0 = System.nanoTime();
                    s.mr.close();
                    assertThat((System.nanoTime() - d0) / 1_000_000).as("deregistration does not wait for the peer")
                            .isLessThan(5_000);
                } finally {
                    child.signal("CONT");
                }
                MemoryRegion again = s.pd.register(s.mem, Access.LOCAL_WRITE);
                again.close();
            } catch (IllegalStateException closedTwice) {
                throw closedTwice;
            }
            child.expect("DISCONNECTED");
            child.finish();
        }
    }

    /**
     * A thousand connections made and ended between two child JVMs, each with a fixed heap touched at
     * start and Native Memory Tracking, so that their figures say where memory goes: descriptors and
     * lane mappings are back where they were in both, the off-heap memory regmem's code holds (NMT's
     * "Other": FFM arenas) is flat in both, and the connecting process's resident memory grows by far
     * less than a connection's worth each (a test JVM with a large heap, connecting itself, grew its
     * resident memory by hundreds of MiB over the cycles: heap not yet collected, which a fixed heap
     * shows for what it is).
     */
    @Test
    void aThousandConnectionsLeaveNoDescriptorMappingOrMemoryBehindInEitherProcess() throws Exception {
        int cycles = 1000;
        try (ShmChild child = new ShmChild(freePort(), "")) {
            child.expect("KEY");
            child.expect("LISTENING");
            try (ShmChild connector = new ShmChild(child.address, ShmConnector.class, child.address, "20",
                    Integer.toString(cycles))) {
                String connectorBefore = connector.find("STATS"); // after a warm-up (the JDK opens some files once)
                child.command("STATS");
                String childBefore = child.find("STATS");
                connector.command("GO");
                String connectorAfter = connector.find("STATS");
                assertThat(connector.find("CLEAN")).isNotNull();
                assertThat(connector.process.waitFor(30, TimeUnit.SECONDS)).isTrue();
                assertThat(connector.process.exitValue()).isZero();
                long deadline = System.nanoTime() + 30_000_000_000L;
                while (child.output().split("REGMEM DISCONNECTED", -1).length - 1 < cycles + 20) { // the listener ended every one
                    assertThat(System.nanoTime()).as("the listener ends every connection").isLessThan(deadline);
                    Thread.sleep(10);
                }
                child.command("STATS");
                String childAfter = child.find("STATS");
                System.out.println("shm: " + cycles + " connections: listener " + childBefore + " -> " + childAfter
                        + "; connector " + connectorBefore + " -> " + connectorAfter);
                for (String[] pair : new String[][] {{childBefore, childAfter}, {connectorBefore, connectorAfter}}) {
                    assertThat(ShmPeerMain.stat(pair[1], "fds")).as("descriptors").isEqualTo(ShmPeerMain.stat(pair[0], "fds"));
                    assertThat(ShmPeerMain.stat(pair[1], "lanes")).as("lane mappings").isZero();
                    // (the JVM maps and unmaps some of its own: code cache, thread stacks, malloc's arenas; a
                    // lane's mapping is counted exactly above)
                    assertThat(ShmPeerMain.stat(pair[1], "maps")).as("mappings").isLessThan(ShmPeerMain.stat(pair[0], "maps") + 64);
                    // The off-heap memory regmem's code holds (FFM arenas: each QP's iovec arrays, each lane's
                    // setup) is back where it was: a leak of even 1 KiB per connection would show.
                    long offHeap = ShmPeerMain.stat(pair[0], "offHeapKiB");
                    assertThat(offHeap).as("Native Memory Tracking").isNotNegative();
                    assertThat(ShmPeerMain.stat(pair[1], "offHeapKiB")).as("off-heap memory (KiB)").isLessThan(offHeap + 1000);
                }
                // With its heap fixed and touched, what the connector's resident memory gains is not heap:
                // the JIT's code and malloc's arenas over the first thousands of calls, never a lane (2 MiB
                // rings each, 4 per connection: 8 GiB over the cycles) or a per-connection native block.
                assertThat(ShmPeerMain.stat(connectorAfter, "rssKiB")).as("the connector's resident memory (KiB)")
                        .isLessThan(ShmPeerMain.stat(connectorBefore, "rssKiB") + 64 * 1024);
                // And what it keeps on the heap after a full GC is flat too: nothing of a connection is retained.
                assertThat(ShmPeerMain.stat(connectorAfter, "heapUsedKiB")).as("the connector's live heap (KiB)")
                        .isLessThan(ShmPeerMain.stat(connectorBefore, "heapUsedKiB") + 16 * 1024);
            }
            child.finish();
        }
    }

    /**
     * Deregistration racing large WRITEs and READs at both ends: the child deregisters its region while
     * this side streams 256 KiB WRITEs (pulled) and READs through it, and fills it at once; nothing
     * lands in it after the close returned. This side deregisters the memory its READs land in while
     * answers are on their way; after the close returns nothing lands there either.
     */
    @Test
    void deregistrationRacingLargeWritesAndReadsAtBothEndsLeavesTheMemoryUntouched() throws Exception {
        try (ShmChild child = new ShmChild(freePort(), "")) {
            String key = child.expect("KEY");
            child.expect("LISTENING");
            try (Side s = new Side(child, key, Map.of())) {
                child.expect("CONNECTED");
                WorkRequest w = new WorkRequest(1);
                long chunk = 256 << 10;
                // At this side: READs into a region of its own, deregistered while their answers come.
                MemorySegment sinkMem = s.arena.allocate(16 * chunk, 4096);
                MemoryRegion sink = s.pd.register(sinkMem, Access.LOCAL_WRITE);
                for (int i = 0; i < 16; i++) {
                    s.qp.postSend(w.reset().wrId(100 + i).opcode(Opcode.RDMA_READ).signaled(true)
                            .addSge(sinkMem.address() + chunk * i, chunk, sink.lkey()).remote(s.remote, s.rkey));
                }
                sink.close();
                sinkMem.fill((byte) 0x33);
                List<Done> reads = s.await(16);
                assertThat(reads).extracting(Done::status).allMatch(st -> st == WcStatus.SUCCESS || st == WcStatus.LOC_PROT_ERR);
                assertThat(sinkMem.mismatch(s.arena.allocate(16 * chunk).fill((byte) 0x33))).as("nothing landed after the close")
                        .isEqualTo(-1);
                // At the child: WRITEs and READs streaming while it deregisters its region.
                int posted = 0;
                int done = 0;
                boolean deregistered = false;
                long deadline = System.nanoTime() + 60_000_000_000L;
                List<Done> all = new ArrayList<>();
                while (all.isEmpty() || all.get(all.size() - 1).status() == WcStatus.SUCCESS || posted > done) {
                    assertThat(System.nanoTime()).as("the stream ends").isLessThan(deadline);
                    while (posted - done < 16 && s.qp.state() == QueuePair.State.RTS && (all.isEmpty()
                            || all.get(all.size() - 1).status() == WcStatus.SUCCESS)) {
                        boolean write = posted % 2 == 0;
                        s.qp.postSend(w.reset().wrId(posted).opcode(write ? Opcode.RDMA_WRITE : Opcode.RDMA_READ)
                                .signaled(true).addSge(s.mem.address() + chunk * (posted % 8), chunk, s.mr.lkey())
                                .remote(s.remote + chunk * (posted % 16), s.rkey));
                        posted++;
                    }
                    if (posted == 200 && !deregistered) {
                        child.command("DEREGWATCH");
                        deregistered = true;
                    }
                    int n = s.cq.poll(s.wcs);
                    for (int i = 0; i < n; i++) {
                        all.add(new Done(s.wcs[i].wrId(), s.wcs[i].status(), s.wcs[i].byteLen()));
                    }
                    done += n;
                    if (!deregistered && posted >= 200) {
                        child.command("DEREGWATCH");
                        deregistered = true;
                    }
                    if (s.qp.state() == QueuePair.State.ERROR && posted == done) {
                        break;
                    }
                }
                child.expect("DEREGISTERED");
                assertThat(all).extracting(Done::status).contains(WcStatus.SUCCESS);
                assertThat(all.get(all.size() - 1).status()).isNotEqualTo(WcStatus.SUCCESS);
                // The child's region after its close returned: nothing of this side's landed there.
                Thread.sleep(50);
                child.command("CHECK");
                child.expect("INTACT");
            }
            child.expect("DISCONNECTED");
            child.finish();
        }
    }

    /**
     * This side as the target of a child that streams 1 MiB WRITEs and READs, 8 in flight: with
     * {@code pull=false} here the WRITEs' bytes come through the rings (the kill lands in the middle of
     * a record or a stream), else this side pulls them from the child (the kill lands in the middle of
     * a copy out of it). The child is killed in the middle, twice: each time this side's QP ends in
     * the error state and its ID reports DISCONNECTED, nothing outside the granted range changes, and
     * the listener serves the next.
     */
    @ParameterizedTest
    @ValueSource(strings = {"false", "true"})
    void aPeerKilledMidStreamLeavesTheTargetWholeAndServing(String pull) throws Exception {
        int port = freePort();
        try (Arena arena = Arena.ofShared(); RdmaDevice dev = RdmaDevice.open("shm", Map.of("pull", pull))) {
            MemorySegment all = arena.allocate(SIZE + (2 << 20), 4096);
            all.fill((byte) 0x77);
            MemorySegment granted = all.asSlice(1 << 20, SIZE);
            ProtectionDomain pd = dev.allocPd();
            MemoryRegion mr = pd.register(granted, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ);
            CompletionQueue cq = dev.createCq(64);
            CmId listener = dev.createCmId();
            listener.listen("127.0.0.1:" + port);
            WorkCompletion[] wcs = {new WorkCompletion(), new WorkCompletion()};
            String key = HexFormat.of().formatHex(mr.exportRemoteKey()) + " " + granted.address();
            for (int round = 0; round < 2; round++) {
                try (ShmChild child = new ShmChild("127.0.0.1:" + port, "", "client " + key)) {
                    CmId id;
                    long deadline = System.nanoTime() + 30_000_000_000L;
                    while ((id = listener.getRequest()) == null) {
                        assertThat(System.nanoTime()).as("round %d: the request", round).isLessThan(deadline);
                        Thread.sleep(1);
                    }
                    QueuePair qp = id.createQp(pd, new QpInitAttributes().sendCq(cq).recvCq(cq).maxSendWr(4).maxRecvWr(1));
                    id.accept();
                    while (child.lines.isEmpty()) { // serve until the child streams
                        cq.poll(wcs);
                        assertThat(System.nanoTime()).as("round %d: streaming", round).isLessThan(deadline);
                    }
                    assertThat(child.expect("STREAMING")).isNotNull();
                    for (int i = 0; i < 1000 + round * 5000; i++) {
                        cq.poll(wcs); // serve a while, then the kill lands somewhere in the middle
                    }
                    child.process.destroyForcibly();
                    while (id.connState() != CmId.ConnState.DISCONNECTED || qp.state() != QueuePair.State.ERROR) {
                        cq.poll(wcs);
                        assertThat(System.nanoTime()).as("round %d: the end seen", round).isLessThan(deadline);
                    }
                    while (cq.poll(wcs) > 0) {
                        Thread.onSpinWait();
                    }
                    id.destroyQp();
                    id.close();
                }
                for (long i = 0; i < 1 << 20; i++) {
                    if (all.get(ValueLayout.JAVA_BYTE, i) != 0x77 || all.get(ValueLayout.JAVA_BYTE, SIZE + (1 << 20) + i) != 0x77) {
                        throw new AssertionError("round " + round + ": a byte outside the granted range changed at " + i);
                    }
                }
            }
            listener.close();
            cq.close();
            mr.close();
            pd.close();
            assertThat(dev.resources().survivors()).isEmpty();
        }
    }

    /**
     * A peer whose progress thread sleeps (idleStrategy backoff, nobody polling) is woken by this
     * side's requests through the futex in the lane, not by its 10 ms timeout: spaced READs each find
     * it asleep, and it counts the wake-ups. (The round trip of such a READ is printed.)
     */
    @Test
    void aSleepingPeerIsWokenByTheRequestsThatReachIt() throws Exception {
        try (ShmChild child = new ShmChild(freePort(), "progressThread=true,idleStrategy=backoff")) {
            String key = child.expect("KEY");
            child.expect("LISTENING");
            try (Side s = new Side(child, key, Map.of())) {
                child.expect("CONNECTED");
                WorkRequest w = new WorkRequest(1);
                for (int i = 0; i < 20_000; i++) { // warm up both JVMs' code first (cold code takes milliseconds)
                    s.qp.postSend(w.reset().wrId(i).opcode(Opcode.RDMA_READ).signaled(true)
                            .addSge(s.mem.address(), 8, s.mr.lkey()).remote(s.remote, s.rkey));
                    while (s.cq.poll(s.wcs) == 0) {
                        Thread.onSpinWait();
                    }
                }
                long wokenBefore = woken(child);
                int reads = 20;
                long total = 0;
                long first = 0;
                for (int i = 0; i < reads; i++) {
                    Thread.sleep(25); // the child's progress thread falls asleep (after 50 us with nothing to do)
                    long t0 = System.nanoTime();
                    s.qp.postSend(w.reset().wrId(i).opcode(Opcode.RDMA_READ).signaled(true)
                            .addSge(s.mem.address(), 8, s.mr.lkey()).remote(s.remote, s.rkey));
                    assertThat(s.await(1).get(0).status()).isEqualTo(WcStatus.SUCCESS);
                    total += System.nanoTime() - t0;
                    if (i == 0) {
                        first = System.nanoTime() - t0;
                    }
                }
                long woken = woken(child) - wokenBefore;
                System.out.println("shm: " + reads + " spaced READs to a sleeping peer (after a warm-up): mean round trip "
                        + total / reads / 1000 + " us, first " + first / 1000 + " us; the peer's progress thread was woken "
                        + woken + " times for them");
                assertThat(woken).as("the peer's progress thread was woken by the requests").isGreaterThanOrEqualTo(reads / 2);
            }
            child.expect("DISCONNECTED");
            child.finish();
        }
    }

    /** How many times the child's progress thread was woken by a peer (its QP's diagnostics say). */
    private static long woken(ShmChild child) throws Exception {
        child.command("DIAG");
        String diag = child.expect("DIAG");
        assertThat(diag).contains("progress thread woken");
        return Long.parseLong(diag.replaceAll(".*progress thread woken (\\d+) times.*", "$1"));
    }
}
