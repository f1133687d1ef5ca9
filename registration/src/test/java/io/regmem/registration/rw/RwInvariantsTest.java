package io.regmem.registration.rw;

import io.regmem.registration.testkit.Providers;

import static io.regmem.registration.rw.RwFixture.PAGE;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.core.ScatterList;
import io.regmem.registration.DmaDirection;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.MrPool;
import io.regmem.registration.Opcode;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.WorkRequest;
import io.regmem.registration.testkit.NoLeaks;
import java.util.Map;
import org.assertj.core.api.ThrowableAssert.ThrowingCallable;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** Invariants 5-11 of kernel-semantics.md section 5, one test each. */
@ExtendWith(NoLeaks.class)
class RwInvariantsTest {

    static void assertErrno(ThrowingCallable call, Errno errno) {
        assertThatThrownBy(call).isInstanceOfSatisfying(RdmaException.class, e -> assertThat(e.errno()).isEqualTo(errno));
    }

    @Test
    void invariant5_aQpOwnsItsPoolMrsAndCannotBeDestroyedWhileContextsHoldThem() {
        try (RwFixture f = new RwFixture(Map.of(RdmaDevice.RW_FORCE_MR, "true"), 4, 3, true)) {
            assertThat(f.qp.rdmaMrs().size()).isEqualTo(3);
            assertThat(f.qp.sigMrs().size()).as("integrity: c signature MRs too").isEqualTo(3);
            ScatterList sg = f.pages(2, PAGE);
            RwContext a = new RwContext();
            RwContext b = new RwContext();
            a.init(f.qp, 1, sg, 2, 0, f.remoteAddr(), f.rkey(), DmaDirection.TO_DEVICE);
            b.init(f.qp, 1, sg, 2, 0, f.remoteAddr(), f.rkey(), DmaDirection.TO_DEVICE);
            assertThat(f.qp.rdmaMrs().used()).as("mrs_used = MRs held by live contexts").isEqualTo(2);
            assertThatThrownBy(f.idA::destroyQp).isInstanceOfSatisfying(RdmaException.class, e -> {
                assertThat(e.errno()).isEqualTo(Errno.EBUSY);
                assertThat(e.getMessage()).contains("2 pool MR(s)", "mrs_used");
            });
            assertThat(f.idA.qp()).as("the QP survives the refusal").isSameAs(f.qp);
            a.destroy(f.qp, 1, sg, 2, DmaDirection.TO_DEVICE);
            b.destroy(f.qp, 1, sg, 2, DmaDirection.TO_DEVICE);
            assertThat(f.qp.rdmaMrs().used()).isZero();
        }
        try (RwFixture plain = new RwFixture(Map.of(), 4, 5)) {
            assertThat(plain.qp.rdmaMrs().size()).isEqualTo(5);
            assertThat(plain.qp.sigMrs().size()).isZero();
            assertThat(plain.pdA.useCount()).as("QP + its 5 MRs").isEqualTo(6);
        }
    }

