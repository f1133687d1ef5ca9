package io.regmem.registration;

import static io.regmem.registration.ObjectModelTest.assertRdma;
import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.Errno;
import io.regmem.core.ScatterList;
import io.regmem.registration.testkit.Loopback;
import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.Providers;
import java.lang.foreign.ValueLayout;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The error state, flushing, drain, queue depth, receiver-not-ready, invalidation and fault injection. */
@ExtendWith(NoLeaks.class)
class ErrorPathTest {
    private Loopback lb = new Loopback();
    private final WorkRequest wr = new WorkRequest(4);

    @AfterEach
    void tearDown() {
        lb.close();
    }

    private WorkRequest writeChain(int n, MemoryRegion local, MemoryRegion remote) {
        WorkRequest first = null;
        WorkRequest prev = null;
        for (int i = 0; i < n; i++) {
            WorkRequest w = new WorkRequest(1).wrId(100 + i).opcode(Opcode.RDMA_WRITE)
                    .addSge(lb.memA.address(), 8, local.lkey()).remote(lb.memB.address() + 8L * i, lb.key(remote));
            if (prev == null) {
                first = w;
            } else {
                prev.next(w);
            }
            prev = w;
        }
        return first;
    }

    @Test
    void afterAnErrorEverythingLaterIsFlushedInOrder() {
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        MemoryRegion remote = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        WorkRequest chain = writeChain(4, local, remote);
        chain.next().remote(lb.memB.address(), lb.key(remote) ^ 1); // the second one has a bad rkey
        lb.qpA.postRecv(new WorkRequest(1).wrId(900));
        lb.qpA.postSend(chain);
        int n = lb.poll(lb.cqA);
        assertThat(n).isEqualTo(5);
        assertThat(lb.wcs[0].status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(lb.wcs[1].status()).isEqualTo(WcStatus.REM_ACCESS_ERR);
        assertThat(lb.wcs[1].wrId()).isEqualTo(101);
        assertThat(lb.wcs[2].status()).isEqualTo(WcStatus.WR_FLUSH_ERR);
        assertThat(lb.wcs[3].status()).isEqualTo(WcStatus.WR_FLUSH_ERR);
        assertThat(lb.wcs[3].wrId()).isEqualTo(103);
        assertThat(lb.wcs[4].wrId()).as("the posted receive is flushed too").isEqualTo(900);
        assertThat(lb.wcs[4].opcode()).isEqualTo(Opcode.RECV);
        assertThat(lb.wcs[4].status()).isEqualTo(WcStatus.WR_FLUSH_ERR);
        assertThat(lb.memB.get(ValueLayout.JAVA_LONG, 16)).as("flushed writes did not run").isZero();
        // posting in the error state is allowed and flushes at once
        lb.qpA.postSend(writeChain(1, local, remote));
        assertThat(lb.one(lb.cqA).status()).isEqualTo(WcStatus.WR_FLUSH_ERR);
    }

    @org.junit.jupiter.api.Tag("soft-only")
    @Test
    void drainFlushesBothQueuesAndTheSlotsFreeAsTheFlushesArePolled() {
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        MemoryRegion remote = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        lb.qpA.unwrap(io.regmem.registration.faults.QpFaults.class).pause(true);
        lb.qpA.postSend(writeChain(3, local, remote));
        lb.qpA.postRecv(new WorkRequest(1).wrId(1));
        lb.qpA.postRecv(new WorkRequest(1).wrId(2));
        assertThat(lb.qpA.outstandingSends()).isEqualTo(3);
        lb.qpA.drain();
        assertThat(lb.qpA.state()).isEqualTo(QueuePair.State.ERROR);
        assertThat(lb.cqA.pending()).as("every request completed (flushed)").isEqualTo(5);
        assertThat(lb.qpA.outstandingSends()).as("slots stay taken until the flushes are polled").isEqualTo(3);
        assertThat(lb.qpA.outstandingRecvs()).isEqualTo(2);
        assertThat(lb.poll(lb.cqA)).isEqualTo(5);
        assertThat(lb.qpA.outstandingSends()).isZero();
        assertThat(lb.qpA.outstandingRecvs()).isZero();
        for (int i = 0; i < 5; i++) {
            assertThat(lb.wcs[i].status()).isEqualTo(WcStatus.WR_FLUSH_ERR);
        }
        assertThat(lb.memB.get(ValueLayout.JAVA_LONG, 0)).isZero();
    }

    @org.junit.jupiter.api.Tag("soft-only")
    @Test
    void aChainLongerThanTheRoomIsRefusedWhole() {
        lb.close();
        lb = new Loopback(Map.of(), new Loopback.QpInitAttributesSpec(4, 4, 1, true, 64));
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        MemoryRegion remote = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        lb.qpA.unwrap(io.regmem.registration.faults.QpFaults.class).pause(true);
        lb.qpA.postSend(writeChain(2, local, remote));
        assertRdma(() -> lb.qpA.postSend(writeChain(3, local, remote)), Errno.ENOMEM, "send queue full", "bad WR index 2");
        assertThat(lb.qpA.outstandingSends()).isEqualTo(2);
        WorkRequest recvs = new WorkRequest(1);
        WorkRequest r = recvs;
        for (int i = 0; i < 4; i++) {
            r = r.next(new WorkRequest(1)).next();
        }
        assertRdma(() -> lb.qpB.postRecv(recvs), Errno.ENOMEM, "receive queue full", "bad WR index 4");
        assertThat(lb.qpB.outstandingRecvs()).isZero();
        lb.qpA.unwrap(io.regmem.registration.faults.QpFaults.class).pause(false);
        assertThat(lb.poll(lb.cqA)).isEqualTo(2);
    }

    @Test
    void sendWithoutAReceiveIsReceiverNotReady() {
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        wr.reset().opcode(Opcode.SEND).addSge(lb.memA.address(), 8, local.lkey());
        lb.qpA.postSend(wr);
        assertThat(lb.one(lb.cqA).status()).isEqualTo(WcStatus.RNR_RETRY_EXC_ERR);
        assertThat(lb.qpA.state()).isEqualTo(QueuePair.State.ERROR);
    }

    /** Polls both CQs for about {@code millis} ms: nothing may complete meanwhile. */
    private void nothingCompletesFor(int millis) throws InterruptedException {
        long until = System.nanoTime() + millis * 1_000_000L;
        while (System.nanoTime() < until) {
            assertThat(lb.cqA.poll(lb.wcs)).as("a completion at A while its SEND waits for a receive").isZero();
            assertThat(lb.cqB.poll(lb.wcs)).as("a completion at B before it posted a receive").isZero();
            Thread.sleep(1);
        }
    }

    /** Polls both CQs until A has one completion and B {@code recvs}; A's, and B's last, in {@code out}. */
    private WcStatus[] awaitSendAndReceive(int recvs, long[] recvLen) {
        WcStatus[] out = new WcStatus[2];
        int gotB = 0;
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (out[0] == null || gotB < recvs) {
            if (out[0] == null && lb.cqA.poll(lb.wcs) > 0) {
                out[0] = lb.wcs[0].status();
            }
            int n = lb.cqB.poll(lb.wcs);
            for (int i = 0; i < n; i++) {
                out[1] = lb.wcs[i].status();
                recvLen[0] = lb.wcs[i].byteLen();
                gotB++;
            }
            assertThat(System.nanoTime()).as("the SEND and its receive complete within 10 s").isLessThan(deadline);
        }
        return out;
    }

    /**
     * verbs' RNR retry: under {@code rnrRetry} 7 a SEND that finds no receive posted at the peer is
     * retried until one is, instead of failing RNR_RETRY_EXC_ERR; it then lands byte-exact, and so
     * do SENDs whose receive is posted from another thread while they are on their way.
     */
    @Test
    void underRnrRetrySevenASendWaitsForItsReceiveAndOneRacingThePostSucceeds() throws Exception {
        lb.close();
        lb = new Loopback(Map.of(), 64, new QpInitAttributes().rnrRetry(7), new QpInitAttributes());
        assertThat(lb.qpA.rnrRetry()).isEqualTo(7);
        assertThat(lb.qpB.rnrRetry()).isZero();
        assertThat(lb.qpB.minRnrTimer()).isEqualTo(12);
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        MemoryRegion sink = lb.pdB.register(lb.memB, Access.LOCAL_WRITE);
        lb.memA.asSlice(0, 4096).fill((byte) 0x3C);
        lb.qpA.postSend(wr.reset().wrId(1).opcode(Opcode.SEND).signaled(true).addSge(lb.memA.address(), 100, local.lkey()));
        nothingCompletesFor(50);
        assertThat(lb.qpA.state()).isEqualTo(QueuePair.State.RTS);
        lb.qpB.postRecv(new WorkRequest(1).wrId(7).addSge(lb.memB.address(), 4096, sink.lkey()));
        long[] len = new long[1];
        assertThat(awaitSendAndReceive(1, len)).containsExactly(WcStatus.SUCCESS, WcStatus.SUCCESS);
        assertThat(len[0]).isEqualTo(100);
        assertThat(lb.memB.get(ValueLayout.JAVA_BYTE, 99)).isEqualTo((byte) 0x3C);

        java.util.SplittableRandom random = new java.util.SplittableRandom(28);
        for (int round = 0; round < 40; round++) {
            long at = lb.memB.address() + 4096L * (1 + round % 8);
            int delayMicros = random.nextInt(300);
            lb.memA.set(ValueLayout.JAVA_INT, 0, round);
            Thread poster = Thread.ofPlatform().start(() -> {
                long until = System.nanoTime() + delayMicros * 1000L;
                while (System.nanoTime() < until) {
                    Thread.onSpinWait();
                }
                lb.qpB.postRecv(new WorkRequest(1).wrId(100 + delayMicros).addSge(at, 4096, sink.lkey()));
            });
            lb.qpA.postSend(wr.reset().wrId(2).opcode(Opcode.SEND).signaled(true).addSge(lb.memA.address(), 64, local.lkey()));
            WcStatus[] statuses = awaitSendAndReceive(1, len);
            poster.join();
            assertThat(statuses).as("round %d, receive posted after %d us", round, delayMicros)
                    .containsExactly(WcStatus.SUCCESS, WcStatus.SUCCESS);
            assertThat(lb.memB.get(ValueLayout.JAVA_INT, at - lb.memB.address())).isEqualTo(round);
        }
    }

    /**
     * rnrRetry 1 to 6: the SEND is retried for that many of the peer's RNR timers (here 6 x 491.52
     * ms, far longer than the test's wait before it posts the receive), then fails
     * RNR_RETRY_EXC_ERR if none was posted (here rnrRetry 1 against a 0.01 ms timer); a
     * WRITE_WITH_IMM waits for its receive the same way.
     */
    @Test
    void aFewRnrRetriesWaitTheirTimeThenFail() throws Exception {
        lb.close();
        lb = new Loopback(Map.of(), 64, new QpInitAttributes().rnrRetry(6), new QpInitAttributes().minRnrTimer(31));
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        MemoryRegion sink = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        lb.qpA.postSend(wr.reset().wrId(1).opcode(Opcode.RDMA_WRITE_WITH_IMM).signaled(true).immData(99)
                .addSge(lb.memA.address(), 64, local.lkey()).remote(lb.memB.address() + 8192, lb.key(sink)));
        nothingCompletesFor(30);
        lb.qpB.postRecv(new WorkRequest(1).wrId(7).addSge(lb.memB.address(), 4096, sink.lkey()));
        long[] len = new long[1];
        assertThat(awaitSendAndReceive(1, len)).containsExactly(WcStatus.SUCCESS, WcStatus.SUCCESS);
        assertThat(len[0]).isEqualTo(64);

        lb.close();
        lb = new Loopback(Map.of(), 64, new QpInitAttributes().rnrRetry(1), new QpInitAttributes().minRnrTimer(1));
        MemoryRegion again = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        lb.qpA.postSend(wr.reset().wrId(1).opcode(Opcode.SEND).signaled(true).addSge(lb.memA.address(), 8, again.lkey()));
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (lb.cqA.poll(lb.wcs) == 0) {
            lb.cqB.poll(lb.wcs);
            assertThat(System.nanoTime()).as("the SEND fails within 10 s").isLessThan(deadline);
        }
        assertThat(lb.wcs[0].status()).isEqualTo(WcStatus.RNR_RETRY_EXC_ERR);
        assertThat(lb.qpA.state()).isEqualTo(QueuePair.State.ERROR);
    }

    /** {@code ibv_query_qp}: the state, the capacities the QP was made with, its retry settings and slots in use. */
    @Test
    void queryReportsStateCapacitiesAndRetrySettings() {
        lb.close();
        lb = new Loopback(Map.of(), 64, new QpInitAttributes().maxSendWr(16).maxRecvWr(8).maxSendSge(2).maxRecvSge(3)
                .rnrRetry(3).minRnrTimer(14).maxInlineData(64).signalAll(false), new QpInitAttributes());
        QpAttributes a = lb.qpA.query();
        assertThat(a).isEqualTo(new QpAttributes(QueuePair.State.RTS, 16, 8, 2, 3, 64, 3, 14, false, 0, 0));
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        lb.qpA.postRecv(new WorkRequest(1).wrId(1).addSge(lb.memA.address() + 4096, 64, local.lkey()));
        assertThat(lb.qpA.query().outstandingRecvs()).isEqualTo(1);
        // no receive at B: 3 RNR retries of 1.28 ms, then RNR_RETRY_EXC_ERR and the error state
        lb.qpA.postSend(wr.reset().wrId(2).opcode(Opcode.SEND).signaled(true).addSge(lb.memA.address(), 8, local.lkey()));
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (lb.cqA.poll(lb.wcs) == 0) {
            lb.cqB.poll(lb.wcs);
            assertThat(System.nanoTime()).isLessThan(deadline);
        }
        assertThat(lb.wcs[0].status()).isEqualTo(WcStatus.RNR_RETRY_EXC_ERR);
        assertThat(lb.qpA.query().state()).isEqualTo(QueuePair.State.ERROR);
        QueuePair gone = lb.qpA;
        lb.idA.destroyQp();
        assertRdma(gone::query, Errno.EBADF);
    }

    /** rnrRetry and minRnrTimer outside verbs' ranges are EINVAL at createQp, and nothing is created. */
    @Test
    void rnrSettingsOutsideTheirRangesAreRefusedAtCreateQp() {
        for (QpInitAttributes bad : new QpInitAttributes[] {new QpInitAttributes().rnrRetry(8), new QpInitAttributes().rnrRetry(-1),
            new QpInitAttributes().minRnrTimer(32), new QpInitAttributes().minRnrTimer(-1)}) {
            CmId id = lb.devA.createCmId();
            assertRdma(() -> id.createQp(lb.pdA, bad.sendCq(lb.cqA).recvCq(lb.cqA)), Errno.EINVAL,
                    bad.rnrRetry() != 0 ? "rnrRetry " + bad.rnrRetry() + " is outside [0, 7]"
                            : "minRnrTimer " + bad.minRnrTimer() + " is outside [0, 31]");
            assertThat(id.qp()).isNull();
            id.close();
        }
        assertThat(QpInitAttributes.minRnrTimerNanos(0)).isEqualTo(655_360_000L);
        assertThat(QpInitAttributes.minRnrTimerNanos(1)).isEqualTo(10_000L);
        assertThat(QpInitAttributes.minRnrTimerNanos(12)).isEqualTo(640_000L);
        assertThat(QpInitAttributes.minRnrTimerNanos(31)).isEqualTo(491_520_000L);
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> QpInitAttributes.minRnrTimerNanos(32))
                .isInstanceOf(IllegalArgumentException.class);
    }

