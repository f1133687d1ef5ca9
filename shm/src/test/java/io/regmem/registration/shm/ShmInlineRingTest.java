package io.regmem.registration.shm;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.Access;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.Opcode;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import io.regmem.registration.testkit.Loopback;
import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.Providers;
import io.regmem.registration.CompletionQueue;
import java.util.Map;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * An {@code inlineThreshold} larger than a request record may be in the lane's ring ({@code ringBytes}
 * of 64 KiB: records of at most 16 KiB): a SEND or WRITE between the two goes pulled instead (or
 * streamed where pulls are off), never as a record the ring cannot hold (which errored the QP).
 */
@ExtendWith(NoLeaks.class)
class ShmInlineRingTest {

    @ParameterizedTest
    @ValueSource(strings = {"true", "false"})
    void aSendAboveWhatTheRingHoldsInlineStillGoes(String pull) {
        int size = 32 << 10;
        QpInitAttributes attrs = new QpInitAttributes().maxSendWr(8).maxRecvWr(8);
        Map<String, String> options = Map.of("inlineThreshold", "65536", "ringBytes", "65536", "pull", pull);
        try (Loopback lb = new Loopback("shm", options, 64, attrs, new QpInitAttributes().maxSendWr(8).maxRecvWr(8))) {
            MemoryRegion a = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
            MemoryRegion b = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
            for (int i = 0; i < size; i++) {
                lb.memA.set(JAVA_BYTE, i, (byte) (i * 31 + 7));
            }
            lb.qpB.postRecv(new WorkRequest(1).wrId(1).addSge(lb.memB.address(), size, b.lkey()));
            lb.qpA.postSend(new WorkRequest(1).wrId(2).opcode(Opcode.SEND).signaled(true)
                    .addSge(lb.memA.address(), size, a.lkey()));
            lb.qpA.postSend(new WorkRequest(1).wrId(3).opcode(Opcode.RDMA_WRITE).signaled(true)
                    .addSge(lb.memA.address(), size, a.lkey()).remote(lb.memB.address() + size, Providers.key(lb.qpA, b)));
            WorkCompletion got = one(lb, lb.cqB);
            assertThat(got.status()).isEqualTo(WcStatus.SUCCESS);
            assertThat(got.byteLen()).isEqualTo(size);
            assertThat(one(lb, lb.cqA).status()).as("the SEND").isEqualTo(WcStatus.SUCCESS);
            assertThat(one(lb, lb.cqA).status()).as("the WRITE").isEqualTo(WcStatus.SUCCESS);
            for (int i = 0; i < size; i++) {
                assertThat(lb.memB.get(JAVA_BYTE, i)).isEqualTo((byte) (i * 31 + 7));
                assertThat(lb.memB.get(JAVA_BYTE, size + i)).isEqualTo((byte) (i * 31 + 7));
            }
            assertThat(lb.qpA.state()).isEqualTo(QueuePair.State.RTS);
            a.close();
            b.close();
        }
    }

    /** The next completion of {@code cq}, polled for up to 10 s. */
    private static WorkCompletion one(Loopback lb, CompletionQueue cq) {
        WorkCompletion[] one = {new WorkCompletion()};
        long end = System.nanoTime() + 10_000_000_000L;
        while (System.nanoTime() < end) {
            if (cq.poll(one) == 1) {
                return one[0];
            }
            Thread.onSpinWait();
        }
        throw new AssertionError("no completion on " + cq + " within 10 s");
    }
}
