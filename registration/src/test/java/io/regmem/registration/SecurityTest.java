package io.regmem.registration;

import static io.regmem.registration.ObjectModelTest.assertRdma;
import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.Errno;
import io.regmem.core.ScatterList;
import io.regmem.registration.testkit.Loopback;
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * What a NIC refuses: bad, stale or bumped keys, ranges one byte outside, missing rights, bad SGEs,
 * destroyed QPs. Each is an error status (the target byte-for-byte unchanged) or an exception.
 */
@ExtendWith(NoLeaks.class)
class SecurityTest {
    private static final int TARGET = 64 << 10;
    private Loopback lb;
    private MemoryRegion local;
    private MemoryRegion remote;
    private MemorySegment target;
    private MemorySegment snapshot;
    private final WorkRequest wr = new WorkRequest(4);

    @BeforeEach
    void setUp() {
        lb = new Loopback();
        local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        target = lb.memB.asSlice(4096, TARGET);
        remote = lb.pdB.register(target, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ);
        for (long i = 0; i < lb.memA.byteSize(); i += 8) {
            lb.memA.set(ValueLayout.JAVA_LONG, i, 0x5A5A5A5A5A5A5A5AL);
        }
        for (long i = 0; i < lb.memB.byteSize(); i += 8) {
            lb.memB.set(ValueLayout.JAVA_LONG, i, i);
        }
        snapshot = Arena.ofAuto().allocate(lb.memB.byteSize());
        snapshot.copyFrom(lb.memB);
    }

    @AfterEach
    void tearDown() {
        lb.close();
    }

    private void assertTargetUntouched() {
        assertThat(lb.memB.mismatch(snapshot)).as("target memory changed").isEqualTo(-1);
    }

    private WcStatus write(long remoteAddress, long length, int rkey) {
        wr.reset().wrId(1).opcode(Opcode.RDMA_WRITE).addSge(lb.memA.address(), length, local.lkey()).remote(remoteAddress, rkey);
        lb.qpA.postSend(wr);
        return lb.one(lb.cqA).status();
    }

    private WcStatus read(long remoteAddress, long length, int rkey) {
        wr.reset().wrId(2).opcode(Opcode.RDMA_READ).addSge(lb.memA.address(), length, local.lkey()).remote(remoteAddress, rkey);
        lb.qpA.postSend(wr);
        return lb.one(lb.cqA).status();
    }

    @Test
    void exactBoundsWorkAtBothEnds() {
        assertThat(write(target.address(), 16, lb.key(remote))).isEqualTo(WcStatus.SUCCESS);
        assertThat(write(target.address() + TARGET - 16, 16, lb.key(remote))).isEqualTo(WcStatus.SUCCESS);
        assertThat(target.get(ValueLayout.JAVA_LONG, TARGET - 8)).isEqualTo(0x5A5A5A5A5A5A5A5AL);
    }

    @Test
    void oneByteBeforeTheRegionIsRefusedAndTouchesNothing() {
        assertThat(write(target.address() - 1, 16, lb.key(remote))).isEqualTo(WcStatus.REM_ACCESS_ERR);
        assertTargetUntouched();
        assertThat(lb.qpA.state()).isEqualTo(QueuePair.State.ERROR);
        assertThat(lb.qpB.state()).as("a remote access error breaks both ends").isEqualTo(QueuePair.State.ERROR);
    }

    @Test
    void oneByteAfterTheRegionIsRefusedAndTouchesNothing() {
        assertThat(write(target.address() + TARGET - 15, 16, lb.key(remote))).isEqualTo(WcStatus.REM_ACCESS_ERR);
        assertTargetUntouched();
    }

    @Test
    void readPastTheEndIsRefused() {
        assertThat(read(target.address() + TARGET - 8, 9, lb.key(remote))).isEqualTo(WcStatus.REM_ACCESS_ERR);
        assertThat(lb.memA.get(ValueLayout.JAVA_LONG, 0)).isEqualTo(0x5A5A5A5A5A5A5A5AL);
    }

    @Test
    void wrongRkeyIsRefused() {
        assertThat(write(target.address(), 16, lb.key(remote) ^ 0x100)).isEqualTo(WcStatus.REM_ACCESS_ERR);
        assertTargetUntouched();
    }

