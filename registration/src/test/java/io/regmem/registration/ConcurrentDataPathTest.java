package io.regmem.registration;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.testkit.Loopback;
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.ValueLayout;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Posting, progressing and polling from several threads at once: the progress threads execute,
 * one thread makes A WRITE into B and polls A's CQ, another makes B READ from A and polls B's CQ.
 * Every completion must succeed in order and every byte must be right.
 *
 * <pre>
 *   memA [0, 512K)     A's write sources          memB [0, 256K)     A's write targets (REMOTE_WRITE)
 *   memA [512K, 768K)  readable by B (REMOTE_READ) memB [256K, 512K) B's read sinks (LOCAL_WRITE)
 * </pre>
 */
@ExtendWith(NoLeaks.class)
class ConcurrentDataPathTest {
    private static final int OPS = 3000;
    private static final long READABLE = 512 << 10;
    private static final long SINKS = 256 << 10;

    @Test
    void writersReadersAndTheProgressThreadsAgree() throws Exception {
        try (Loopback lb = new Loopback(Map.of("progressThread", "true"), Loopback.QpInitAttributesSpec.DEFAULT)) {
            MemoryRegion sources = lb.pdA.register(lb.memA.asSlice(0, READABLE), Access.LOCAL_WRITE);
            MemoryRegion readable = lb.pdA.register(lb.memA.asSlice(READABLE, 256 << 10), Access.REMOTE_READ);
            MemoryRegion targets = lb.pdB.register(lb.memB.asSlice(0, SINKS), Access.LOCAL_WRITE, Access.REMOTE_WRITE);
            MemoryRegion sinks = lb.pdB.register(lb.memB.asSlice(SINKS, 256 << 10), Access.LOCAL_WRITE);
            for (long off = 0; off < 4096; off += 8) {
                lb.memA.set(ValueLayout.JAVA_LONG, READABLE + off, 0x2222_0000L + off);
            }
            AtomicReference<Throwable> failure = new AtomicReference<>();
            Thread writer = new Thread(() -> {
                try {
                    WorkRequest wr = new WorkRequest(1);
                    WorkCompletion[] wcs = {new WorkCompletion()};
                    for (int op = 0; op < OPS; op++) {
                        long slot = (op % 1024) * 8L;
                        lb.memA.set(ValueLayout.JAVA_LONG, slot, op);
                        wr.reset().wrId(op).opcode(Opcode.RDMA_WRITE).addSge(lb.memA.address() + slot, 8, sources.lkey())
                                .remote(lb.memB.address() + slot, lb.key(targets));
                        lb.qpA.postSend(wr);
                        while (lb.cqA.poll(wcs) == 0) {
                            Thread.onSpinWait();
                        }
                        if (wcs[0].status() != WcStatus.SUCCESS || wcs[0].wrId() != op
                                || lb.memB.get(ValueLayout.JAVA_LONG, slot) != op) {
                            throw new AssertionError("write " + op + ": " + wcs[0]);
                        }
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            });
            Thread reader = new Thread(() -> {
                try {
                    WorkRequest wr = new WorkRequest(1);
                    WorkCompletion[] wcs = {new WorkCompletion()};
                    for (int op = 0; op < OPS; op++) {
                        long off = (op % 512) * 8L;
                        lb.memB.set(ValueLayout.JAVA_LONG, SINKS + off, -1L);
                        wr.reset().wrId(op).opcode(Opcode.RDMA_READ)
                                .addSge(lb.memB.address() + SINKS + off, 8, sinks.lkey())
                                .remote(readable.address() + off, lb.keyAtB(readable));
                        lb.qpB.postSend(wr);
                        while (lb.cqB.poll(wcs) == 0) {
                            Thread.onSpinWait();
                        }
                        if (wcs[0].status() != WcStatus.SUCCESS || wcs[0].wrId() != op
                                || lb.memB.get(ValueLayout.JAVA_LONG, SINKS + off) != 0x2222_0000L + off) {
                            throw new AssertionError("read " + op + ": " + wcs[0]);
                        }
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            });
            writer.start();
            reader.start();
            writer.join();
            reader.join();
            if (failure.get() != null) {
                throw new AssertionError(failure.get());
            }
            assertThat(lb.qpA.state()).isEqualTo(QueuePair.State.RTS);
            assertThat(lb.qpB.state()).isEqualTo(QueuePair.State.RTS);
            assertThat(lb.cqA.overrun()).isFalse();
        }
    }
}
