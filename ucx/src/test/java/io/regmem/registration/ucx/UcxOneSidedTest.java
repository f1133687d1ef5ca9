package io.regmem.registration.ucx;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.BufferPool;
import io.regmem.core.PooledBuffer;
import io.regmem.registration.Access;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.Opcode;
import io.regmem.registration.PoolRegistration;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import io.regmem.registration.testkit.Loopback;
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * {@code oneSided=true}: WRITEs and READs into a peer's UCX-allocated memory go as UCX puts and
 * gets, byte-exact, gathered from and scattered to several local pieces; the target checks nothing
 * (the trust the option asks for), while a key of the peer's ordinary memory still goes as a
 * message the target checks.
 */
@ExtendWith(NoLeaks.class)
class UcxOneSidedTest {
    private Loopback lb;
    private BufferPool pool;
    private PoolRegistration reg;
    private PooledBuffer target;
    private MemoryRegion local;
    private int key;
    private final WorkCompletion[] one = {new WorkCompletion()};

    @BeforeEach
    void setUp() {
        UcxAvailable.requireOneSided();
        lb = new Loopback("ucx", Map.of("oneSided", "true"), 64, new QpInitAttributes().maxSendSge(4), new QpInitAttributes());
        pool = BufferPool.builder().name("one-sided").chunkSource(lb.devB.chunkSource()).build();
        reg = lb.pdB.register(pool, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ);
        target = pool.allocate(1 << 20);
        local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        key = lb.qpA.importRemoteKey(reg.exportRemoteKey(target));
    }

    @AfterEach
    void tearDown() {
        if (lb == null) {
            return; // skipped before anything was made
        }
        target.close();
        reg.close();
        pool.close();
        lb.close();
    }

    private WcStatus await() {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (lb.cqA.poll(one) == 0) {
            assertThat(System.nanoTime()).isLessThan(deadline);
        }
        return one[0].status();
    }

    @Test
    void writesAndReadsCrossByteExactWithNobodyPollingTheTarget() {
        for (int i = 0; i < 1 << 19; i += 8) {
            lb.memA.set(ValueLayout.JAVA_LONG, i, i * 0x9E37_79B9_7F4A_7C15L);
        }
        // gathered from three pieces into the peer's chunk: no target progress needed
        lb.qpA.postSend(new WorkRequest(3).wrId(1).opcode(Opcode.RDMA_WRITE).signaled(true)
                .addSge(lb.memA.address(), 100, local.lkey()).addSge(lb.memA.address() + 100, 65436, local.lkey())
                .addSge(lb.memA.address() + 65536, 196608, local.lkey()).remote(target.address() + 8, key));
        assertThat(await()).isEqualTo(WcStatus.SUCCESS);
        assertThat(target.segment().asSlice(8, 262144).mismatch(lb.memA.asSlice(0, 262144))).isEqualTo(-1);
        // read back, scattered into two pieces
        lb.qpA.postSend(new WorkRequest(2).wrId(2).opcode(Opcode.RDMA_READ).signaled(true)
                .addSge(lb.memA.address() + (1 << 19), 1000, local.lkey())
                .addSge(lb.memA.address() + (1 << 19) + 4096, 261144, local.lkey()).remote(target.address() + 8, key));
        assertThat(await()).isEqualTo(WcStatus.SUCCESS);
        assertThat(one[0].byteLen()).isEqualTo(262144);
        assertThat(lb.memA.asSlice(1 << 19, 1000).mismatch(lb.memA.asSlice(0, 1000))).isEqualTo(-1);
        assertThat(lb.memA.asSlice((1 << 19) + 4096, 261144).mismatch(lb.memA.asSlice(1000, 261144))).isEqualTo(-1);
        assertThat(lb.cqB.pending()).as("the target saw nothing").isZero();
    }