    @Test
    void invariant6_theReturnValueIsTheChainLengthWithOneSignaledWrOrNoneBeforeAChainWr() {
        try (RwFixture f = new RwFixture(Map.of(RdmaDevice.RW_FORCE_MR, "true", "maxFastRegPageListLen", "2"), 2, 4)) {
            ScatterList sg = f.pages(5, PAGE);
            f.fillLocal(sg, 11);
            RwContext ctx = new RwContext();
            int n = ctx.init(f.qp, 1, sg, 5, 0, f.remoteAddr(), f.rkey(), DmaDirection.TO_DEVICE);
            WorkRequest first = ctx.wrs(5);
            int count = 0;
            int signaled = 0;
            for (WorkRequest w = first; w != null; w = w.next()) {
                count++;
                signaled += w.signaled() ? 1 : 0;
            }
            assertThat(count).isEqualTo(n).isEqualTo(ctx.wrCount());
            assertThat(signaled).isEqualTo(1);
            f.qp.postSend(first);
            f.expectCompletion(5);
            ctx.destroy(f.qp, 1, sg, 5, DmaDirection.TO_DEVICE);

            // With a chain WR (a SEND telling the peer the data is there): none of ours is signaled.
            WorkRequest recv = new WorkRequest(1).wrId(900).addSge(f.remote.address() + (1 << 20), 64, f.remoteMr.lkey());
            f.qpB.postRecv(recv);
            WorkRequest send = new WorkRequest(1).wrId(901).opcode(Opcode.SEND).signaled(true)
                    .addSge(sg.address(0), 64, f.pdA.localDmaLkey());
            n = ctx.init(f.qp, 1, sg, 5, 0, f.remoteAddr(), f.rkey(), DmaDirection.TO_DEVICE);
            first = ctx.wrs(send);
            count = 0;
            signaled = 0;
            WorkRequest last = null;
            for (WorkRequest w = first; w != send; w = w.next()) {
                count++;
                signaled += w.signaled() ? 1 : 0;
                last = w;
            }
            assertThat(count).isEqualTo(n);
            assertThat(signaled).isZero();
            assertThat(last.next()).isSameAs(send);
            f.qp.postSend(first);
            f.expectCompletion(901);
            assertThat(f.cqB.poll(f.wcs)).isEqualTo(1);
            assertThat(f.wcs[0].wrId()).isEqualTo(900);
            ctx.destroy(f.qp, 1, sg, 5, DmaDirection.TO_DEVICE);
            assertThat(send.next()).isNull();
            f.assertRemoteHolds(11, 0, 0, 5 * PAGE);
        }
    }

    @Test
    void invariant7_multiSgeCoversTheBytesInOrderWithTheLocalDmaKey() {
        try (RwFixture f = new RwFixture(Map.of(), 3, 0)) {
            ScatterList sg = new ScatterList();
            long[] lengths = {100, 5000, 1, 4096, 333, 7000, 12};
            long total = 0;
            for (int i = 0; i < lengths.length; i++) {
                sg.add(f.local.address() + 3L * i * PAGE + 17 * i, lengths[i]);
                total += lengths[i];
            }
            long offset = 250;
            RwContext ctx = new RwContext();
            int n = ctx.init(f.qp, 1, sg, lengths.length, offset, f.remoteAddr() + 8, f.rkey(), DmaDirection.TO_DEVICE);
            long sum = 0;
            for (int i = 0; i < n; i++) {
                WorkRequest wr = ctx.wr(i);
                assertThat(wr.numSge()).isLessThanOrEqualTo(3);
                assertThat(wr.remoteAddress()).isEqualTo(f.remoteAddr() + 8 + sum);
                for (int s = 0; s < wr.numSge(); s++) {
                    assertThat(wr.sgeLkey(s)).isEqualTo(f.pdA.localDmaLkey());
                }
                sum += wr.totalLength();
            }
            assertThat(sum).isEqualTo(total - offset);
            assertThat(ctx.wr(0).sgeAddress(0)).as("entry 0 (100 B) skipped, 150 into entry 1").isEqualTo(sg.address(1) + 150);
            f.fillLocal(sg, 12);
            f.postAndDestroy(ctx, sg, DmaDirection.TO_DEVICE);
            f.assertRemoteHolds(12, offset, 8, total - offset);
        }
    }

