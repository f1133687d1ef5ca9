package io.regmem.registration.ucx;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.Access;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.Opcode;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkRequest;
import io.regmem.registration.testkit.Loopback;
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.ValueLayout;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A ucx device whose progress thread idles with {@code backoff} and whose connections all run over
 * the same-host lane sleeps on the lanes' futex words, as an shm device's does, and a peer's request
 * wakes it: spaced READs each find it asleep (its QP's diagnostics count the wake-ups) and complete.
 */
@ExtendWith(NoLeaks.class)
class UcxLaneSleepTest {
    @Test
    void aProgressThreadWithOnlyLaneConnectionsSleepsOnTheLanesAndIsWokenByRequests() throws Exception {
        Map<String, String> options = Map.of("sameHostLane", "true", "progressThread", "true", "idleStrategy", "backoff");
        QpInitAttributes attrs = new QpInitAttributes().maxSendWr(16).maxRecvWr(16);
        try (Loopback lb = new Loopback("ucx", options, 64, attrs, new QpInitAttributes().maxSendWr(16).maxRecvWr(16))) {
            assertThat(lb.qpB.diagnostics()).startsWith("ucx over the same-host lane").contains("progress thread woken");
            MemoryRegion mrA = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
            MemoryRegion mrB = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_READ);
            int rkey = lb.key(mrB);
            long before = woken(lb.qpB.diagnostics());
            WorkRequest w = new WorkRequest(1);
            int reads = 10;
            for (int i = 0; i < reads; i++) {
                lb.memB.set(ValueLayout.JAVA_LONG, 0, 1000L + i);
                Thread.sleep(20); // both progress threads fall asleep (after 50 us with nothing to do)
                lb.qpA.postSend(w.reset().wrId(i).opcode(Opcode.RDMA_READ).signaled(true)
                        .addSge(lb.memA.address(), 8, mrA.lkey()).remote(lb.memB.address(), rkey));
                long deadline = System.nanoTime() + 10_000_000_000L;
                while (lb.cqA.poll(lb.wcs) == 0) {
                    assertThat(System.nanoTime()).as("READ %d completes", i).isLessThan(deadline);
                    Thread.onSpinWait();
                }
                assertThat(lb.wcs[0].status()).isEqualTo(WcStatus.SUCCESS);
                assertThat(lb.memA.get(ValueLayout.JAVA_LONG, 0)).isEqualTo(1000L + i);
            }
            long woken = woken(lb.qpB.diagnostics()) - before;
            assertThat(woken).as("the sleeping progress thread was woken by the requests").isGreaterThanOrEqualTo(reads / 2);
            mrA.close();
            mrB.close();
        }
    }

    private static long woken(String diagnostics) {
        return Long.parseLong(diagnostics.replaceAll(".*progress thread woken (\\d+) times.*", "$1"));
    }
}
