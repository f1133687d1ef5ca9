package io.regmem.registration.ucx;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.Access;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.Opcode;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkRequest;
import io.regmem.registration.testkit.Loopback;
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.ValueLayout;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A UCX device with {@code progressThread=true} runs without anybody polling: the target executes
 * what arrives and answers, the initiator completes its requests into its CQ; each idle strategy;
 * the thread ends with its device.
 */
@ExtendWith(NoLeaks.class)
class UcxProgressThreadTest {

    private static long progressThreads() {
        return Thread.getAllStackTraces().keySet().stream().filter(t -> t.getName().startsWith("regmem-ucx-progress")).count();
    }

    @ParameterizedTest
    @ValueSource(strings = {"busy", "yield", "backoff", "sleep"})
    void workCompletesWithoutPolling(String idle) throws Exception {
        UcxAvailable.require();
        long before = progressThreads();
        try (Loopback lb = new Loopback("ucx", Map.of("progressThread", "true", "idleStrategy", idle), 64,
                new QpInitAttributes(), new QpInitAttributes())) {
            assertThat(progressThreads()).isEqualTo(before + 2);
            MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
            MemoryRegion remote = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ);
            int key = lb.key(remote);
            for (int i = 0; i < 50; i++) {
                lb.memA.set(ValueLayout.JAVA_LONG, 8L * i, 0xFEED_0000L + i);
                lb.qpA.postSend(new WorkRequest(1).wrId(i).opcode(Opcode.RDMA_WRITE).signaled(true)
                        .addSge(lb.memA.address() + 8L * i, 8, local.lkey()).remote(lb.memB.address() + 8L * i, key));
            }
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (lb.cqA.pending() < 50 && System.nanoTime() < deadline) {
                Thread.sleep(1);
            }
            assertThat(lb.cqA.pending()).as("completed by the progress threads, nobody polling").isEqualTo(50);
            for (int i = 0; i < 50; i++) {
                assertThat(lb.memB.get(ValueLayout.JAVA_LONG, 8L * i)).isEqualTo(0xFEED_0000L + i);
            }
            io.regmem.registration.WorkCompletion[] wcs = new io.regmem.registration.WorkCompletion[64];
            for (int i = 0; i < wcs.length; i++) {
                wcs[i] = new io.regmem.registration.WorkCompletion();
            }
            assertThat(lb.cqA.poll(wcs)).isEqualTo(50);
            for (int i = 0; i < 50; i++) {
                assertThat(wcs[i].wrId()).isEqualTo(i);
                assertThat(wcs[i].status()).isEqualTo(WcStatus.SUCCESS);
            }
        }
        assertThat(progressThreads()).as("the threads end with their devices").isEqualTo(before);
    }

    @Test
    void badOptionsAreRefusedAndOpenNothing() {
        UcxAvailable.require();
        Map<Map<String, String>, String> refusals = Map.of(
                Map.of("progressThread", "yes"), "progressThread must be true or false",
                Map.of("progressThread", "true", "idleStrategy", "nap"), "idleStrategy must be busy, yield, backoff or sleep",
                Map.of("idleStrateg", "busy"), "unknown option 'idleStrateg'");
        refusals.forEach((bad, message) -> assertThatThrownBy(() -> RdmaDevice.open("ucx", bad))
                .isInstanceOf(RdmaException.class)
                .satisfies(e -> assertThat(((RdmaException) e).errno()).isEqualTo(Errno.EINVAL))
                .hasMessageContaining(message));
        assertThat(RdmaDevice.openDevices()).isEmpty();
    }
}