    @Test
    void invariant8_directionPicksTheOperationAndDestroyMustRepeatInitsArguments() {
        try (RwFixture f = new RwFixture(Map.of(RdmaDevice.RW_FORCE_MR, "true"), 4, 1)) {
            ScatterList sg = f.pages(3, PAGE);
            ScatterList same = f.pages(3, PAGE);
            RwContext ctx = new RwContext();
            ctx.init(f.qp, 1, sg, 3, 0, f.remoteAddr(), f.rkey(), DmaDirection.FROM_DEVICE);
            assertThat(ctx.wr(1).opcode()).isEqualTo(Opcode.RDMA_READ);
            assertErrno(() -> ctx.destroy(f.qp, 1, sg, 3, DmaDirection.TO_DEVICE), Errno.EINVAL);
            assertErrno(() -> ctx.destroy(f.qp, 1, sg, 2, DmaDirection.FROM_DEVICE), Errno.EINVAL);
            assertErrno(() -> ctx.destroy(f.qp, 1, same, 3, DmaDirection.FROM_DEVICE), Errno.EINVAL);
            assertErrno(() -> ctx.destroy(f.qpB, 1, sg, 3, DmaDirection.FROM_DEVICE), Errno.EINVAL);
            assertErrno(() -> ctx.destroyBvec(f.qp, 1, null, 3, DmaDirection.FROM_DEVICE), Errno.EINVAL);
            assertThat(f.qp.rdmaMrs().used()).as("refused destroys changed nothing").isEqualTo(1);
            assertThat(ctx.isInitialized()).isTrue();
            ctx.destroy(f.qp, 1, sg, 3, DmaDirection.FROM_DEVICE);
            ctx.init(f.qp, 1, sg, 3, 0, f.remoteAddr(), f.rkey(), DmaDirection.TO_DEVICE);
            assertThat(ctx.wr(1).opcode()).isEqualTo(Opcode.RDMA_WRITE);
            ctx.destroy(f.qp, 1, sg, 3, DmaDirection.TO_DEVICE);
        }
        try (RwFixture iw = new RwFixture(Map.of("iWarp", "true"), 4, 1)) {
            ScatterList sg = iw.pages(2, PAGE);
            RwContext ctx = new RwContext();
            ctx.init(iw.qp, 1, sg, 2, 0, iw.remoteAddr(), iw.rkey(), DmaDirection.FROM_DEVICE);
            assertThat(ctx.wr(1).opcode()).isEqualTo(Opcode.RDMA_READ_WITH_INV);
            ctx.destroy(iw.qp, 1, sg, 2, DmaDirection.FROM_DEVICE);
        }
    }

    @Test
    void invariant9_eachPostAdvancesTheKeyByteByOneAndDecidesTheNextLocalInv() {
        try (RwFixture f = new RwFixture(Map.of(RdmaDevice.RW_FORCE_MR, "true"), 4, 1)) {
            ScatterList sg = f.pages(2, PAGE);
            MrPool pool = f.qp.rdmaMrs();
            RwContext ctx = new RwContext();
            int key = pool.key(0);
            for (int round = 0; round < 300; round++) { // past 256: the byte wraps, the upper bits stay
                int n = ctx.init(f.qp, 1, sg, 2, 0, f.remoteAddr(), f.rkey(), DmaDirection.TO_DEVICE);
                assertThat(ctx.wr(0).opcode() == Opcode.LOCAL_INV).isEqualTo(round > 0);
                assertThat(n).isEqualTo(round > 0 ? 3 : 2);
                assertThat(pool.key(0)).as("init does not touch the key").isEqualTo(key);
                f.postAndDestroy(ctx, sg, DmaDirection.TO_DEVICE);
                int next = pool.key(0);
                assertThat(next >>> 8).isEqualTo(key >>> 8);
                assertThat(next & 0xFF).isEqualTo((key + 1) & 0xFF);
                assertThat(pool.mr(0).lkey()).as("the REG_MR executed with the new key").isEqualTo(next);
                assertThat(pool.needInval(0)).as("WRITE leaves the MR valid").isTrue();
                key = next;
            }
        }
        try (RwFixture iw = new RwFixture(Map.of("iWarp", "true"), 4, 1)) {
            ScatterList sg = iw.pages(2, PAGE);
            RwContext ctx = new RwContext();
            for (int round = 0; round < 3; round++) {
                assertThat(ctx.init(iw.qp, 1, sg, 2, 0, iw.remoteAddr(), iw.rkey(), DmaDirection.FROM_DEVICE))
                        .as("READ_WITH_INV invalidates: never a LOCAL_INV").isEqualTo(2);
                iw.postAndDestroy(ctx, sg, DmaDirection.FROM_DEVICE);
                assertThat(iw.qp.rdmaMrs().needInval(0)).isFalse();
            }
        }
    }

