package io.regmem.registration;

import static io.regmem.registration.ObjectModelTest.assertRdma;
import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.Errno;
import io.regmem.registration.testkit.Loopback;
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * A failed work request moves no byte (invariant 18): multi-SGE RDMA WRITE, READ, SEND and
 * WRITE_WITH_IMM where each SGE position in turn is bad in each way a NIC checks (unknown, stale
 * and foreign-PD keys, a range one page past its region, missing LOCAL_WRITE where written,
 * memory whose arena was closed, local-DMA-key memory that is not mapped), and where the remote
 * side is bad in each way. After each, every byte of every buffer on both sides is compared with
 * its snapshot, and the status says which side failed. Memory that no device thread can reach (a
 * confined arena's) is refused when it is registered or mapped.
 */
@ExtendWith(NoLeaks.class)
class AllOrNothingTest {
    private static final int SGES = 3;
    private static final int PIECE = 4096;

    /** The ways one local SGE can be bad. */
    enum BadLocal {
        UNKNOWN_KEY, STALE_KEY, FOREIGN_PD, PAST_THE_REGION, NO_LOCAL_WRITE, DEAD_MEMORY, UNMAPPED_DMA
    }

    /** The ways the remote range can be bad. */
    enum BadRemote {
        UNKNOWN_KEY, STALE_KEY, FOREIGN_PD, PAST_THE_REGION, NO_RIGHT, DEAD_MEMORY
    }

    /** One connection and its memory, filled with distinct patterns and snapshotted. */
    private static final class Setup implements AutoCloseable {
        final Loopback lb = new Loopback();
        final Arena doomedA = Arena.ofShared();
        final Arena doomedB = Arena.ofShared();
        final Arena snapshots = Arena.ofShared();
        final List<MemorySegment[]> watched = new ArrayList<>(); // {live, snapshot}
        /** A's memory: SGE k covers [k * PIECE, (k + 1) * PIECE) of okA's region. */
        final MemoryRegion okA;
        final MemoryRegion okB;
        final MemorySegment deadA = doomedA.allocate(SGES * PIECE, 4096);
        final MemorySegment deadB = doomedB.allocate(SGES * PIECE, 4096);
        final MemoryRegion deadRegionA;
        final MemoryRegion deadRegionB;

        Setup() {
            okA = lb.pdA.register(lb.memA.asSlice(0, SGES * PIECE), Access.LOCAL_WRITE);
            okB = lb.pdB.register(lb.memB.asSlice(0, 4 * SGES * PIECE), Access.LOCAL_WRITE, Access.REMOTE_WRITE,
                    Access.REMOTE_READ);
            deadRegionA = lb.pdA.register(deadA, Access.LOCAL_WRITE);
            deadRegionB = lb.pdB.register(deadB, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ);
            fill(lb.memA, 0x11);
            fill(lb.memB, 0x77);
            watch(lb.memA);
            watch(lb.memB);
        }

        static void fill(MemorySegment s, int seed) {
            for (long i = 0; i < s.byteSize(); i += 8) {
                s.set(ValueLayout.JAVA_LONG, i, (seed * 0x0101010101010101L) ^ i);
            }
        }

        void watch(MemorySegment s) {
            MemorySegment copy = snapshots.allocate(s.byteSize());
            copy.copyFrom(s);
            watched.add(new MemorySegment[] {s, copy});
        }

        void assertEveryByteUnchanged() {
            for (MemorySegment[] w : watched) {
                assertThat(w[0].mismatch(w[1])).as("first changed byte of %s", w[0]).isEqualTo(-1);
            }
        }

        /** Adds SGE {@code k} of an A-side request: good, or bad in the given way. */
        void addLocalSge(WorkRequest wr, int k, BadLocal bad, boolean written, QueuePair qp, MemoryRegion ok) {
            ProtectionDomain pd = qp.pd();
            long addr = ok.address() + (long) k * PIECE;
            if (bad == null) {
                wr.addSge(addr, PIECE, ok.lkey());
                return;
            }
            switch (bad) {
                case UNKNOWN_KEY -> wr.addSge(addr, PIECE, ok.lkey() ^ 0x5A5A5A00);
                case STALE_KEY -> {
                    MemoryRegion gone = pd.register(lbMem(qp).asSlice((long) k * PIECE, PIECE), Access.LOCAL_WRITE);
                    int key = gone.lkey();
                    gone.close();
                    wr.addSge(addr, PIECE, key);
                }
                case FOREIGN_PD -> {
                    ProtectionDomain other = qp.device().allocPd();
                    MemoryRegion foreign = other.register(lbMem(qp).asSlice((long) k * PIECE, PIECE), Access.LOCAL_WRITE);
                    wr.addSge(addr, PIECE, foreign.lkey());
                }
                case PAST_THE_REGION -> wr.addSge(ok.address() + ok.length() - PIECE / 2, PIECE, ok.lkey());
                case NO_LOCAL_WRITE -> {
                    MemoryRegion readOnly = pd.register(lbMem(qp).asSlice((long) k * PIECE, PIECE));
                    wr.addSge(addr, PIECE, readOnly.lkey());
                }
                case DEAD_MEMORY -> {
                    MemoryRegion dead = qp == lb.qpA ? deadRegionA : deadRegionB;
                    wr.addSge(dead.address() + (long) k * PIECE, PIECE, dead.lkey());
                }
                case UNMAPPED_DMA -> wr.addSge(addr, PIECE, pd.localDmaLkey());
            }
            assertThat(written || bad != BadLocal.NO_LOCAL_WRITE).isTrue();
        }

        MemorySegment lbMem(QueuePair qp) {
            return qp == lb.qpA ? lb.memA : lb.memB;
        }

        /** The remote range of an A-side request, good or bad in the given way: {address, rkey}. */
        long[] remote(BadRemote bad, boolean write) {
            long addr = okB.address() + 2L * PIECE;
            if (bad == null) {
                return new long[] {addr, lb.key(okB)};
            }
            return switch (bad) {
                case UNKNOWN_KEY -> new long[] {addr, lb.key(okB) ^ 0x5A5A5A00};
                case STALE_KEY -> {
                    MemoryRegion gone = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ);
                    int key = lb.key(gone);
                    gone.close();
                    yield new long[] {addr, key};
                }
                case FOREIGN_PD -> {
                    MemoryRegion foreign = lb.devB.allocPd().register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_WRITE,
                            Access.REMOTE_READ);
                    yield new long[] {addr, lb.key(foreign)};
                }
                case PAST_THE_REGION -> new long[] {okB.address() + okB.length() - PIECE, lb.key(okB)};
                case NO_RIGHT -> {
                    MemoryRegion wrongRight = lb.pdB.register(lb.memB.asSlice(8L * SGES * PIECE, 4L * SGES * PIECE),
                            Access.LOCAL_WRITE, write ? Access.REMOTE_READ : Access.REMOTE_WRITE);
                    yield new long[] {wrongRight.address(), lb.key(wrongRight)};
                }
                case DEAD_MEMORY -> new long[] {deadRegionB.address(), lb.key(deadRegionB)};
            };
        }

        /** Kills the doomed arenas (their regions stay registered: the memory's owner freed it). */
        void killDoomed() {
            doomedA.close();
            doomedB.close();
        }

        @Override
        public void close() {
            for (RdmaDevice d : new RdmaDevice[] {lb.devA, lb.devB}) {
                for (MemoryRegion mr : d.resources().survivors(MemoryRegion.class)) {
                    mr.close();
                }
                for (ProtectionDomain pd : d.resources().survivors(ProtectionDomain.class)) {
                    if (pd != lb.pdA && pd != lb.pdB) {
                        pd.close(); // the foreign PDs of FOREIGN_PD cases
                    }
                }
            }
            lb.close();
            if (doomedA.scope().isAlive()) {
                doomedA.close();
            }
            if (doomedB.scope().isAlive()) {
                doomedB.close();
            }
            snapshots.close();
        }
    }

    /** Posts on A a request with SGE {@code badAt} bad as {@code bad} (null: all good) and the given remote side. */
    private static WcStatus postOnA(Setup s, Opcode op, int badAt, BadLocal bad, BadRemote badRemote) {
        boolean written = op == Opcode.RDMA_READ;
        WorkRequest wr = new WorkRequest(SGES).wrId(7).opcode(op).signaled(true).immData(42);
        for (int k = 0; k < SGES; k++) {
            s.addLocalSge(wr, k, k == badAt ? bad : null, written, s.lb.qpA, s.okA);
        }
        long[] remote = s.remote(badRemote, op != Opcode.RDMA_READ);
        wr.remote(remote[0], (int) remote[1]);
        if (bad == BadLocal.DEAD_MEMORY || badRemote == BadRemote.DEAD_MEMORY) {
            s.killDoomed();
        }
        s.lb.qpA.postSend(wr);
        return s.lb.one(s.lb.cqA).status();
    }

    private static void eachPosition(Consumer<Integer> check) {
        for (int k = 0; k < SGES; k++) {
            check.accept(k);
        }
    }

    @ParameterizedTest
    @EnumSource(BadLocal.class)
    void aWriteOrAWriteWithImmWithABadLocalSgeAnywhereMovesNothing(BadLocal bad) {
        for (Opcode op : new Opcode[] {Opcode.RDMA_WRITE, Opcode.RDMA_WRITE_WITH_IMM}) {
            eachPosition(k -> {
                if (bad == BadLocal.NO_LOCAL_WRITE) {
                    return; // a source needs no LOCAL_WRITE
                }
                try (Setup s = new Setup()) {
                    s.lb.qpB.postRecv(new WorkRequest(1).wrId(99));
                    assertThat(postOnA(s, op, k, bad, null)).as("%s, SGE %d %s", op, k, bad).isEqualTo(WcStatus.LOC_PROT_ERR);
                    s.assertEveryByteUnchanged();
                    assertThat(s.lb.cqB.pending()).as("the immediate's receive is not consumed").isZero();
                    assertThat(s.lb.qpB.state()).as("a local error leaves the responder alone").isEqualTo(QueuePair.State.RTS);
                }
            });
        }
    }

    @ParameterizedTest
    @EnumSource(BadRemote.class)
    void aWriteOrAWriteWithImmToABadRemoteRangeMovesNothing(BadRemote bad) {
        for (Opcode op : new Opcode[] {Opcode.RDMA_WRITE, Opcode.RDMA_WRITE_WITH_IMM}) {
            try (Setup s = new Setup()) {
                s.lb.qpB.postRecv(new WorkRequest(1).wrId(99));
                assertThat(postOnA(s, op, -1, null, bad)).as("%s to %s", op, bad).isEqualTo(WcStatus.REM_ACCESS_ERR);
                s.assertEveryByteUnchanged();
            }
        }
    }

    @ParameterizedTest
    @EnumSource(BadLocal.class)
    void aReadWithABadSinkSgeAnywhereMovesNothing(BadLocal bad) {
        eachPosition(k -> {
            try (Setup s = new Setup()) {
                assertThat(postOnA(s, Opcode.RDMA_READ, k, bad, null)).as("SGE %d %s", k, bad)
                        .isEqualTo(WcStatus.LOC_PROT_ERR);
                s.assertEveryByteUnchanged();
            }
        });
    }

    @ParameterizedTest
    @EnumSource(BadRemote.class)
    void aReadFromABadRemoteRangeMovesNothing(BadRemote bad) {
        try (Setup s = new Setup()) {
            assertThat(postOnA(s, Opcode.RDMA_READ, -1, null, bad)).as("from %s", bad).isEqualTo(WcStatus.REM_ACCESS_ERR);
            s.assertEveryByteUnchanged();
        }
    }

    @ParameterizedTest
    @EnumSource(BadLocal.class)
    void aSendWithABadSourceSgeAnywhereMovesNothingAndLeavesTheReceivePosted(BadLocal bad) {
        eachPosition(k -> {
            if (bad == BadLocal.NO_LOCAL_WRITE) {
                return;
            }
            try (Setup s = new Setup()) {
                WorkRequest recv = new WorkRequest(SGES).wrId(99);
                for (int j = 0; j < SGES; j++) {
                    s.addLocalSge(recv, j, null, true, s.lb.qpB, s.okB);
                }
                s.lb.qpB.postRecv(recv);
                assertThat(postOnA(s, Opcode.SEND, k, bad, null)).as("SGE %d %s", k, bad).isEqualTo(WcStatus.LOC_PROT_ERR);
                s.assertEveryByteUnchanged();
                assertThat(s.lb.cqB.pending()).isZero();
                assertThat(s.lb.qpB.outstandingRecvs()).as("the receive waits for the next message").isEqualTo(1);
            }
        });
    }

    @ParameterizedTest
    @EnumSource(BadLocal.class)
    void aSendIntoAReceiveWithABadSgeAnywhereMovesNothing(BadLocal bad) {
        eachPosition(k -> {
            try (Setup s = new Setup()) {
                WorkRequest recv = new WorkRequest(SGES).wrId(99);
                for (int j = 0; j < SGES; j++) {
                    s.addLocalSge(recv, j, j == k ? bad : null, true, s.lb.qpB, s.okB);
                }
                if (bad == BadLocal.DEAD_MEMORY) {
                    s.killDoomed();
                }
                s.lb.qpB.postRecv(recv);
                WorkRequest send = new WorkRequest(1).wrId(7).opcode(Opcode.SEND).signaled(true)
                        .addSge(s.okA.address(), 2L * PIECE, s.okA.lkey());
                s.lb.qpA.postSend(send);
                assertThat(s.lb.one(s.lb.cqA).status()).as("sender, receive SGE %d %s", k, bad).isEqualTo(WcStatus.REM_OP_ERR);
                WorkCompletion wc = s.lb.one(s.lb.cqB);
                assertThat(wc.status()).as("receiver").isEqualTo(WcStatus.LOC_PROT_ERR);
                assertThat(wc.wrId()).isEqualTo(99);
                s.assertEveryByteUnchanged();
            }
        });
    }

    @Test
    void aConfinedArenasMemoryIsRefusedAtRegistrationAndMappingAndNothingIsMade() {
        try (Loopback lb = new Loopback(); Arena confined = Arena.ofConfined()) {
            MemorySegment mine = confined.allocate(8192, 4096);
            int before = lb.devA.resources().count();
            assertRdma(() -> lb.pdA.register(mine, Access.LOCAL_WRITE), Errno.EINVAL, "confined", lb.pdA.toString());
            assertRdma(() -> lb.devA.dmaMap(mine), Errno.EINVAL, "confined", lb.devA.name());
            try (var cache = io.regmem.registration.cache.RegistrationCache.of(lb.pdA)) {
                assertRdma(() -> cache.get(mine, Access.LOCAL_WRITE), Errno.EINVAL, "confined");
                assertThat(cache.size()).isZero();
            }
            assertThat(lb.devA.resources().count()).isEqualTo(before);
            assertThat(lb.pdA.useCount()).isEqualTo(1); // the QP only
            Arena gone = Arena.ofShared();
            MemorySegment closed = gone.allocate(4096);
            gone.close();
            assertRdma(() -> lb.pdA.register(closed, Access.LOCAL_WRITE), Errno.EINVAL, "closed");
        }
    }
}
