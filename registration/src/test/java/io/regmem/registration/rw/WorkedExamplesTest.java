package io.regmem.registration.rw;

import io.regmem.registration.testkit.Providers;

import static io.regmem.registration.rw.RwFixture.PAGE;
import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.ScatterList;
import io.regmem.registration.DmaDirection;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.Opcode;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.WorkRequest;
import io.regmem.registration.testkit.NoLeaks;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The worked examples A-G of kernel-semantics.md section 2, each on a soft device configured with
 * the example's limits, checked WR by WR and then posted: the bytes land where the example says.
 */
@ExtendWith(NoLeaks.class)
class WorkedExamplesTest {
    private static final long ENTRY = 4096;

    @Test
    void exampleA_seventeenEntriesWriteWithFourSgesMakesFiveWrs() {
        try (RwFixture f = new RwFixture(Map.of(), 4, 0)) {
            ScatterList sg = f.pages(17, ENTRY);
            f.fillLocal(sg, 1);
            RwContext ctx = new RwContext();
            int n = ctx.init(f.qp, 1, sg, 17, 0, f.remoteAddr(), f.rkey(), DmaDirection.TO_DEVICE);
            assertThat(n).isEqualTo(5);
            assertThat(ctx.variant()).isEqualTo(RwContext.Variant.MULTI_SGE);
            int[] sges = {4, 4, 4, 4, 1};
            long[] remoteOffsets = {0, 16384, 32768, 49152, 65536};
            long total = 0;
            for (int i = 0; i < 5; i++) {
                WorkRequest wr = ctx.wr(i);
                assertThat(wr.opcode()).isEqualTo(Opcode.RDMA_WRITE);
                assertThat(wr.numSge()).isEqualTo(sges[i]);
                assertThat(wr.remoteAddress() - f.remoteAddr()).isEqualTo(remoteOffsets[i]);
                assertThat(wr.rkey()).isEqualTo(f.rkey());
                for (int s = 0; s < wr.numSge(); s++) {
                    assertThat(wr.sgeLength(s)).isEqualTo(ENTRY);
                    assertThat(wr.sgeLkey(s)).isEqualTo(f.pdA.localDmaLkey());
                }
                total += wr.totalLength();
            }
            assertThat(total).isEqualTo(69632);
            WorkRequest first = ctx.wrs(77);
            assertThat(first).isSameAs(ctx.wr(0));
            for (int i = 0; i < 5; i++) {
                assertThat(ctx.wr(i).signaled()).as("WR %d signaled", i).isEqualTo(i == 4);
            }
            f.qp.postSend(first);
            f.expectCompletion(77);
            f.assertRemoteHolds(1, 0, 0, 69632);
            ctx.destroy(f.qp, 1, sg, 17, DmaDirection.TO_DEVICE);
        }
    }

    @Test
    void exampleB_anOffsetOf5000SkipsEntryZeroAndShiftsTheFirstSge() {
        try (RwFixture f = new RwFixture(Map.of(), 4, 0)) {
            ScatterList sg = f.pages(17, ENTRY);
            f.fillLocal(sg, 2);
            RwContext ctx = new RwContext();
            int n = ctx.init(f.qp, 1, sg, 17, 5000, f.remoteAddr(), f.rkey(), DmaDirection.TO_DEVICE);
            assertThat(n).isEqualTo(4);
            long[] remoteOffsets = {0, 15480, 31864, 48248};
            long total = 0;
            for (int i = 0; i < 4; i++) {
                assertThat(ctx.wr(i).numSge()).isEqualTo(4);
                assertThat(ctx.wr(i).remoteAddress() - f.remoteAddr()).isEqualTo(remoteOffsets[i]);
                total += ctx.wr(i).totalLength();
            }
            assertThat(ctx.wr(0).sgeLength(0)).isEqualTo(3192);
            assertThat(ctx.wr(0).sgeAddress(0)).as("offset 904 into entry 1").isEqualTo(sg.address(1) + 904);
            assertThat(total).isEqualTo(64632);
            f.postAndDestroy(ctx, sg, DmaDirection.TO_DEVICE);
            f.assertRemoteHolds(2, 5000, 0, 64632);
        }
    }

