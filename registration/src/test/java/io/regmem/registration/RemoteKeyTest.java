package io.regmem.registration;

import static io.regmem.registration.ObjectModelTest.assertRdma;
import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.BufferPool;
import io.regmem.core.Errno;
import io.regmem.core.PooledBuffer;
import io.regmem.core.ScatterList;
import io.regmem.registration.testkit.Loopback;
import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.Providers;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The provider-neutral remote key: a region exports it as bytes, the peer's QP imports them into the
 * handle its work requests carry. Runs on every provider; the soft byte format is checked soft-only.
 */
@ExtendWith(NoLeaks.class)
class RemoteKeyTest {
    private final Loopback lb = new Loopback();
    private final WorkRequest wr = new WorkRequest(1);

    @AfterEach
    void tearDown() {
        lb.close();
    }

    private WcStatus write(MemoryRegion local, long remoteAddress, int handle) {
        lb.memA.set(ValueLayout.JAVA_LONG, 0, 0x1122_3344_5566_7788L);
        wr.reset().opcode(Opcode.RDMA_WRITE).addSge(lb.memA.address(), 8, local.lkey()).remote(remoteAddress, handle);
        lb.qpA.postSend(wr);
        return lb.one(lb.cqA).status();
    }

    /**
     * A fast-reg MR's exported key is its 32-bit rkey as 4 bytes, big-endian (network order), on soft
     * and on ucx alike, so that a peer of either provider, or an RPC header written by hand, reads the
     * same key. (The test-only delegate provider carries keys of a format of its own.)
     */
    @Test
    void aFastRegKeyExportsAsFourBigEndianBytesOnEveryProvider() {
        org.junit.jupiter.api.Assumptions.assumeFalse(Providers.NAME.equals("delegate"), "delegate's keys are its own format");
        MemoryRegion mr = lb.pdB.allocMr(4);
        int key = MemoryRegion.incRkey(mr.rkey());
        java.lang.foreign.MemorySegment four = lb.arena.allocate(4);
        assertThat(mr.exportedKeySize()).isEqualTo(4);
        mr.exportRemoteKey(key, four);
        assertThat(four.get(ValueLayout.JAVA_INT_UNALIGNED.withOrder(java.nio.ByteOrder.BIG_ENDIAN), 0)).isEqualTo(key);
        assertThat(four.get(ValueLayout.JAVA_BYTE, 0)).isEqualTo((byte) (key >>> 24));
        mr.close();
    }

    @Test
    void anImportedKeyReachesTheRegionAndEveryFormOfExportAgrees() {
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        MemoryRegion remote = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        byte[] exported = remote.exportRemoteKey();
        assertThat(exported).hasSize(remote.exportedKeySize());
        byte[] viaSegment = new byte[exported.length + 3];
        assertThat(remote.exportRemoteKey(MemorySegment.ofArray(viaSegment))).isEqualTo(exported.length);
        assertThat(java.util.Arrays.copyOf(viaSegment, exported.length)).isEqualTo(exported);
        int handle = lb.qpA.importRemoteKey(exported);
        assertThat(lb.qpA.importRemoteKey(MemorySegment.ofArray(exported))).as("importing is deterministic").isEqualTo(handle);
        assertThat(write(local, lb.memB.address() + 64, handle)).isEqualTo(WcStatus.SUCCESS);
        assertThat(lb.memB.get(ValueLayout.JAVA_LONG, 64)).isEqualTo(0x1122_3344_5566_7788L);
        local.close();
        remote.close();
    }

    @Test
    void badInputIsRefusedAndChangesNothing() {
        MemoryRegion remote = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        assertRdma(() -> lb.qpA.importRemoteKey(new byte[3]), Errno.EINVAL);
        assertRdma(() -> lb.qpA.importRemoteKey(new byte[0]), Errno.EINVAL);
        assertRdma(() -> remote.exportRemoteKey(MemorySegment.ofArray(new byte[remote.exportedKeySize() - 1])),
                Errno.EINVAL, "needs");
        assertRdma(() -> remote.exportRemoteKey(remote.rkey() ^ 0x100, MemorySegment.ofArray(new byte[64])),
                Errno.EINVAL, "not a key of this region");
        assertRdma(() -> remote.exportRemoteKey(MemoryRegion.incRkey(remote.rkey()), MemorySegment.ofArray(new byte[64])),
                Errno.EINVAL, "only a fast-reg MR");
        remote.close();
        assertRdma(remote::exportRemoteKey, Errno.EBADF);
        assertRdma(remote::exportedKeySize, Errno.EBADF);
        QueuePair qp = lb.qpA;
        byte[] any = lb.pdB.register(lb.memB, Access.REMOTE_READ).exportRemoteKey();
        lb.idA.destroyQp();
        assertRdma(() -> qp.importRemoteKey(any), Errno.EBADF);
    }