    @Test
    void invariant10_anEmptyPoolIsEagainAndFallsBackOnlyInTheMaxSglRdCase() {
        for (Map<String, String> opts : java.util.List.of(Map.of("iWarp", "true"), Map.of(RdmaDevice.RW_FORCE_MR, "true"))) {
            try (RwFixture f = new RwFixture(opts, 4, 1)) {
                ScatterList sg = f.pages(2, PAGE);
                RwContext holder = new RwContext();
                holder.init(f.qp, 1, sg, 2, 0, f.remoteAddr(), f.rkey(), DmaDirection.FROM_DEVICE);
                RwContext second = new RwContext();
                assertErrno(() -> second.init(f.qp, 1, sg, 2, 0, f.remoteAddr(), f.rkey(), DmaDirection.FROM_DEVICE),
                        Errno.EAGAIN);
                assertThat(second.isInitialized()).isFalse();
                assertThat(f.qp.rdmaMrs().used()).isEqualTo(1);
                holder.destroy(f.qp, 1, sg, 2, DmaDirection.FROM_DEVICE);
            }
        }
        try (RwFixture f = new RwFixture(Map.of("maxFastRegPageListLen", "2", RdmaDevice.RW_FORCE_MR, "true"), 4, 2)) {
            // A transfer needing three MRs from a pool of two: the two taken go back, EAGAIN.
            ScatterList sg = f.pages(5, PAGE);
            assertErrno(() -> new RwContext().init(f.qp, 1, sg, 5, 0, f.remoteAddr(), f.rkey(), DmaDirection.TO_DEVICE),
                    Errno.EAGAIN);
            assertThat(f.qp.rdmaMrs().used()).isZero();
        }
        try (RwFixture f = new RwFixture(Map.of("maxSglRd", "1"), 4, 0)) {
            ScatterList sg = f.pages(2, PAGE);
            RwContext ctx = new RwContext();
            assertThat(ctx.init(f.qp, 1, sg, 2, 0, f.remoteAddr(), f.rkey(), DmaDirection.FROM_DEVICE)).isEqualTo(1);
            assertThat(ctx.variant()).as("no pool at all: maxSglRd falls back").isEqualTo(RwContext.Variant.MULTI_SGE);
            ctx.destroy(f.qp, 1, sg, 2, DmaDirection.FROM_DEVICE);
        }
    }

    @Test
    void invariant11_sizingIsOneOrThreePerContextSaturatingAndMrFactorIsMonotone() {
        try (RdmaDevice plain = Providers.open(Map.of("maxSgeRd", "7"));
             RdmaDevice mr = Providers.open(Map.of("maxSglRd", "4", "maxFastRegPageListLen", "300"))) {
            for (long c : new long[] {0, 1, 2, 1000, 1L << 30, (1L << 32) - 1}) {
                assertThat(RdmaRw.maxSendWr(plain, 1, c, false)).isEqualTo(Math.min(c, RdmaRw.U32_MAX));
                assertThat(RdmaRw.maxSendWr(mr, 1, c, false)).isEqualTo(Math.min(3 * c, RdmaRw.U32_MAX));
            }
            assertErrno(() -> RdmaRw.maxSendWr(plain, 1, 1L << 32, false), Errno.EINVAL);
            assertErrno(() -> RdmaRw.maxSendWr(plain, 2, 1, false), Errno.EINVAL);
            for (RdmaDevice d : new RdmaDevice[] {plain, mr}) {
                int prev = 0;
                for (int pages = 0; pages <= 2000; pages++) {
                    int factor = RdmaRw.mrFactor(d, 1, pages);
                    assertThat(factor).isGreaterThanOrEqualTo(prev);
                    prev = factor;
                }
            }
            assertThat(RdmaRw.mrFactor(mr, 1, 257)).as("P = min(300, 256)").isEqualTo(2);
            assertThat(RdmaRw.mrFactor(plain, 1, 8)).isEqualTo(2);
            assertThat(RdmaRw.mrFactor(plain, 1, Integer.MAX_VALUE)).isEqualTo((Integer.MAX_VALUE + 6L) / 7);
        }
    }

    @Test
    void keyHelperKeepsTheUpperBits() {
        assertThat(MemoryRegion.incRkey(0x123456FF)).isEqualTo(0x12345600);
    }
}
