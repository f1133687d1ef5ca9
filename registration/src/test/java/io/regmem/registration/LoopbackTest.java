package io.regmem.registration;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.testkit.Loopback;
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** Two connected QPs: WRITE, READ, SEND/RECV, SEND_WITH_IMM and WRITE_WITH_IMM over multi-SGE lists, byte-exact. */
@ExtendWith(NoLeaks.class)
class LoopbackTest {
    private Loopback lb = new Loopback();
    private final WorkRequest wr = new WorkRequest(4);

    @AfterEach
    void tearDown() {
        lb.close();
    }

    private static void fill(MemorySegment s, long off, long len, int seed) {
        for (long i = 0; i < len; i++) {
            s.set(ValueLayout.JAVA_BYTE, off + i, (byte) (seed + i * 31));
        }
    }

    @Test
    void rdmaWriteGathersLocalSgesIntoTheRemoteRange() {
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        MemoryRegion remote = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        fill(lb.memA, 0, 3000, 1);
        fill(lb.memA, 10_000, 5000, 2);
        fill(lb.memA, 70_000, 100, 3);
        wr.reset().wrId(7).opcode(Opcode.RDMA_WRITE)
                .addSge(lb.memA.address(), 3000, local.lkey())
                .addSge(lb.memA.address() + 10_000, 5000, local.lkey())
                .addSge(lb.memA.address() + 70_000, 100, local.lkey())
                .remote(lb.memB.address() + 4096, lb.key(remote));
        lb.qpA.postSend(wr);
        WorkCompletion wc = lb.one(lb.cqA);
        assertThat(wc.status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(wc.wrId()).isEqualTo(7);
        assertThat(wc.opcode()).isEqualTo(Opcode.RDMA_WRITE);
        assertThat(wc.byteLen()).isEqualTo(8100);
        assertThat(wc.qp()).isSameAs(lb.qpA);
        assertThat(lb.memB.asSlice(4096, 3000).mismatch(lb.memA.asSlice(0, 3000))).isEqualTo(-1);
        assertThat(lb.memB.asSlice(7096, 5000).mismatch(lb.memA.asSlice(10_000, 5000))).isEqualTo(-1);
        assertThat(lb.memB.asSlice(12_096, 100).mismatch(lb.memA.asSlice(70_000, 100))).isEqualTo(-1);
        assertThat(lb.memB.get(ValueLayout.JAVA_BYTE, 4095)).as("nothing before the range").isZero();
        assertThat(lb.memB.get(ValueLayout.JAVA_BYTE, 12_196)).as("nothing after the range").isZero();
        assertThat(lb.poll(lb.cqB)).as("a WRITE makes no completion at the target").isZero();
    }

    @Test
    void rdmaReadScattersTheRemoteRangeIntoLocalSges() {
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        MemoryRegion remote = lb.pdB.register(lb.memB, Access.REMOTE_READ);
        fill(lb.memB, 100, 6000, 9);
        wr.reset().wrId(8).opcode(Opcode.RDMA_READ)
                .addSge(lb.memA.address() + 500, 1000, local.lkey())
                .addSge(lb.memA.address() + 8192, 5000, local.lkey())
                .remote(lb.memB.address() + 100, lb.key(remote));
        lb.qpA.postSend(wr);
        WorkCompletion wc = lb.one(lb.cqA);
        assertThat(wc.status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(wc.byteLen()).isEqualTo(6000);
        assertThat(lb.memA.asSlice(500, 1000).mismatch(lb.memB.asSlice(100, 1000))).isEqualTo(-1);
        assertThat(lb.memA.asSlice(8192, 5000).mismatch(lb.memB.asSlice(1100, 5000))).isEqualTo(-1);
    }

    @Test
    void sendConsumesTheNextReceiveAndScattersIntoItsSges() {
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        MemoryRegion recvMr = lb.pdB.register(lb.memB, Access.LOCAL_WRITE);
        WorkRequest recv = new WorkRequest(2).wrId(21)
                .addSge(lb.memB.address(), 100, recvMr.lkey())
                .addSge(lb.memB.address() + 1000, 4000, recvMr.lkey());
        lb.qpB.postRecv(recv);
        lb.qpB.postRecv(new WorkRequest(1).wrId(22).addSge(lb.memB.address() + 8000, 64, recvMr.lkey()));
        fill(lb.memA, 0, 300, 4);
        wr.reset().wrId(11).opcode(Opcode.SEND).addSge(lb.memA.address(), 150, local.lkey())
                .addSge(lb.memA.address() + 150, 150, local.lkey());
        lb.qpA.postSend(wr);
        assertThat(lb.one(lb.cqA).status()).isEqualTo(WcStatus.SUCCESS);
        WorkCompletion rc = lb.one(lb.cqB);
        assertThat(rc.wrId()).isEqualTo(21);
        assertThat(rc.opcode()).isEqualTo(Opcode.RECV);
        assertThat(rc.byteLen()).isEqualTo(300);
        assertThat(rc.qp()).isSameAs(lb.qpB);
        assertThat(lb.memB.asSlice(0, 100).mismatch(lb.memA.asSlice(0, 100))).isEqualTo(-1);
        assertThat(lb.memB.asSlice(1000, 200).mismatch(lb.memA.asSlice(100, 200))).isEqualTo(-1);
        assertThat(lb.memB.get(ValueLayout.JAVA_BYTE, 1200)).isZero();
        assertThat(lb.qpB.outstandingRecvs()).isEqualTo(1);
    }

    @Test
    void writeWithImmediateLandsAndDeliversTheImmediate() {
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        MemoryRegion remote = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        lb.qpB.postRecv(new WorkRequest(1).wrId(31));
        fill(lb.memA, 0, 64, 5);
        wr.reset().wrId(12).opcode(Opcode.RDMA_WRITE_WITH_IMM).immData(0xCAFE)
                .addSge(lb.memA.address(), 64, local.lkey()).remote(lb.memB.address() + 64, lb.key(remote));
        lb.qpA.postSend(wr);
        assertThat(lb.one(lb.cqA).status()).isEqualTo(WcStatus.SUCCESS);
        WorkCompletion rc = lb.one(lb.cqB);
        assertThat(rc.opcode()).isEqualTo(Opcode.RECV_RDMA_WITH_IMM);
        assertThat(rc.withImm()).isTrue();
        assertThat(rc.immData()).isEqualTo(0xCAFE);
        assertThat(rc.byteLen()).isEqualTo(64);
        assertThat(rc.wrId()).isEqualTo(31);
        assertThat(lb.memB.asSlice(64, 64).mismatch(lb.memA.asSlice(0, 64))).isEqualTo(-1);
    }

    @Test
    void sendWithImmediateDeliversTheImmediateInTheReceiveCompletion() {
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        MemoryRegion recvMr = lb.pdB.register(lb.memB, Access.LOCAL_WRITE);
        lb.qpB.postRecv(new WorkRequest(1).wrId(41).addSge(lb.memB.address(), 4096, recvMr.lkey()));
        lb.qpB.postRecv(new WorkRequest(1).wrId(42).addSge(lb.memB.address() + 4096, 4096, recvMr.lkey()));
        fill(lb.memA, 0, 200, 7);
        wr.reset().wrId(13).opcode(Opcode.SEND_WITH_IMM).immData(0xFEEDBEEF).addSge(lb.memA.address(), 200, local.lkey());
        lb.qpA.postSend(wr);
        WorkCompletion sc = lb.one(lb.cqA);
        assertThat(sc.status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(sc.opcode()).isEqualTo(Opcode.SEND_WITH_IMM);
        WorkCompletion rc = lb.one(lb.cqB);
        assertThat(rc.status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(rc.wrId()).isEqualTo(41);
        assertThat(rc.opcode()).as("a SEND's receive, with the immediate flag (IBV_WC_RECV + IBV_WC_WITH_IMM)").isEqualTo(Opcode.RECV);
        assertThat(rc.withImm()).isTrue();
        assertThat(rc.immData()).isEqualTo(0xFEEDBEEF);
        assertThat(rc.withInvalidate()).isFalse();
        assertThat(rc.byteLen()).isEqualTo(200);
        assertThat(lb.memB.asSlice(0, 200).mismatch(lb.memA.asSlice(0, 200))).isEqualTo(-1);

        // a plain SEND with an immediate set on its request carries none
        wr.reset().wrId(14).opcode(Opcode.SEND).immData(0x1234).addSge(lb.memA.address(), 8, local.lkey());
        lb.qpA.postSend(wr);
        assertThat(lb.one(lb.cqA).status()).isEqualTo(WcStatus.SUCCESS);
        WorkCompletion plain = lb.one(lb.cqB);
        assertThat(plain.wrId()).isEqualTo(42);
        assertThat(plain.withImm()).isFalse();
        assertThat(plain.immData()).isZero();

        // with no receive posted it fails as a SEND does
        wr.reset().wrId(15).opcode(Opcode.SEND_WITH_IMM).immData(1).addSge(lb.memA.address(), 8, local.lkey());
        lb.qpA.postSend(wr);
        assertThat(lb.one(lb.cqA).status()).isEqualTo(WcStatus.RNR_RETRY_EXC_ERR);
    }

    /**
     * Zero-length requests, as verbs has them (rdma-core's test_qpex rdma_write_zero_size and
     * rdma_read_zero_size): a WRITE or READ with one SGE of length 0 completes SUCCESS with byte_len 0
     * and moves nothing; neither its keys nor its remote address are checked (an empty entry touches no
     * memory; a zero-length RDMA is not validated at the responder); an empty entry among others is
     * skipped; a zero-byte SEND consumes a receive and completes with length 0.
     */
    @Test
    void zeroLengthRequestsCompleteWithNoBytesAndMoveNothing() {
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        MemoryRegion remote = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ);
        fill(lb.memA, 0, 256, 3);
        fill(lb.memB, 0, 256, 9);
        MemorySegment before = MemorySegment.ofArray(lb.memB.asSlice(0, 256).toArray(ValueLayout.JAVA_BYTE));
        for (Opcode op : new Opcode[] {Opcode.RDMA_WRITE, Opcode.RDMA_READ}) {
            wr.reset().wrId(50).opcode(op).addSge(lb.memA.address(), 0, local.lkey()).remote(lb.memB.address(), lb.key(remote));
            lb.qpA.postSend(wr);
            WorkCompletion wc = lb.one(lb.cqA);
            assertThat(wc.status()).as(op + " of 0 bytes").isEqualTo(WcStatus.SUCCESS);
            assertThat(wc.opcode()).isEqualTo(op);
            assertThat(wc.byteLen()).isZero();
            // an entry of length 0 with a key that resolves to nothing, to an address the target never registered
            wr.reset().wrId(51).opcode(op).addSge(0x1000, 0, 0x7777_7700).remote(0x2000, lb.key(remote) ^ 0x5500);
            lb.qpA.postSend(wr);
            assertThat(lb.one(lb.cqA).status()).as(op + " of 0 bytes through keys nothing has").isEqualTo(WcStatus.SUCCESS);
        }
        assertThat(lb.memB.asSlice(0, 256).mismatch(before)).as("nothing moved").isEqualTo(-1);
        assertThat(lb.memA.asSlice(0, 256).mismatch(lb.memB.asSlice(0, 256))).isNotEqualTo(-1);

        // an empty entry between two others is skipped
        wr.reset().wrId(52).opcode(Opcode.RDMA_WRITE).addSge(lb.memA.address(), 16, local.lkey())
                .addSge(lb.memA.address() + 100, 0, 0x7777_7700).addSge(lb.memA.address() + 16, 16, local.lkey())
                .remote(lb.memB.address() + 1000, lb.key(remote));
        lb.qpA.postSend(wr);
        WorkCompletion wc = lb.one(lb.cqA);
        assertThat(wc.status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(wc.byteLen()).isEqualTo(32);
        assertThat(lb.memB.asSlice(1000, 32).mismatch(lb.memA.asSlice(0, 32))).isEqualTo(-1);

        // a SEND of no bytes consumes a receive
        lb.qpB.postRecv(new WorkRequest(1).wrId(53).addSge(lb.memB.address() + 2048, 64, remote.lkey()));
        wr.reset().wrId(54).opcode(Opcode.SEND).addSge(lb.memA.address(), 0, local.lkey());
        lb.qpA.postSend(wr);
        assertThat(lb.one(lb.cqA).status()).isEqualTo(WcStatus.SUCCESS);
        WorkCompletion rc = lb.one(lb.cqB);
        assertThat(rc.wrId()).isEqualTo(53);
        assertThat(rc.status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(rc.byteLen()).isZero();
        assertThat(lb.qpA.state()).isEqualTo(QueuePair.State.RTS);
    }

    /**
     * A ZERO_BASED region ({@code IBV_ACCESS_ZERO_BASED}) is addressed by offset from its first byte:
     * WRITE and READ at offsets land in and come from the region; an offset past its end, or its
     * absolute address (an offset far past the end), is REM_ACCESS_ERR and moves nothing.
     */
    @Test
    void aZeroBasedRegionIsAddressedByOffset() {
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        MemorySegment window = lb.memB.asSlice(8192, 4096);
        MemoryRegion remote = lb.pdB.register(window, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ,
                Access.ZERO_BASED);
        fill(lb.memA, 0, 512, 11);
        wr.reset().wrId(60).opcode(Opcode.RDMA_WRITE).addSge(lb.memA.address(), 256, local.lkey()).remote(100, lb.key(remote));
        lb.qpA.postSend(wr);
        assertThat(lb.one(lb.cqA).status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(window.asSlice(100, 256).mismatch(lb.memA.asSlice(0, 256))).as("the WRITE at offset 100").isEqualTo(-1);
        fill(window, 2000, 300, 12);
        wr.reset().wrId(61).opcode(Opcode.RDMA_READ).addSge(lb.memA.address() + 1024, 300, local.lkey()).remote(2000, lb.key(remote));
        lb.qpA.postSend(wr);
        assertThat(lb.one(lb.cqA).status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(lb.memA.asSlice(1024, 300).mismatch(window.asSlice(2000, 300))).as("the READ at offset 2000").isEqualTo(-1);
        // the last byte is reachable, one past it is not
        wr.reset().wrId(62).opcode(Opcode.RDMA_WRITE).addSge(lb.memA.address(), 1, local.lkey()).remote(4095, lb.key(remote));
        lb.qpA.postSend(wr);
        assertThat(lb.one(lb.cqA).status()).isEqualTo(WcStatus.SUCCESS);
        MemorySegment before = MemorySegment.ofArray(lb.memB.toArray(ValueLayout.JAVA_BYTE));
        wr.reset().wrId(63).opcode(Opcode.RDMA_WRITE).addSge(lb.memA.address(), 2, local.lkey()).remote(4095, lb.key(remote));
        lb.qpA.postSend(wr);
        assertThat(lb.one(lb.cqA).status()).as("a WRITE past the region's end").isEqualTo(WcStatus.REM_ACCESS_ERR);
        assertThat(lb.memB.mismatch(before)).as("nothing moved").isEqualTo(-1);
    }

    @Test
    void aZeroBasedRegionRefusesItsAbsoluteAddress() {
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        MemorySegment window = lb.memB.asSlice(8192, 4096);
        MemoryRegion remote = lb.pdB.register(window, Access.REMOTE_WRITE, Access.LOCAL_WRITE, Access.ZERO_BASED);
        MemorySegment before = MemorySegment.ofArray(lb.memB.toArray(ValueLayout.JAVA_BYTE));
        wr.reset().wrId(64).opcode(Opcode.RDMA_WRITE).addSge(lb.memA.address(), 8, local.lkey())
                .remote(window.address(), lb.key(remote));
        lb.qpA.postSend(wr);
        assertThat(lb.one(lb.cqA).status()).as("the absolute address, taken as an offset").isEqualTo(WcStatus.REM_ACCESS_ERR);
        assertThat(lb.memB.mismatch(before)).as("nothing moved").isEqualTo(-1);
    }

    @Test
    void dmaMappedMemoryUsesTheLocalDmaKey() {
        DmaMapping map = lb.devA.dmaMap(lb.memA.asSlice(0, 8192));
        MemoryRegion remote = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        fill(lb.memA, 0, 8192, 6);
        wr.reset().opcode(Opcode.RDMA_WRITE).addSge(lb.memA.address() + 10, 8000, lb.pdA.localDmaLkey())
                .remote(lb.memB.address(), lb.key(remote));
        lb.qpA.postSend(wr);
        assertThat(lb.one(lb.cqA).status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(lb.memB.asSlice(0, 8000).mismatch(lb.memA.asSlice(10, 8000))).isEqualTo(-1);
        map.close();
        // unmapped: the same SGE is now a protection error
        lb.qpA.postSend(wr);
        assertThat(lb.one(lb.cqA).status()).isEqualTo(WcStatus.LOC_PROT_ERR);
    }

    @Test
    void unsignaledSendsCompleteSilentlyButInOrder() {
        lb.close();
        lb = new Loopback(java.util.Map.of(), new Loopback.QpInitAttributesSpec(64, 64, 4, false, 64));
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        MemoryRegion remote = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        WorkRequest[] chain = new WorkRequest[4];
        for (int i = 0; i < 4; i++) {
            lb.memA.set(ValueLayout.JAVA_LONG, i * 8L, 100 + i);
            chain[i] = new WorkRequest(1).wrId(i).opcode(Opcode.RDMA_WRITE).signaled(i == 3)
                    .addSge(lb.memA.address() + i * 8L, 8, local.lkey()).remote(lb.memB.address(), lb.key(remote));
            if (i > 0) {
                chain[i - 1].next(chain[i]);
            }
        }
        lb.qpA.postSend(chain[0]);
        WorkCompletion wc = lb.one(lb.cqA);
        assertThat(wc.wrId()).isEqualTo(3);
        // in order: the last write wins
        assertThat(lb.memB.get(ValueLayout.JAVA_LONG, 0)).isEqualTo(103);
        assertThat(lb.qpA.outstandingSends()).isZero();
    }
}