    /**
     * verbs: the first request that fails moves the QP to the error state, and nothing posted after
     * it executes at the target, however many were pipelined behind it: they complete WR_FLUSH_ERR
     * (also one the target would refuse for its own reason), and the target's memory stays as it was.
     */
    @org.junit.jupiter.params.ParameterizedTest
    @org.junit.jupiter.params.provider.EnumSource(value = Opcode.class, names = {"SEND", "RDMA_WRITE_WITH_IMM"})
    void nothingPipelinedBehindAFailedRequestExecutesAtTheTarget(Opcode first) {
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        MemoryRegion target = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        int key = lb.key(target);
        lb.memA.asSlice(0, 65536).fill((byte) 0x5A);
        WorkRequest w = new WorkRequest(1);
        // no receive posted at B: the first fails RNR_RETRY_EXC_ERR
        lb.qpA.postSend(w.reset().wrId(1).opcode(first).signaled(true).immData(7).addSge(lb.memA.address(), 64, local.lkey())
                .remote(lb.memB.address(), key));
        for (int i = 0; i < 8; i++) { // WRITEs behind it, pipelined (posted before anything completed)
            lb.qpA.postSend(w.reset().wrId(10 + i).opcode(Opcode.RDMA_WRITE).signaled(true)
                    .addSge(lb.memA.address(), 4096, local.lkey()).remote(lb.memB.address() + 4096L * i, key));
        }
        lb.qpA.postSend(w.reset().wrId(20).opcode(Opcode.RDMA_WRITE).signaled(true) // one the target would refuse itself
                .addSge(lb.memA.address(), 64, local.lkey()).remote(lb.memB.address() + (1 << 20) - 32, key));
        lb.qpA.postSend(w.reset().wrId(21).opcode(Opcode.RDMA_READ).signaled(true)
                .addSge(lb.memA.address() + 65536, 64, local.lkey()).remote(lb.memB.address(), key));
        java.util.List<WcStatus> statuses = new java.util.ArrayList<>();
        java.util.List<Long> ids = new java.util.ArrayList<>();
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (statuses.size() < 11) {
            int n = lb.cqA.poll(lb.wcs);
            for (int i = 0; i < n; i++) {
                statuses.add(lb.wcs[i].status());
                ids.add(lb.wcs[i].wrId());
            }
            lb.cqB.poll(lb.wcs);
            assertThat(System.nanoTime()).as("11 completions within 10 s, got %s", statuses).isLessThan(deadline);
        }
        assertThat(ids).containsExactly(1L, 10L, 11L, 12L, 13L, 14L, 15L, 16L, 17L, 20L, 21L);
        assertThat(statuses.get(0)).isEqualTo(WcStatus.RNR_RETRY_EXC_ERR);
        assertThat(statuses.subList(1, 11)).as("everything behind the failure is flushed").containsOnly(WcStatus.WR_FLUSH_ERR);
        assertThat(lb.memB.asSlice(0, 65536).mismatch(java.lang.foreign.MemorySegment.ofArray(new byte[65536])))
                .as("no byte landed at the target").isEqualTo(-1);
        assertThat(lb.memA.asSlice(65536, 64).mismatch(java.lang.foreign.MemorySegment.ofArray(new byte[64]))).isEqualTo(-1);
        assertThat(lb.qpA.state()).isEqualTo(QueuePair.State.ERROR);
    }

