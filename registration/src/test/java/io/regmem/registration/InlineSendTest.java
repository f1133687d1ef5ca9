package io.regmem.registration;

import static io.regmem.registration.ObjectModelTest.assertRdma;
import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.Errno;
import io.regmem.registration.testkit.Loopback;
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Inline sends ({@code IBV_SEND_INLINE}, {@code max_inline_data}): the payload is copied when the
 * request is posted, so it needs no registration, no lkey, and may be overwritten or freed at once;
 * SEND and WRITE kinds only, within the QP's maxInlineData.
 */
@ExtendWith(NoLeaks.class)
class InlineSendTest {
    private final Loopback lb = new Loopback(Map.of(), 256, new QpInitAttributes().maxInlineData(256).maxSendSge(2),
            new QpInitAttributes());
    private final WorkRequest wr = new WorkRequest(2);

    @AfterEach
    void tearDown() {
        lb.close();
    }

    private WorkCompletion await(CompletionQueue cq, CompletionQueue other) {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (cq.poll(lb.wcs) == 0) {
            other.poll(new WorkCompletion[0]);
            assertThat(System.nanoTime()).as("a completion within 10 s").isLessThan(deadline);
        }
        return lb.wcs[0];
    }

    @Test
    void anInlineSendFromUnregisteredHeapMemoryLandsAsItWasAtPostTime() {
        MemoryRegion sink = lb.pdB.register(lb.memB, Access.LOCAL_WRITE);
        lb.qpB.postRecv(new WorkRequest(1).wrId(5).addSge(lb.memB.address(), 4096, sink.lkey()));
        byte[] bytes = new byte[200];
        for (int i = 0; i < bytes.length; i++) {
            bytes[i] = (byte) (i * 7 + 1);
        }
        MemorySegment heap = MemorySegment.ofArray(bytes);
        assertThat(lb.qpA.maxInlineData()).isEqualTo(256);
        lb.qpA.postSend(wr.reset().wrId(1).opcode(Opcode.SEND_WITH_IMM).immData(42).signaled(true).inline(heap));
        java.util.Arrays.fill(bytes, (byte) 0); // reused at once: the request carries its own copy
        WorkCompletion recv = await(lb.cqB, lb.cqA);
        assertThat(recv.status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(recv.byteLen()).isEqualTo(200);
        assertThat(recv.immData()).isEqualTo(42);
        for (int i = 0; i < 200; i++) {
            assertThat(lb.memB.get(ValueLayout.JAVA_BYTE, i)).as("byte %d", i).isEqualTo((byte) (i * 7 + 1));
        }
        WorkCompletion sent = await(lb.cqA, lb.cqB);
        assertThat(sent.status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(sent.byteLen()).isEqualTo(200);
    }

    @Test
    void anInlineWriteFromAFreedArenaCopiedBeforeItsCloseLandsByteExact() {
        MemoryRegion target = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        int key = lb.key(target);
        for (int round = 0; round < 20; round++) {
            try (Arena a = Arena.ofConfined()) {
                MemorySegment payload = a.allocate(64);
                payload.fill((byte) (round + 1));
                lb.qpA.postSend(wr.reset().wrId(round).opcode(Opcode.RDMA_WRITE).signaled(true).inline(payload)
                        .remote(lb.memB.address() + 64L * round, key));
            } // freed before the WRITE executes
            assertThat(await(lb.cqA, lb.cqB).status()).isEqualTo(WcStatus.SUCCESS);
        }
        for (int round = 0; round < 20; round++) {
            assertThat(lb.memB.get(ValueLayout.JAVA_BYTE, 64L * round + 63)).isEqualTo((byte) (round + 1));
        }
        // an empty inline WRITE completes with 0 bytes
        lb.qpA.postSend(wr.reset().wrId(99).opcode(Opcode.RDMA_WRITE).signaled(true).inline(MemorySegment.ofArray(new byte[0]))
                .remote(lb.memB.address(), key));
        WorkCompletion wc = await(lb.cqA, lb.cqB);
        assertThat(wc.status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(wc.byteLen()).isZero();
    }

    @Test
    void aLengthSendsOnlyThePayloadsFirstBytesAndMustFitIt() {
        MemoryRegion sink = lb.pdB.register(lb.memB, Access.LOCAL_WRITE);
        lb.qpB.postRecv(new WorkRequest(1).wrId(5).addSge(lb.memB.address(), 4096, sink.lkey()));
        MemorySegment payload = MemorySegment.ofArray(new byte[100]).fill((byte) 3);
        assertRdma(() -> lb.qpA.postSend(wr.reset().opcode(Opcode.SEND).inline(payload, 101)), Errno.EINVAL,
                "inline length 101 is outside the payload's [0, 100] bytes", "bad WR index 0");
        assertRdma(() -> lb.qpA.postSend(wr.reset().opcode(Opcode.SEND).inline(payload, -1)), Errno.EINVAL);
        assertThat(lb.qpA.outstandingSends()).isZero();
        lb.qpA.postSend(wr.reset().wrId(1).opcode(Opcode.SEND).signaled(true).inline(payload, 10));
        assertThat(wr.inlineLength()).isEqualTo(10);
        WorkCompletion recv = await(lb.cqB, lb.cqA);
        assertThat(recv.status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(recv.byteLen()).isEqualTo(10);
        assertThat(lb.memB.get(ValueLayout.JAVA_BYTE, 9)).isEqualTo((byte) 3);
        assertThat(lb.memB.get(ValueLayout.JAVA_BYTE, 10)).as("nothing past the length").isNotEqualTo((byte) 3);
        assertThat(await(lb.cqA, lb.cqB).byteLen()).isEqualTo(10);
    }

    @Test
    void inlineMisuseIsEinvalAndPostsNothingOfTheChain() {
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        MemorySegment small = MemorySegment.ofArray(new byte[16]);
        int before = lb.qpA.outstandingSends();
        assertRdma(() -> lb.qpA.postSend(wr.reset().opcode(Opcode.SEND).inline(MemorySegment.ofArray(new byte[257]))),
                Errno.EINVAL, "exceeds maxInlineData 256", "bad WR index 0");
        assertRdma(() -> lb.qpA.postSend(wr.reset().opcode(Opcode.RDMA_READ).inline(small)), Errno.EINVAL,
                "RDMA_READ cannot be inline");
        assertRdma(() -> lb.qpA.postSend(wr.reset().opcode(Opcode.ATOMIC_FETCH_AND_ADD).inline(small)), Errno.EINVAL);
        assertRdma(() -> lb.qpA.postSend(wr.reset().opcode(Opcode.SEND).inline(small).addSge(lb.memA.address(), 8, local.lkey())),
                Errno.EINVAL, "carries its payload, not SGEs");
        Arena closed = Arena.ofConfined();
        MemorySegment gone = closed.allocate(8);
        closed.close();
        WorkRequest second = new WorkRequest(1).opcode(Opcode.SEND).inline(gone);
        assertRdma(() -> lb.qpA.postSend(wr.reset().opcode(Opcode.SEND).inline(small).next(second)), Errno.EINVAL,
                "freed", "bad WR index 1");
        assertThat(lb.qpA.outstandingSends()).as("nothing of a refused chain is posted").isEqualTo(before);
        assertRdma(() -> lb.qpB.postSend(wr.reset().opcode(Opcode.SEND).inline(small)), Errno.EINVAL,
                "exceeds maxInlineData 0");
        CmId id = lb.devA.createCmId();
        assertRdma(() -> id.createQp(lb.pdA, new QpInitAttributes().maxInlineData(QpInitAttributes.MAX_INLINE_DATA + 1)
                .sendCq(lb.cqA).recvCq(lb.cqA)), Errno.EINVAL, "maxInlineData 1025 is outside [0, 1024]");
        assertThat(id.qp()).isNull();
        id.close();
        assertThat(lb.qpA.state()).isEqualTo(QueuePair.State.RTS);
    }
}