    @Test
    void theLkeyIsNotAnRkeyOfAnotherDevice() {
        assertThat(write(target.address(), 16, lb.key(local))).isEqualTo(WcStatus.REM_ACCESS_ERR);
        assertTargetUntouched();
    }

    @Test
    void staleRkeyAfterDeregistrationIsRefused() {
        int rkey = lb.key(remote);
        remote.close();
        MemoryRegion again = lb.pdB.register(target, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        assertThat(again.rkey()).isNotEqualTo(rkey);
        assertThat(write(target.address(), 16, rkey)).isEqualTo(WcStatus.REM_ACCESS_ERR);
        assertTargetUntouched();
    }

    @Test
    void writeWithoutRemoteWriteIsRefused() {
        MemoryRegion readOnly = lb.pdB.register(lb.memB.asSlice(TARGET * 2L, 4096), Access.REMOTE_READ);
        assertThat(write(readOnly.address(), 8, lb.key(readOnly))).isEqualTo(WcStatus.REM_ACCESS_ERR);
        assertTargetUntouched();
    }

    @Test
    void readWithoutRemoteReadIsRefused() {
        MemoryRegion writeOnly = lb.pdB.register(lb.memB.asSlice(TARGET * 3L, 4096), Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        assertThat(read(writeOnly.address(), 8, lb.key(writeOnly))).isEqualTo(WcStatus.REM_ACCESS_ERR);
        assertThat(lb.memA.get(ValueLayout.JAVA_LONG, 0)).as("nothing read").isEqualTo(0x5A5A5A5A5A5A5A5AL);
    }

    @Test
    void readIntoMemoryWithoutLocalWriteIsALocalProtectionError() {
        MemoryRegion noWrite = lb.pdA.register(lb.memA.asSlice(0, 4096), Access.REMOTE_READ);
        wr.reset().opcode(Opcode.RDMA_READ).addSge(lb.memA.address(), 64, noWrite.lkey()).remote(target.address(), lb.key(remote));
        lb.qpA.postSend(wr);
        assertThat(lb.one(lb.cqA).status()).isEqualTo(WcStatus.LOC_PROT_ERR);
        assertThat(lb.qpB.state()).as("a local error leaves the peer alone").isEqualTo(QueuePair.State.RTS);
    }

    @Test
    void lkeyOfAnotherPdIsALocalProtectionError() {
        ProtectionDomain other = lb.devA.allocPd();
        MemoryRegion foreign = other.register(lb.memA.asSlice(0, 4096), Access.LOCAL_WRITE);
        wr.reset().opcode(Opcode.RDMA_WRITE).addSge(lb.memA.address(), 64, foreign.lkey()).remote(target.address(), lb.key(remote));
        lb.qpA.postSend(wr);
        assertThat(lb.one(lb.cqA).status()).isEqualTo(WcStatus.LOC_PROT_ERR);
        assertTargetUntouched();
        foreign.close();
        other.close();
    }

    @Test
    void sgeOutsideItsLocalRegionIsALocalProtectionError() {
        MemoryRegion small = lb.pdA.register(lb.memA.asSlice(0, 4096), Access.LOCAL_WRITE);
        wr.reset().opcode(Opcode.RDMA_WRITE).addSge(lb.memA.address() + 4090, 7, small.lkey()).remote(target.address(), lb.key(remote));
        lb.qpA.postSend(wr);
        assertThat(lb.one(lb.cqA).status()).isEqualTo(WcStatus.LOC_PROT_ERR);
        assertTargetUntouched();
    }

    @Test
    void bumpedFastRegKeyRetiresTheOldRkey() {
        DmaMapping map = lb.devB.dmaMap(lb.memB.asSlice(TARGET * 4L, 4 * 4096));
        MemoryRegion fr = lb.pdB.allocMr(4);
        ScatterList sg = new ScatterList().add(map.address(), 2 * 4096L);
        assertThat(fr.mapSg(sg, 1, 0, 4096)).isEqualTo(1);
        WorkRequest reg = new WorkRequest(1).opcode(Opcode.REG_MR).regMr(fr, fr.rkey(),
                Access.mask(Access.LOCAL_WRITE, Access.REMOTE_WRITE));
        lb.qpB.postSend(reg);
        assertThat(lb.one(lb.cqB).status()).isEqualTo(WcStatus.SUCCESS);
        int oldKey = fr.rkey();
        int oldHandle = lb.key(fr); // what the peer imported for this registration
        assertThat(write(map.address(), 16, oldHandle)).isEqualTo(WcStatus.SUCCESS);

        // re-register under the next generation: the old rkey stops working
        reg.reset().regMr(fr, MemoryRegion.incRkey(oldKey), Access.mask(Access.LOCAL_WRITE, Access.REMOTE_WRITE));
        lb.qpB.postSend(reg);
        assertThat(lb.one(lb.cqB).status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(fr.rkey()).isEqualTo(MemoryRegion.incRkey(oldKey));
        snapshot.copyFrom(lb.memB);
        assertThat(write(map.address(), 16, oldHandle)).isEqualTo(WcStatus.REM_ACCESS_ERR);
        assertTargetUntouched();
        fr.close();
        map.close();
    }

    @Test
    void badSgesAreRefusedAtPostAndNothingIsPosted() {
        wr.reset().opcode(Opcode.RDMA_WRITE).addSge(lb.memA.address(), -1, local.lkey()).remote(target.address(), lb.key(remote));
        assertRdma(() -> lb.qpA.postSend(wr), Errno.EINVAL, "negative length or wraps", "bad WR index 0");
        wr.reset().opcode(Opcode.RDMA_WRITE).addSge(-8L, 16, local.lkey()).remote(target.address(), lb.key(remote));
        assertRdma(() -> lb.qpA.postSend(wr), Errno.EINVAL, "negative length or wraps");
        wr.reset().opcode(Opcode.RDMA_WRITE).addSge(lb.memA.address(), 8, local.lkey()).remote(-4L, lb.key(remote));
        assertRdma(() -> lb.qpA.postSend(wr), Errno.EINVAL, "wraps the address space");
        WorkRequest big = new WorkRequest(5);
        for (int i = 0; i < 5; i++) {
            big.addSge(lb.memA.address(), 8, local.lkey());
        }
        big.opcode(Opcode.RDMA_WRITE).remote(target.address(), lb.key(remote));
        assertRdma(() -> lb.qpA.postSend(big), Errno.EINVAL, "5 SGEs exceed maxSendSge 4");
        wr.reset().opcode(Opcode.RECV);
        assertRdma(() -> lb.qpA.postSend(wr), Errno.EINVAL, "cannot be posted to a send queue");
        wr.reset().opcode(Opcode.RDMA_READ_WITH_INV).addSge(lb.memA.address(), 8, local.lkey());
        assertRdma(() -> lb.qpA.postSend(wr), Errno.EOPNOTSUPP, "iWARP");
        assertThat(lb.qpA.outstandingSends()).isZero();
        assertThat(lb.poll(lb.cqA)).isZero();
        assertTargetUntouched();
    }

    @Test
    void postingToADestroyedQpIsEbadf() {
        QueuePair qp = lb.qpA;
        int key = lb.key(remote);
        lb.idA.destroyQp();
        wr.reset().opcode(Opcode.RDMA_WRITE).addSge(lb.memA.address(), 8, local.lkey()).remote(target.address(), key);
        assertRdma(() -> qp.postSend(wr), Errno.EBADF, "after it was destroyed");
        assertRdma(() -> qp.postRecv(wr), Errno.EBADF);
        assertThat(lb.qpB.state()).as("the peer lost its connection").isEqualTo(QueuePair.State.ERROR);
        assertTargetUntouched();
    }

    @Test
    void memoryWhoseScopeEndedIsUnreachableNotACrash() {
        Arena gone = Arena.ofShared();
        MemorySegment seg = gone.allocate(4096);
        MemoryRegion mr = lb.pdB.register(seg, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        long address = seg.address();
        gone.close();
        assertThat(write(address, 64, lb.key(mr))).isEqualTo(WcStatus.REM_ACCESS_ERR);
        mr.close();
    }
}