    /**
     * A responder whose QP went to the error state on its own (a request of its own failed locally)
     * while the requester is still ready: a request to it completes, as verbs' retries running out
     * (RETRY_EXC_ERR), moves no byte, and the requester's deregistrations do not wait on it.
     */
    @Test
    void aRequestToAResponderInTheErrorStateCompletesAndMovesNothing() {
        lb.close(); // ucx: answers only, no timeout to fall back on (the responder must say so itself)
        lb = new Loopback(Providers.NAME.equals("ucx") ? Map.of("answerTimeoutMillis", "0") : Map.of(),
                Loopback.QpInitAttributesSpec.DEFAULT);
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        MemoryRegion target = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        int key = lb.key(target);
        lb.qpB.postSend(new WorkRequest(1).wrId(99).opcode(Opcode.SEND).signaled(true)
                .addSge(lb.memB.address(), 8, local.lkey() ^ 0x5A5A00)); // not B's key: a local protection error at B
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (lb.qpB.state() != QueuePair.State.ERROR) {
            lb.cqB.poll(lb.wcs);
            assertThat(System.nanoTime()).as("B fails its own request").isLessThan(deadline);
        }
        assertThat(lb.qpA.state()).isEqualTo(QueuePair.State.RTS);
        lb.memA.asSlice(0, 4096).fill((byte) 0x77);
        lb.qpA.postSend(new WorkRequest(1).wrId(1).opcode(Opcode.RDMA_WRITE).signaled(true)
                .addSge(lb.memA.address(), 4096, local.lkey()).remote(lb.memB.address(), key));
        WorkCompletion wc = null;
        while (wc == null) {
            if (lb.cqA.poll(lb.wcs) > 0) {
                wc = lb.wcs[0];
            }
            lb.cqB.poll(new WorkCompletion[] {new WorkCompletion()});
            assertThat(System.nanoTime()).as("the request completes within 10 s").isLessThan(deadline);
        }
        assertThat(wc.wrId()).isEqualTo(1);
        assertThat(wc.status()).isEqualTo(WcStatus.RETRY_EXC_ERR);
        assertThat(lb.memB.asSlice(0, 4096).mismatch(java.lang.foreign.MemorySegment.ofArray(new byte[4096]))).isEqualTo(-1);
        long start = System.nanoTime();
        local.close(); // nothing of the device waits on the broken peer
        assertThat((System.nanoTime() - start) / 1_000_000).isLessThan(5_000);
    }