    /**
     * WRITEs in flight together share the endpoint flush issued when the oldest is reaped: each one
     * still completes only with its bytes (and those of every WRITE before it) at the target, in
     * order, and a READ behind them sees them all.
     */
    @Test
    void writesInFlightTogetherEachCompleteWithTheirBytesAtTheTarget() {
        for (int round = 0; round < 50; round++) {
            for (int i = 0; i < 32; i++) {
                lb.memA.asSlice(i * 4096L, 4096).fill((byte) (round * 31 + i));
            }
            for (int i = 0; i < 32; i++) {
                lb.qpA.postSend(new WorkRequest(1).wrId(round * 100L + i).opcode(Opcode.RDMA_WRITE).signaled(true)
                        .addSge(lb.memA.address() + i * 4096L, 4096, local.lkey()).remote(target.address() + i * 4096L, key));
            }
            lb.qpA.postSend(new WorkRequest(1).wrId(round * 100L + 99).opcode(Opcode.RDMA_READ).signaled(true)
                    .addSge(lb.memA.address() + (1 << 19), 32 * 4096, local.lkey()).remote(target.address(), key));
            WorkCompletion[] wcs = new WorkCompletion[8];
            for (int i = 0; i < wcs.length; i++) {
                wcs[i] = new WorkCompletion();
            }
            List<Long> ids = new ArrayList<>();
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (ids.size() < 33) {
                int n = lb.cqA.poll(wcs);
                for (int k = 0; k < n; k++) {
                    assertThat(wcs[k].status()).as(wcs[k].toString()).isEqualTo(WcStatus.SUCCESS);
                    ids.add(wcs[k].wrId());
                    int i = (int) (wcs[k].wrId() - round * 100L);
                    if (i < 32) { // this WRITE and every one before it are at the target now
                        for (int j = 0; j <= i; j++) {
                            assertThat(target.segment().asSlice(j * 4096L, 4096).mismatch(lb.memA.asSlice(j * 4096L, 4096)))
                                    .as("round %d: WRITE %d at the target when WRITE %d completed", round, j, i).isEqualTo(-1);
                        }
                    }
                }
                assertThat(System.nanoTime()).isLessThan(deadline);
            }
            List<Long> expected = new ArrayList<>();
            for (int i = 0; i < 32; i++) {
                expected.add(round * 100L + i);
            }
            expected.add(round * 100L + 99);
            assertThat(ids).as("completions in order").isEqualTo(expected);
            assertThat(lb.memA.asSlice(1 << 19, 32 * 4096).mismatch(lb.memA.asSlice(0, 32 * 4096)))
                    .as("the READ behind the WRITEs sees them").isEqualTo(-1);
            assertThat(lb.qpA.outstandingSends()).isZero();
        }
    }

    @Test
    void theTargetChecksNothingForUcxMemoryButStillChecksItsOrdinaryMemory() {
        lb.memA.set(ValueLayout.JAVA_LONG, 0, 77L);
        reg.region(target).revoke(); // a message would be refused now; a put is not looked at
        lb.qpA.postSend(new WorkRequest(1).wrId(3).opcode(Opcode.RDMA_WRITE).signaled(true)
                .addSge(lb.memA.address(), 8, local.lkey()).remote(target.address(), key));
        assertThat(await()).as("trusted: one-sided").isEqualTo(WcStatus.SUCCESS);
        assertThat(target.segment().get(ValueLayout.JAVA_LONG, 0)).isEqualTo(77L);

        MemoryRegion ordinary = lb.pdB.register(lb.memB.asSlice(0, 4096), Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        int k = lb.qpA.importRemoteKey(ordinary.exportRemoteKey());
        ordinary.revoke();
        lb.qpA.postSend(new WorkRequest(1).wrId(4).opcode(Opcode.RDMA_WRITE).signaled(true)
                .addSge(lb.memA.address(), 8, local.lkey()).remote(lb.memB.address(), k));
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (lb.cqA.poll(one) == 0) {
            lb.cqB.poll(new WorkCompletion[] {new WorkCompletion()});
            assertThat(System.nanoTime()).isLessThan(deadline);
        }
        assertThat(one[0].status()).as("Java memory: a message, checked at the target").isEqualTo(WcStatus.REM_ACCESS_ERR);
        assertThat(lb.memB.get(ValueLayout.JAVA_LONG, 0)).isZero();
        ordinary.close();
    }

    /**
     * The peer gave its memory back before the key was first used: UCX cannot unpack the key any
     * more. The post is not refused and changes nothing it should not: the request goes as a message,
     * the target (which no longer has the region) refuses it, it completes REM_ACCESS_ERR, and no
     * post or poll throws for it.
     */
    @Test
    void aKeyOfMemoryThePeerGaveBackIsARemoteAccessErrorNeverAnException() {
        BufferPool gone = BufferPool.builder().name("given-back").chunkSource(lb.devB.chunkSource()).build();
        PoolRegistration goneReg = lb.pdB.register(gone, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        PooledBuffer b = gone.allocate(1 << 20);
        long address = b.address();
        int k = lb.qpA.importRemoteKey(goneReg.exportRemoteKey(b));
        b.close();
        goneReg.close();
        gone.close(); // the chunk goes back to UCX (ucp_mem_unmap): the packed key names nothing now
        for (int attempt = 0; attempt < 2; attempt++) {
            lb.qpA.postSend(new WorkRequest(1).wrId(10 + attempt).opcode(Opcode.RDMA_WRITE).signaled(true)
                    .addSge(lb.memA.address(), 64, local.lkey()).remote(address, k));
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (lb.cqA.poll(one) == 0) {
                lb.cqB.poll(new WorkCompletion[] {new WorkCompletion()});
                assertThat(System.nanoTime()).isLessThan(deadline);
            }
            assertThat(one[0].wrId()).isEqualTo(10 + attempt);
            assertThat(one[0].status()).isEqualTo(attempt == 0 ? WcStatus.REM_ACCESS_ERR : WcStatus.WR_FLUSH_ERR);
            assertThat(lb.qpA.outstandingSends()).isZero();
        }
    }
}