    @Test
    void exampleC_iwarpReadWithEightPageMrsUsesThreeSelfInvalidatingMrs() {
        try (RwFixture f = new RwFixture(Map.of("iWarp", "true", "maxFastRegPageListLen", "8"), 4, 3)) {
            ScatterList sg = f.pages(17, ENTRY);
            f.fillRemote(3, 0, 17 * ENTRY);
            RwContext ctx = new RwContext();
            for (int round = 0; round < 2; round++) {
                int n = ctx.init(f.qp, 1, sg, 17, 0, f.remoteAddr(), f.rkey(), DmaDirection.FROM_DEVICE);
                assertThat(n).as("round %d: REG + READ_WITH_INV for each of 3 MRs, no LOCAL_INV", round).isEqualTo(6);
                assertThat(ctx.variant()).isEqualTo(RwContext.Variant.MR);
                assertThat(ctx.mrCount()).isEqualTo(3);
                long[] lengths = {8 * ENTRY, 8 * ENTRY, ENTRY};
                long remote = 0;
                for (int m = 0; m < 3; m++) {
                    WorkRequest reg = ctx.wr(2 * m);
                    WorkRequest op = ctx.wr(2 * m + 1);
                    assertThat(reg.opcode()).isEqualTo(Opcode.REG_MR);
                    assertThat(op.opcode()).isEqualTo(Opcode.RDMA_READ_WITH_INV);
                    assertThat(op.numSge()).isEqualTo(1);
                    assertThat(op.sgeLength(0)).isEqualTo(lengths[m]);
                    assertThat(op.remoteAddress() - f.remoteAddr()).isEqualTo(remote);
                    remote += lengths[m];
                }
                f.local.fill((byte) 0);
                f.postAndDestroy(ctx, sg, DmaDirection.FROM_DEVICE);
                f.assertLocalHolds(sg, 0, 3);
                for (int slot = 0; slot < 3; slot++) {
                    assertThat(f.qp.rdmaMrs().needInval(slot)).as("READ_WITH_INV invalidated MR %d", slot).isFalse();
                    assertThat(f.qp.rdmaMrs().mr(slot).isValid()).isFalse();
                }
            }
        }
    }

    @Test
    void exampleD_forcedMrWriteUsesOneMrAndNeedsALocalInvOnItsNextUse() {
        try (RwFixture f = new RwFixture(Map.of(RdmaDevice.RW_FORCE_MR, "true"), 4, 1)) {
            ScatterList sg = f.pages(17, ENTRY);
            RwContext ctx = new RwContext();
            assertThat(ctx.init(f.qp, 1, sg, 17, 0, f.remoteAddr(), f.rkey(), DmaDirection.TO_DEVICE))
                    .as("fresh MR: REG + WRITE").isEqualTo(2);
            assertThat(ctx.wr(0).opcode()).isEqualTo(Opcode.REG_MR);
            assertThat(ctx.wr(1).opcode()).isEqualTo(Opcode.RDMA_WRITE);
            assertThat(ctx.wr(1).sgeLength(0)).isEqualTo(17 * ENTRY);
            f.fillLocal(sg, 4);
            int keyBefore = f.qp.rdmaMrs().key(0);
            f.postAndDestroy(ctx, sg, DmaDirection.TO_DEVICE);
            f.assertRemoteHolds(4, 0, 0, 17 * ENTRY);
            assertThat(f.qp.rdmaMrs().needInval(0)).isTrue();
            assertThat(f.qp.rdmaMrs().key(0)).isEqualTo(MemoryRegion.incRkey(keyBefore));

            assertThat(ctx.init(f.qp, 1, sg, 17, 0, f.remoteAddr(), f.rkey(), DmaDirection.TO_DEVICE))
                    .as("the MR was left valid: LOCAL_INV + REG + WRITE").isEqualTo(3);
            assertThat(ctx.wr(0).opcode()).isEqualTo(Opcode.LOCAL_INV);
            assertThat(ctx.wr(0).invalidateRkey()).isEqualTo(f.qp.rdmaMrs().key(0));
            f.fillLocal(sg, 5);
            f.postAndDestroy(ctx, sg, DmaDirection.TO_DEVICE);
            f.assertRemoteHolds(5, 0, 0, 17 * ENTRY);
        }
    }