    @Test
    void tooSmallAReceiveFailsBothEnds() {
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        MemoryRegion recvMr = lb.pdB.register(lb.memB, Access.LOCAL_WRITE);
        lb.qpB.postRecv(new WorkRequest(1).wrId(5).addSge(lb.memB.address(), 16, recvMr.lkey()));
        wr.reset().opcode(Opcode.SEND).addSge(lb.memA.address(), 17, local.lkey());
        lb.qpA.postSend(wr);
        assertThat(lb.one(lb.cqA).status()).isEqualTo(WcStatus.REM_INV_REQ_ERR);
        WorkCompletion rc = lb.one(lb.cqB);
        assertThat(rc.status()).isEqualTo(WcStatus.LOC_LEN_ERR);
        assertThat(rc.wrId()).isEqualTo(5);
        assertThat(lb.memB.get(ValueLayout.JAVA_LONG, 0)).isZero();
    }

    @org.junit.jupiter.api.Tag("soft-only")
    @Test
    void injectedFailureBreaksTheQpAtTheNthRequest() {
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        MemoryRegion remote = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        lb.memA.set(ValueLayout.JAVA_LONG, 0, 42);
        lb.qpA.unwrap(io.regmem.registration.faults.QpFaults.class).injectFailure(2, WcStatus.GENERAL_ERR);
        lb.qpA.postSend(writeChain(3, local, remote));
        assertThat(lb.poll(lb.cqA)).isEqualTo(3);
        assertThat(lb.wcs[0].status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(lb.wcs[1].status()).isEqualTo(WcStatus.GENERAL_ERR);
        assertThat(lb.wcs[2].status()).isEqualTo(WcStatus.WR_FLUSH_ERR);
        assertThat(lb.memB.get(ValueLayout.JAVA_LONG, 0)).isEqualTo(42);
        assertThat(lb.memB.get(ValueLayout.JAVA_LONG, 8)).isZero();
    }

    @org.junit.jupiter.api.Tag("soft-only")
    @Test
    void anInjectedFailureNeedsAnErrorStatusAndAPositiveNthAndABadOneChangesNothing() {
        io.regmem.registration.faults.QpFaults faults = lb.qpA.unwrap(io.regmem.registration.faults.QpFaults.class);
        assertThat(faults).isNotNull();
        assertRdma(() -> lb.qpA.unwrap(null), Errno.EINVAL, "unwrap");
        assertThat(lb.qpA.unwrap(String.class)).as("a capability the provider does not have").isNull();
        assertRdma(() -> faults.injectFailure(0, WcStatus.GENERAL_ERR), Errno.EINVAL, "nth");
        assertRdma(() -> faults.injectFailure(1, null), Errno.EINVAL, "error status");
        assertRdma(() -> faults.injectFailure(1, WcStatus.SUCCESS), Errno.EINVAL, "error status");
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        MemoryRegion remote = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        lb.qpA.postSend(writeChain(2, local, remote));
        assertThat(lb.poll(lb.cqA)).isEqualTo(2);
        assertThat(lb.wcs[0].status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(lb.wcs[1].status()).isEqualTo(WcStatus.SUCCESS);
    }

    @org.junit.jupiter.api.Tag("soft-only")
    @Test
    void breakQpAndDisconnectFlushEverything() {
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        MemoryRegion remote = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        lb.qpB.postRecv(new WorkRequest(1).wrId(77));
        lb.qpA.unwrap(io.regmem.registration.faults.QpFaults.class).breakQp();
        lb.qpA.postSend(writeChain(2, local, remote));
        assertThat(lb.poll(lb.cqA)).isEqualTo(2);
        assertThat(lb.wcs[1].status()).isEqualTo(WcStatus.WR_FLUSH_ERR);
        // invariant 16: after disconnect every posted WR has completed (flushed)
        lb.idA.disconnect();
        assertThat(lb.idA.connState()).isEqualTo(CmId.ConnState.DISCONNECTED);
        WorkCompletion rc = lb.one(lb.cqB);
        assertThat(rc.wrId()).isEqualTo(77);
        assertThat(rc.status()).isEqualTo(WcStatus.WR_FLUSH_ERR);
        assertThat(lb.qpB.outstandingRecvs()).isZero();
        assertThat(lb.qpA.outstandingSends()).isZero();
    }

    @Test
    void aPeerThatIsGoneIsARetryError() {
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        MemoryRegion remote = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        int rkey = lb.key(remote);
        lb.idB.destroyQp();
        assertThat(lb.qpA.state()).isEqualTo(QueuePair.State.ERROR);
        wr.reset().opcode(Opcode.RDMA_WRITE).addSge(lb.memA.address(), 8, local.lkey()).remote(lb.memB.address(), rkey);
        lb.qpA.postSend(wr);
        assertThat(lb.one(lb.cqA).status()).isEqualTo(WcStatus.WR_FLUSH_ERR);
    }

    @Test
    void aFullCqOverrunsAndBreaksTheQp() {
        lb.close();
        lb = new Loopback(Map.of(), new Loopback.QpInitAttributesSpec(8, 8, 1, true, 2));
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        MemoryRegion remote = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        lb.qpA.postSend(writeChain(4, local, remote));
        assertThat(lb.poll(lb.cqA)).isEqualTo(2);
        assertThat(lb.cqA.overrun()).isTrue();
        assertThat(lb.qpA.state()).isEqualTo(QueuePair.State.ERROR);
    }

    /**
     * verbs' asynchronous events: a CQ overrun is {@code IBV_EVENT_CQ_ERR} on the CQ, and the QP whose
     * completion it lost, moved to the error state with no completion saying so, is
     * {@code IBV_EVENT_QP_FATAL}; each once, taken from the device in order.
     */
    @Test
    void aCqOverrunRaisesCqErrAndQpFatalOnTheDevice() throws Exception {
        lb.close();
        lb = new Loopback(Map.of(), new Loopback.QpInitAttributesSpec(8, 8, 1, true, 2));
        assertThat(lb.devA.pollAsyncEvent()).isNull();
        assertThat(lb.devA.getAsyncEvent(20, java.util.concurrent.TimeUnit.MILLISECONDS)).isNull();
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        MemoryRegion remote = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        java.util.concurrent.atomic.AtomicReference<AsyncEvent> first = new java.util.concurrent.atomic.AtomicReference<>();
        Thread waiter = Thread.ofPlatform().start(() -> first.set(lb.devA.getAsyncEvent(10, java.util.concurrent.TimeUnit.SECONDS)));
        Thread.sleep(20); // the waiter sleeps in getAsyncEvent
        lb.qpA.postSend(writeChain(4, local, remote));
        lb.poll(lb.cqA);
        waiter.join(10_000);
        assertThat(first.get()).isNotNull();
        assertThat(first.get().type()).isEqualTo(AsyncEvent.Type.CQ_ERR);
        assertThat(first.get().resource()).isSameAs(lb.cqA);
        assertThat(first.get().description()).contains("overran", "depth 2");
        AsyncEvent fatal = lb.devA.getAsyncEvent(10, java.util.concurrent.TimeUnit.SECONDS);
        assertThat(fatal.type()).isEqualTo(AsyncEvent.Type.QP_FATAL);
        assertThat(fatal.resource()).isSameAs(lb.qpA);
        while (lb.poll(lb.cqA) > 0) {
            // the flushed rest
        }
        assertThat(lb.devA.pollAsyncEvent()).as("one event each").isNull();
        assertThat(lb.devB.pollAsyncEvent()).as("nothing happened at B's device").isNull();
        assertThat(lb.devA.asyncEventsDropped()).isZero();
        assertRdma(() -> lb.devA.getAsyncEvent(-1, java.util.concurrent.TimeUnit.SECONDS), Errno.EINVAL);

        RdmaDevice lone = io.regmem.registration.testkit.Providers.open(Map.of());
        java.util.concurrent.atomic.AtomicReference<Object> got = new java.util.concurrent.atomic.AtomicReference<>();
        Thread closing = Thread.ofPlatform().start(() -> {
            try {
                got.set(lone.getAsyncEvent(10, java.util.concurrent.TimeUnit.SECONDS));
            } catch (RuntimeException e) {
                got.set(e);
            }
        });
        Thread.sleep(20);
        lone.close();
        closing.join(10_000);
        assertThat(got.get()).as("a waiter when its device closes").isInstanceOf(io.regmem.core.RdmaException.class)
                .satisfies(e -> assertThat(((io.regmem.core.RdmaException) e).errno()).isEqualTo(Errno.EBADF));
        assertRdma(lone::pollAsyncEvent, Errno.EBADF);
    }

    @Test
    void localInvalidateAndSendWithInvalidateRetireFastRegKeys() {
        DmaMapping map = lb.devB.dmaMap(lb.memB.asSlice(0, 8 * 4096));
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        MemoryRegion fr = lb.pdB.allocMr(8);
        // two pages that are not adjacent: the MR makes them one contiguous iova range
        ScatterList sg = new ScatterList().add(map.address() + 4 * 4096L, 4096).add(map.address() + 4096L, 4096);
        assertThat(fr.mapSg(sg, 2, 0, 4096)).isEqualTo(2);
        WorkRequest reg = new WorkRequest(1).regMr(fr, fr.rkey(), Access.mask(Access.LOCAL_WRITE, Access.REMOTE_WRITE));
        lb.qpB.postSend(reg);
        assertThat(lb.one(lb.cqB).status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(fr.isValid()).isTrue();

        // one WRITE across the page boundary of the iova lands on two scattered pages
        for (int i = 0; i < 64; i++) {
            lb.memA.set(ValueLayout.JAVA_BYTE, i, (byte) (i + 1));
        }
        wr.reset().opcode(Opcode.RDMA_WRITE).addSge(lb.memA.address(), 64, local.lkey()).remote(fr.address() + 4096 - 32, lb.key(fr));
        lb.qpA.postSend(wr);
        assertThat(lb.one(lb.cqA).status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(lb.memB.get(ValueLayout.JAVA_BYTE, 4 * 4096L + 4096 - 32)).isEqualTo((byte) 1);
        assertThat(lb.memB.get(ValueLayout.JAVA_BYTE, 4096L)).as("second half on the second page").isEqualTo((byte) 33);
        assertThat(lb.memB.get(ValueLayout.JAVA_BYTE, 5 * 4096L)).as("not past the first page").isZero();

        // SEND_WITH_INV retires the responder's MR and says so in the receive completion
        MemoryRegion recvMr = lb.pdB.register(lb.memB.asSlice(64 * 4096, 4096), Access.LOCAL_WRITE);
        lb.qpB.postRecv(new WorkRequest(1).wrId(3).addSge(recvMr.address(), 64, recvMr.lkey()));
        wr.reset().opcode(Opcode.SEND_WITH_INV).invalidateRkey(lb.key(fr)).addSge(lb.memA.address(), 8, local.lkey());
        lb.qpA.postSend(wr);
        assertThat(lb.one(lb.cqA).status()).isEqualTo(WcStatus.SUCCESS);
        WorkCompletion rc = lb.one(lb.cqB);
        assertThat(rc.withInvalidate()).isTrue();
        assertThat(rc.invalidatedRkey()).isEqualTo(fr.rkey());
        assertThat(fr.isValid()).isFalse();

        // re-register, then LOCAL_INV on the responder retires it again
        reg.reset().regMr(fr, MemoryRegion.incRkey(fr.rkey()), Access.mask(Access.LOCAL_WRITE, Access.REMOTE_WRITE));
        lb.qpB.postSend(reg);
        assertThat(lb.one(lb.cqB).status()).isEqualTo(WcStatus.SUCCESS);
        WorkRequest inv = new WorkRequest(1).opcode(Opcode.LOCAL_INV).invalidateRkey(fr.rkey());
        lb.qpB.postSend(inv);
        assertThat(lb.one(lb.cqB).status()).isEqualTo(WcStatus.SUCCESS);
        wr.reset().opcode(Opcode.RDMA_WRITE).addSge(lb.memA.address(), 8, local.lkey()).remote(fr.address(), lb.key(fr));
        lb.qpA.postSend(wr);
        assertThat(lb.one(lb.cqA).status()).isEqualTo(WcStatus.REM_ACCESS_ERR);
        fr.close();
        map.close();
    }

    @Test
    void regMrOfPagesNobodyMappedFails() {
        MemoryRegion fr = lb.pdB.allocMr(2);
        ScatterList sg = new ScatterList().add(lb.memB.address(), 4096);
        fr.mapSg(sg, 1, 0, 4096);
        lb.qpB.postSend(new WorkRequest(1).regMr(fr, fr.rkey(), Access.mask(Access.LOCAL_WRITE)));
        assertThat(lb.one(lb.cqB).status()).isEqualTo(WcStatus.LOC_PROT_ERR);
        assertThat(fr.isValid()).isFalse();
        fr.close();
    }

    @Test
    void iwarpReadWithInvalidateRetiresTheSink() {
        Loopback iwarp = new Loopback(Map.of("iWarp", "true"), Loopback.QpInitAttributesSpec.DEFAULT); // skips without iWARP
        lb.close();
        lb = iwarp;
        DmaMapping map = lb.devA.dmaMap(lb.memA.asSlice(0, 4 * 4096));
        MemoryRegion sink = lb.pdA.allocMr(4);
        sink.mapSg(new ScatterList().add(map.address(), 4096), 1, 0, 4096);
        lb.qpA.postSend(new WorkRequest(1).regMr(sink, sink.rkey(), Access.mask(Access.LOCAL_WRITE, Access.REMOTE_WRITE)));
        assertThat(lb.one(lb.cqA).status()).isEqualTo(WcStatus.SUCCESS);
        MemoryRegion remote = lb.pdB.register(lb.memB, Access.REMOTE_READ);
        lb.memB.set(ValueLayout.JAVA_LONG, 0, 0x1234);
        wr.reset().opcode(Opcode.RDMA_READ_WITH_INV).addSge(sink.address(), 8, sink.lkey()).remote(lb.memB.address(), lb.key(remote));
        lb.qpA.postSend(wr);
        assertThat(lb.one(lb.cqA).status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(lb.memA.get(ValueLayout.JAVA_LONG, 0)).isEqualTo(0x1234);
        assertThat(sink.isValid()).as("iWARP READ_WITH_INV invalidates the sink").isFalse();
        sink.close();
        map.close();
    }

    @Test
    void connectionSetupRules() {
        CmId nobody = lb.devA.createCmId();
        String nowhere = Providers.address("no-such-service");
        assertRdma(() -> nobody.connect(nowhere), Errno.EINVAL, "needs a QP");
        CmId first = lb.devB.createCmId();
        CmId second = lb.devB.createCmId();
        String rules = Providers.address("svc-rules");
        first.listen(rules);
        assertRdma(() -> second.listen(rules), Errno.EBUSY, "already listened on");
        assertRdma(first::accept, Errno.EINVAL, "pending request");

        ProtectionDomain pd = lb.devA.allocPd();
        CompletionQueue cq = lb.devA.createCq(8);
        CmId active = lb.devA.createCmId();
        active.createQp(pd, QpInitAttributes.of(cq));
        assertRdma(() -> active.connect(nowhere), Errno.ECONNREFUSED, "nobody listens");
        assertRdma(() -> active.connect(null), Errno.EINVAL, "needs an address");
        active.connect(rules);
        assertThat(active.connState()).isEqualTo(CmId.ConnState.CONNECTING);
        assertRdma(() -> active.connect(rules), Errno.EINVAL, "needs an idle ID", "CONNECTING");
        CmId request = first.getRequest();
        assertThat(request.connState()).isEqualTo(CmId.ConnState.REQUESTED);
        assertRdma(request::accept, Errno.EINVAL, "a QP");
        request.reject();
        assertThat(active.connState()).isEqualTo(CmId.ConnState.DISCONNECTED);
        assertThat(first.getRequest()).isNull();

        request.close();
        active.destroyQp();
        active.close();
        cq.close();
        pd.close();
        nobody.close();
        first.close();
        second.close();
    }

    @Test
    void privateDataTravelsWithConnectAcceptAndRejectWithinItsLimits() {
        ProtectionDomain pd = lb.devA.allocPd();
        CompletionQueue cq = lb.devA.createCq(8);
        ProtectionDomain pdB = lb.devB.allocPd();
        CompletionQueue cqB = lb.devB.createCq(8);
        CmId listener = lb.devB.createCmId();
        String address = Providers.address("svc-private-data");
        listener.listen(address);
        CmId active = lb.devA.createCmId();
        active.createQp(pd, QpInitAttributes.of(cq));
        assertRdma(() -> active.connect(address, new byte[CmId.MAX_CONNECT_PRIVATE_DATA + 1]), Errno.EINVAL,
                "57 bytes of private data (at most 56)");
        assertThat(active.connState()).as("a refused connect changes nothing").isEqualTo(CmId.ConnState.IDLE);
        assertThat(active.peerAddress()).isNull();
        byte[] asked = new byte[CmId.MAX_CONNECT_PRIVATE_DATA];
        for (int i = 0; i < asked.length; i++) {
            asked[i] = (byte) (i + 1);
        }
        active.connect(address, asked);
        asked[0] = 99; // copied at the call
        assertThat(active.peerAddress()).isEqualTo(address);
        CmId request = Providers.awaitRequest(listener);
        byte[] got = request.privateData();
        assertThat(got).hasSize(CmId.MAX_CONNECT_PRIVATE_DATA).startsWith(1, 2, 3).endsWith(56);
        got[1] = 0; // a copy
        assertThat(request.privateData()[1]).isEqualTo((byte) 2);
        assertThat(request.peerAddress()).isNotNull();
        assertRdma(() -> request.reject(new byte[CmId.MAX_REJECT_PRIVATE_DATA + 1]), Errno.EINVAL, "at most 148");
        assertThat(request.connState()).isEqualTo(CmId.ConnState.REQUESTED);
        request.reject("no room".getBytes());
        Providers.awaitState(active, CmId.ConnState.DISCONNECTED);
        assertThat(new String(active.privateData())).isEqualTo("no room");
        request.close();
        active.destroyQp();
        active.close();

        CmId again = lb.devA.createCmId();
        again.createQp(pd, QpInitAttributes.of(cq));
        again.connect(address);
        CmId second = Providers.awaitRequest(listener);
        assertThat(second.privateData()).isEmpty();
        second.createQp(pdB, QpInitAttributes.of(cqB));
        assertRdma(() -> second.accept(new byte[CmId.MAX_ACCEPT_PRIVATE_DATA + 1]), Errno.EINVAL, "at most 196");
        byte[] answer = new byte[CmId.MAX_ACCEPT_PRIVATE_DATA];
        answer[195] = 7;
        second.accept(answer);
        Providers.awaitState(again, CmId.ConnState.CONNECTED);
        assertThat(again.privateData()).hasSize(196).endsWith(7);
        again.disconnect();
        again.destroyQp();
        second.destroyQp();
        again.close();
        second.close();
        listener.close();
        cq.close();
        pd.close();
        cqB.close();
        pdB.close();
    }

    @Test
    void closingAListenerRefusesItsPendingRequests() {
        ProtectionDomain pd = lb.devA.allocPd();
        CompletionQueue cq = lb.devA.createCq(8);
        CmId listener = lb.devB.createCmId();
        String pending = Providers.address("svc-pending");
        listener.listen(pending);
        CmId active = lb.devA.createCmId();
        active.createQp(pd, QpInitAttributes.of(cq));
        active.connect(pending);
        listener.close();
        assertThat(active.connState()).isEqualTo(CmId.ConnState.DISCONNECTED);
        assertThat(lb.devB.resources().survivors(CmId.class)).doesNotContain(listener);
        active.destroyQp();
        active.close();
        cq.close();
        pd.close();
    }
}
