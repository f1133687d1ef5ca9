package io.regmem.registration.ucx;

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
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HexFormat;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A long-running listener over TCP holds what it held after its first connections: each cycle is a
 * new peer process's worker (a device of this JVM), a connection, 256 KiB WRITEs and READs checked
 * byte for byte, and a disconnect; the listener's resident memory and mappings are read from
 * {@code /proc} after a warm-up and again 240 cycles later. (UCP's registration cache kept every
 * retired worker's send buffers, about 2 MiB per connection: 500 MiB over this run.)
 */
@ExtendWith(NoLeaks.class)
class UcxListenerFootprintTest {
    private static final AtomicInteger PORTS = new AtomicInteger(25_000 + (int) (ProcessHandle.current().pid() % 2000));
    private static final int WARM_UP = 60;
    private static final int CYCLES = 240;
    private static final int BYTES = 256 << 10;

    /** The listener's resident KiB and its count of mappings. */
    private static long[] footprint(long pid) throws IOException {
        long rss = -1;
        for (String l : Files.readAllLines(Path.of("/proc/" + pid + "/status"))) {
            if (l.startsWith("VmRSS:")) {
                rss = Long.parseLong(l.replaceAll("[^0-9]", ""));
            }
        }
        return new long[] {rss, Files.readAllLines(Path.of("/proc/" + pid + "/maps")).size()};
    }

    @Test
    void aListenerServingManyTcpConnectionsWithLargeTransfersDoesNotGrow() throws Exception {
        UcxAvailable.require();
        // A fixed, pre-touched heap: what grows is native memory, not the child's Java heap.
        UcxChild child = new UcxChild("tcp", PORTS.incrementAndGet(), "arena",
                Map.of("JAVA_TOOL_OPTIONS", "-Xms48m -Xmx48m -XX:+AlwaysPreTouch"));
        try (Arena arena = Arena.ofShared()) {
            child.expect("LISTENING");
            MemorySegment mem = arena.allocate(2L * BYTES, 4096);
            long[] warm = null;
            for (int cycle = 0; cycle < WARM_UP + CYCLES; cycle++) {
                if (cycle == WARM_UP) {
                    warm = footprint(child.process.pid());
                }
                oneConnection(child, mem, cycle);
            }
            long[] end = footprint(child.process.pid());
            assertThat(end[0] - warm[0]).as("the listener's resident KiB after %d more connections (from %d KiB)", CYCLES,
                    warm[0]).isLessThan(32L << 10);
            assertThat(end[1] - warm[1]).as("its mappings (from %d)", warm[1]).isLessThan(8);
            child.finish();
        } finally {
            child.process.destroyForcibly();
            child.process.waitFor(30, TimeUnit.SECONDS);
        }
    }

    /** A new device (a new peer worker for the listener) connects, WRITEs and READs back, and goes. */
    private static void oneConnection(UcxChild child, MemorySegment mem, int cycle) throws Exception {
        try (RdmaDevice dev = RdmaDevice.open("ucx")) {
            ProtectionDomain pd = dev.allocPd();
            CompletionQueue cq = dev.createCq(64);
            MemoryRegion mr = pd.register(mem, Access.LOCAL_WRITE);
            CmId id = dev.createCmId();
            QueuePair qp = id.createQp(pd, new QpInitAttributes().sendCq(cq).recvCq(cq).maxSendWr(16).maxRecvWr(4));
            id.connect(child.address);
            String[] key = child.expect("KEY ").split(" ");
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (id.connState() != CmId.ConnState.CONNECTED) {
                assertThat(System.nanoTime()).as("connected within 10 s").isLessThan(deadline);
                Thread.sleep(1);
            }
            int rkey = qp.importRemoteKey(MemorySegment.ofArray(HexFormat.of().parseHex(key[1])));
            long remote = Long.parseLong(key[2]);
            for (int i = 0; i < BYTES; i += 8) {
                mem.set(ValueLayout.JAVA_LONG, i, cycle * 1_000_003L + i);
            }
            transfer(qp, cq, Opcode.RDMA_WRITE, mem.address(), mr, remote, rkey);
            transfer(qp, cq, Opcode.RDMA_READ, mem.address() + BYTES, mr, remote, rkey);
            assertThat(mem.asSlice(BYTES, BYTES).mismatch(mem.asSlice(0, BYTES))).as("cycle %d read back", cycle).isEqualTo(-1);
            id.disconnect();
            WorkCompletion[] any = {new WorkCompletion()};
            while (cq.poll(any) > 0) {
                // flushed
            }
            id.destroyQp();
            id.close();
            child.expect("GONE");
            mr.close();
            cq.close();
            pd.close();
        }
    }

    private static void transfer(QueuePair qp, CompletionQueue cq, Opcode op, long local, MemoryRegion mr, long remote, int rkey) {
        qp.postSend(new WorkRequest(1).wrId(1).opcode(op).signaled(true).addSge(local, BYTES, mr.lkey()).remote(remote, rkey));
        WorkCompletion[] one = {new WorkCompletion()};
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (cq.poll(one) == 0) {
            assertThat(System.nanoTime()).as("%s completes within 10 s", op).isLessThan(deadline);
        }
        assertThat(one[0].status()).as(op.toString()).isEqualTo(WcStatus.SUCCESS);
    }
}