    @Test
    void aKeyImportedBeforeDeregistrationStopsWorking() {
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        MemoryRegion remote = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        int handle = lb.key(remote);
        remote.close();
        assertThat(write(local, lb.memB.address(), handle)).isEqualTo(WcStatus.REM_ACCESS_ERR);
        assertThat(lb.memB.get(ValueLayout.JAVA_LONG, 0)).isZero();
        local.close();
    }

    @Test
    void aFastRegKeyIsExportedForTheGenerationItsRegMrGives() {
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        DmaMapping map = lb.devB.dmaMap(lb.memB.asSlice(0, 8192));
        MemoryRegion fr = lb.pdB.allocMr(2);
        assertThat(fr.mapSg(new ScatterList().add(map.address(), 8192), 1, 0, 4096)).isEqualTo(1);
        int next = MemoryRegion.incRkey(fr.rkey());
        byte[] wire = new byte[64];
        int n = fr.exportRemoteKey(next, MemorySegment.ofArray(wire)); // travels with the registration
        lb.qpB.postSend(new WorkRequest(1).regMr(fr, next, Access.mask(Access.LOCAL_WRITE, Access.REMOTE_WRITE)));
        assertThat(lb.one(lb.cqB).status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(java.util.Arrays.copyOf(wire, n)).isEqualTo(fr.exportRemoteKey());
        int handle = lb.qpA.importRemoteKey(MemorySegment.ofArray(wire).asSlice(0, n));
        assertThat(write(local, map.address() + 8, handle)).isEqualTo(WcStatus.SUCCESS);
        assertThat(map.segment().get(ValueLayout.JAVA_LONG, 8)).isEqualTo(0x1122_3344_5566_7788L);
        fr.close();
        map.close();
        local.close();
    }

    @Test
    void windowsAndPoolChunksExportTheirKeys() {
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        MemoryRegion mr = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.MW_BIND);
        MemoryWindow mw = lb.pdB.allocMw();
        assertRdma(mw::exportRemoteKey, Errno.EINVAL, "unbound");
        mw.bind(mr, lb.memB.address() + 4096, 4096, Access.REMOTE_WRITE);
        assertThat(write(local, lb.memB.address() + 4096, lb.qpA.importRemoteKey(mw.exportRemoteKey())))
                .isEqualTo(WcStatus.SUCCESS);
        mw.close();
        mr.close();
        try (BufferPool pool = BufferPool.builder().name("keys").build();
             PoolRegistration reg = lb.pdB.register(pool, Access.LOCAL_WRITE, Access.REMOTE_WRITE)) {
            PooledBuffer target = pool.allocate(64);
            int handle = lb.qpA.importRemoteKey(reg.exportRemoteKey(target));
            assertThat(write(local, target.address(), handle)).isEqualTo(WcStatus.SUCCESS);
            assertThat(target.segment().get(ValueLayout.JAVA_LONG, 0)).isEqualTo(0x1122_3344_5566_7788L);
            target.close();
        }
        local.close();
    }

    @Test
    @Tag("soft-only")
    void onSoftTheExportedFormIsTheRkeyBigEndianAndImportGivesItBack() {
        try (Arena arena = Arena.ofShared(); RdmaDevice soft = RdmaDevice.open("soft")) {
            ProtectionDomain pd = soft.allocPd();
            MemoryRegion mr = pd.register(arena.allocate(4096), Access.LOCAL_WRITE, Access.REMOTE_READ);
            byte[] k = mr.exportRemoteKey();
            assertThat(k).hasSize(4);
            assertThat(MemorySegment.ofArray(k).get(ValueLayout.JAVA_INT_UNALIGNED.withOrder(java.nio.ByteOrder.BIG_ENDIAN), 0))
                    .isEqualTo(mr.rkey());
            mr.close();
            pd.close();
        }
        if (Providers.NAME.equals("soft")) {
            MemoryRegion remote = lb.pdB.register(lb.memB, Access.REMOTE_READ);
            assertThat(lb.key(remote)).isEqualTo(remote.rkey());
            remote.close();
        }
    }
}