    @Test
    void exampleE_aLongReadUsesAnMrAndFallsBackToSgesWhenThePoolIsEmpty() {
        try (RwFixture f = new RwFixture(Map.of("maxSglRd", "8"), 16, 1)) {
            assertThat(f.qp.maxReadSge()).as("read limit min(30, 16)").isEqualTo(16);
            ScatterList sg = f.pages(17, ENTRY);
            f.fillRemote(6, 0, 17 * ENTRY);
            RwContext withMr = new RwContext();
            assertThat(withMr.init(f.qp, 1, sg, 17, 0, f.remoteAddr(), f.rkey(), DmaDirection.FROM_DEVICE))
                    .as("17 > maxSglRd: MR path, REG + READ").isEqualTo(2);
            assertThat(withMr.variant()).isEqualTo(RwContext.Variant.MR);
            assertThat(withMr.wr(1).opcode()).as("IB: plain READ").isEqualTo(Opcode.RDMA_READ);

            RwContext fallback = new RwContext();
            assertThat(fallback.init(f.qp, 1, sg, 17, 0, f.remoteAddr(), f.rkey(), DmaDirection.FROM_DEVICE))
                    .as("pool empty: ceil(17 / 16) plain READs").isEqualTo(2);
            assertThat(fallback.variant()).isEqualTo(RwContext.Variant.MULTI_SGE);
            assertThat(fallback.wr(0).numSge()).isEqualTo(16);
            assertThat(fallback.wr(1).numSge()).isEqualTo(1);

            f.postAndDestroy(withMr, sg, DmaDirection.FROM_DEVICE);
            f.assertLocalHolds(sg, 0, 6);
            f.local.fill((byte) 0);
            f.postAndDestroy(fallback, sg, DmaDirection.FROM_DEVICE);
            f.assertLocalHolds(sg, 0, 6);

            ScatterList eight = f.pages(8, ENTRY);
            RwContext small = new RwContext();
            assertThat(small.init(f.qp, 1, eight, 8, 0, f.remoteAddr(), f.rkey(), DmaDirection.FROM_DEVICE))
                    .as("8 entries, not above maxSglRd: no MR, one READ").isEqualTo(1);
            assertThat(small.variant()).isEqualTo(RwContext.Variant.MULTI_SGE);
            f.local.fill((byte) 0);
            f.postAndDestroy(small, eight, DmaDirection.FROM_DEVICE);
            f.assertLocalHolds(eight, 0, 6);
        }
    }

    @Test
    void exampleF_mrFactor() {
        try (RdmaDevice mrCapable = Providers.open(Map.of("maxSglRd", "8", "maxFastRegPageListLen", "512"));
             RdmaDevice plain = Providers.open(Map.of("maxSgeRd", "30"))) {
            assertThat(RdmaRw.mrFactor(mrCapable, 1, 256)).isEqualTo(1);
            assertThat(RdmaRw.mrFactor(mrCapable, 1, 257)).isEqualTo(2);
            assertThat(RdmaRw.mrFactor(plain, 1, 256)).isEqualTo(9);
        }
    }

    @Test
    void exampleG_maxSendWr() {
        try (RdmaDevice mrCapable = Providers.open(Map.of("iWarp", "true"));
             RdmaDevice plain = Providers.open()) {
            assertThat(RdmaRw.maxSendWr(plain, 1, 128, false)).isEqualTo(128);
            assertThat(RdmaRw.maxSendWr(mrCapable, 1, 128, false)).isEqualTo(384);
            assertThat(RdmaRw.maxSendWr(plain, 1, 128, true)).as("integrity").isEqualTo(384);
            assertThat(RdmaRw.maxSendWr(mrCapable, 1, 1L << 31, false)).isEqualTo(4294967295L);
        }
    }

    @Test
    void pageSizedEntriesInOneMrLandAtConsecutiveRemoteOffsets() {
        try (RwFixture f = new RwFixture(Map.of(RdmaDevice.RW_FORCE_MR, "true", "maxFastRegPageListLen", "4"), 4, 2)) {
            ScatterList sg = f.pages(6, PAGE);
            f.fillLocal(sg, 9);
            RwContext ctx = new RwContext();
            assertThat(ctx.init(f.qp, 1, sg, 6, 100, f.remoteAddr() + 64, f.rkey(), DmaDirection.TO_DEVICE))
                    .as("two MRs (4 + 2 pages)").isEqualTo(4);
            assertThat(ctx.wr(1).sgeLength(0)).isEqualTo(4 * PAGE - 100);
            assertThat(ctx.wr(3).remoteAddress()).isEqualTo(f.remoteAddr() + 64 + 4 * PAGE - 100);
            f.postAndDestroy(ctx, sg, DmaDirection.TO_DEVICE);
            f.assertRemoteHolds(9, 100, 64, 6 * PAGE - 100);
        }
    }
}
