package io.regmem.registration;

import static io.regmem.registration.ObjectModelTest.assertRdma;
import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.Errno;
import io.regmem.registration.testkit.Loopback;
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.ValueLayout;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** A soft device with {@code progressThread=true} executes posted work without anybody polling. */
@ExtendWith(NoLeaks.class)
@org.junit.jupiter.api.Tag("soft-only")
class ProgressThreadTest {

    @Test
    void workCompletesWithoutPolling() throws Exception {
        try (Loopback lb = new Loopback(Map.of("progressThread", "true"), Loopback.QpInitAttributesSpec.DEFAULT)) {
            MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
            MemoryRegion remote = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
            lb.memA.set(ValueLayout.JAVA_LONG, 0, 0xFEEDL);
            lb.qpA.postSend(new WorkRequest(1).wrId(1).opcode(Opcode.RDMA_WRITE)
                    .addSge(lb.memA.address(), 8, local.lkey()).remote(lb.memB.address(), lb.key(remote)));
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (lb.cqA.pending() == 0 && System.nanoTime() < deadline) {
                Thread.sleep(1);
            }
            assertThat(lb.cqA.pending()).as("completed by the progress thread").isEqualTo(1);
            assertThat(lb.memB.get(ValueLayout.JAVA_LONG, 0)).isEqualTo(0xFEEDL);
            assertThat(lb.one(lb.cqA).status()).isEqualTo(WcStatus.SUCCESS);
        }
    }

    @Test
    void unknownOrBadOptionsAreRefused() {
        assertRdma(() -> RdmaDevice.open("soft", Map.of("maxSendSgee", "2")), Errno.EINVAL, "unknown option 'maxSendSgee'");
        assertRdma(() -> RdmaDevice.open("soft", Map.of("progressThread", "yes")), Errno.EINVAL, "progressThread");
    }
}
