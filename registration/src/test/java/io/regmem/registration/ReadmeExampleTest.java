package io.regmem.registration;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** README's registration example, kept compiling and true (one device, both ends). */
@ExtendWith(NoLeaks.class)
@org.junit.jupiter.api.Tag("soft-only")
class ReadmeExampleTest {

    @Test
    void theReadmeExampleWorks() {
        try (Arena arena = Arena.ofShared()) {
            MemorySegment segment = arena.allocate(16384, 4096);
            segment.set(ValueLayout.JAVA_LONG, 0, 4242L);
            WorkCompletion[] wcs = {new WorkCompletion()};
            try (RdmaDevice dev = RdmaDevice.open("soft")) {
                ProtectionDomain pd = dev.allocPd();
                CompletionQueue cq = dev.createCq(256);
                MemoryRegion mr = pd.register(segment, Access.LOCAL_WRITE, Access.REMOTE_WRITE);

                CmId listener = dev.createCmId();
                listener.listen("orders");
                CmId active = dev.createCmId();
                QueuePair qp = active.createQp(pd, QpInitAttributes.of(cq));
                active.connect("orders");
                CmId passive = listener.getRequest();
                passive.createQp(pd, QpInitAttributes.of(cq));
                passive.accept();

                int rkey = qp.importRemoteKey(mr.exportRemoteKey());
                WorkRequest wr = new WorkRequest(4)
                        .wrId(1).opcode(Opcode.RDMA_WRITE).signaled(true)
                        .addSge(segment.address(), 4096, mr.lkey())
                        .remote(segment.address() + 8192, rkey);
                qp.postSend(wr);
                while (cq.poll(wcs) == 0) {
                    Thread.onSpinWait();
                }

                active.disconnect();
                active.destroyQp();
                passive.destroyQp();
                active.close();
                passive.close();
                listener.close();
                mr.close();
                cq.close();
                pd.close();
                assertThat(dev.resources().survivors()).isEmpty();
            }
            assertThat(wcs[0].status()).isEqualTo(WcStatus.SUCCESS);
            assertThat(segment.get(ValueLayout.JAVA_LONG, 8192)).isEqualTo(4242L);
        }
    }
}
