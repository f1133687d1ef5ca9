package io.regmem.registration.ucx;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.Access;
import io.regmem.registration.CmId;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.Opcode;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import io.regmem.registration.testkit.Loopback;
import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.Providers;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * RDMA WRITE and READ on the UCX provider through the public verbs API: two devices of this JVM
 * (a UCP context and worker each) connected by their CM IDs, keys exported by the target and
 * imported on the initiator's QP. Bytes land exactly; a completion of a WRITE means the bytes are
 * there; every kind of bad request completes with its error, moves no byte, and flushes what
 * follows it; nothing is left after teardown.
 */
@ExtendWith(NoLeaks.class)
class UcxDataPathTest {
    private Loopback lb;
    private ProtectionDomain pdA;
    private ProtectionDomain pdB;
    private CompletionQueue cqA;
    private CompletionQueue cqB;
    private CmId idB;
    private QueuePair qpA;
    private MemorySegment memA;
    private MemorySegment memB;
    private MemoryRegion mrA;
    private MemoryRegion mrB;
    private final WorkCompletion[] wcs = {new WorkCompletion(), new WorkCompletion(), new WorkCompletion(), new WorkCompletion()};

    @BeforeEach
    void connect() {
        UcxAvailable.require();
        lb = new Loopback("ucx", java.util.Map.of(), 256,
                new QpInitAttributes().maxSendWr(64).maxRecvWr(16).maxSendSge(4).signalAll(false),
                new QpInitAttributes().maxSendWr(64).maxRecvWr(16));
        pdA = lb.pdA;
        pdB = lb.pdB;
        cqA = lb.cqA;
        cqB = lb.cqB;
        idB = lb.idB;
        qpA = lb.qpA;
        memA = lb.memA;
        memB = lb.memB;
        mrA = pdA.register(memA, Access.LOCAL_WRITE);
        mrB = pdB.register(memB, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ);
    }

    @AfterEach
    void tearDown() {
        if (lb != null) {
            lb.close(); // closes leftover MRs, asserts that nothing survives
        }
    }

    /** Completions B polled while the test waited for A's (its receives). */
    private final java.util.List<WorkCompletion> atB = new java.util.ArrayList<>();

    /** Polls A's CQ (and B's, as a target without RDMA hardware must progress) until {@code n} completions arrived at A. */
    private int await(int n) {
        return awaitBoth(n, 0);
    }

    /** Polls both CQs until A has {@code n} more completions (in {@link #wcs}) and B at least {@code atLeastB} in {@link #atB}. */
    private int awaitBoth(int n, int atLeastB) {
        int got = 0;
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (got < n || atB.size() < atLeastB) {
            WorkCompletion b = new WorkCompletion();
            if (cqB.poll(new WorkCompletion[] {b}) == 1) {
                atB.add(b);
            }
            if (got < n) {
                got += cqA.poll(new WorkCompletion[] {wcs[got]});
            }
            assertThat(System.nanoTime()).as("%d completions within 10 s (got %d; B %d)", n, got, atB.size()).isLessThan(deadline);
        }
        return got;
    }

    private static void fill(MemorySegment s, long seed) {
        SplittableRandom r = new SplittableRandom(seed);
        for (long i = 0; i < s.byteSize(); i += 8) {
            s.set(ValueLayout.JAVA_LONG, i, r.nextLong());
        }
    }

    /**
     * The transport selection, wired: a connection whose endpoint runs on NIC transports (a stand-in:
     * this machine has none, so the endpoint is given the decision {@link UcxTransports} makes for
     * {@code rc_mlx5}) sends WRITE and READ as UCX puts and gets through any key UCX registered, byte
     * exact; the same connection with its checked decision sends them as messages.
     */
    @Test
    void aConnectionOnNicTransportsSendsWriteAndReadAsPutsAndGets() {
        UcxQp a = qpA.unwrap(UcxQp.class);
        assertThat(a).isNotNull();
        assertThat(a.nicOneSided()).as("shared memory or TCP: checked messages").isFalse();
        int key = lb.key(mrB);
        fill(memA.asSlice(0, 16384), 3);
        qpA.postSend(new WorkRequest(1).wrId(1).opcode(Opcode.RDMA_WRITE).signaled(true)
                .addSge(memA.address(), 4096, mrA.lkey()).remote(memB.address(), key));
        await(1);
        assertThat(wcs[0].status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(a.sender.oneSidedStarted).isZero();
        UcxEndpoint ep = a.endpointObject();
        String checked = ep.messagesBecause;
        assertThat(UcxTransports.whyNotOneSided(1, 19, java.util.List.of("rc_mlx5", "ud_mlx5"))).isNull();
        ep.messagesBecause = UcxTransports.whyNotOneSided(1, 19, java.util.List.of("rc_mlx5", "ud_mlx5"));
        try {
            assertThat(a.nicOneSided()).isTrue();
            qpA.postSend(new WorkRequest(1).wrId(2).opcode(Opcode.RDMA_WRITE).signaled(true)
                    .addSge(memA.address(), 16384, mrA.lkey()).remote(memB.address() + 65536, key));
            await(1);
            assertThat(wcs[0].status()).isEqualTo(WcStatus.SUCCESS);
            qpA.postSend(new WorkRequest(1).wrId(3).opcode(Opcode.RDMA_READ).signaled(true)
                    .addSge(memA.address() + 131072, 16384, mrA.lkey()).remote(memB.address() + 65536, key));
            await(1);
            assertThat(wcs[0].status()).isEqualTo(WcStatus.SUCCESS);
            assertThat(a.sender.oneSidedStarted).as("both as a put and a get").isEqualTo(2);
            assertThat(memB.asSlice(65536, 16384).mismatch(memA.asSlice(0, 16384))).isEqualTo(-1);
            assertThat(memA.asSlice(131072, 16384).mismatch(memA.asSlice(0, 16384))).isEqualTo(-1);
        } finally {
            ep.messagesBecause = checked;
        }
        qpA.postSend(new WorkRequest(1).wrId(4).opcode(Opcode.RDMA_WRITE).signaled(true)
                .addSge(memA.address(), 4096, mrA.lkey()).remote(memB.address(), key));
        await(1);
        assertThat(wcs[0].status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(a.sender.oneSidedStarted).as("checked again: a message").isEqualTo(2);
    }

    /**
     * Two QPs of one device connected to each other, each with a CQ of its own: a WRITE completes
     * polling the send CQ alone (the target QP's delivery is driven from its peer's poll), as on soft.
     */
    @Test
    void aLoopbackPairOfOneDeviceCompletesPollingTheSendCqAlone() {
        io.regmem.registration.RdmaDevice dev = lb.devA;
        CompletionQueue send = dev.createCq(16);
        CompletionQueue recv = dev.createCq(16);
        ProtectionDomain pd = dev.allocPd();
        MemorySegment src = lb.arena.allocate(4096, 4096);
        MemorySegment dst = lb.arena.allocate(4096, 4096);
        MemoryRegion srcMr = pd.register(src, Access.LOCAL_WRITE);
        MemoryRegion dstMr = pd.register(dst, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        CmId listener = dev.createCmId();
        String address = Providers.address("ucx", "same-device");
        listener.listen(address);
        CmId a = dev.createCmId();
        QueuePair qa = a.createQp(pd, QpInitAttributes.of(send));
        a.connect(address);
        CmId b = Providers.awaitRequest(listener);
        b.createQp(pd, QpInitAttributes.of(recv));
        b.accept();
        fill(src, 5);
        qa.postSend(new WorkRequest(1).wrId(1).opcode(Opcode.RDMA_WRITE).signaled(true)
                .addSge(src.address(), 4096, srcMr.lkey()).remote(dst.address(), qa.importRemoteKey(dstMr.exportRemoteKey())));
        WorkCompletion[] one = {new WorkCompletion()};
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (send.poll(one) == 0) { // only the send CQ
            assertThat(System.nanoTime()).as("completed by polling the send CQ alone").isLessThan(deadline);
        }
        assertThat(one[0].status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(dst.mismatch(src)).isEqualTo(-1);
        a.disconnect();
        while (send.poll(one) > 0 || recv.poll(one) > 0) {
            // flushed
        }
        a.destroyQp();
        b.destroyQp();
        a.close();
        b.close();
        listener.close();
        srcMr.close();
        dstMr.close();
        send.close();
        recv.close();
        pd.close();
    }

    @Test
    void aWriteLandsByteExactWhenItCompletesAndAReadBringsItBack() {
        fill(memA, 1);
        int key = qpA.importRemoteKey(mrB.exportRemoteKey());
        // three local pieces gathered into one remote range at an offset
        WorkRequest w = new WorkRequest(4).wrId(7).opcode(Opcode.RDMA_WRITE).signaled(true)
                .addSge(memA.address(), 4096, mrA.lkey()).addSge(memA.address() + 8192, 100_000, mrA.lkey())
                .addSge(memA.address() + 200_000, 13, mrA.lkey()).remote(memB.address() + 4096, key);
        qpA.postSend(w);
        await(1);
        assertThat(wcs[0].status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(wcs[0].wrId()).isEqualTo(7);
        assertThat(wcs[0].byteLen()).isEqualTo(4096 + 100_000 + 13);
        assertThat(memB.asSlice(4096, 4096).mismatch(memA.asSlice(0, 4096))).isEqualTo(-1);
        assertThat(memB.asSlice(8192, 100_000).mismatch(memA.asSlice(8192, 100_000))).isEqualTo(-1);
        assertThat(memB.asSlice(108_192, 13).mismatch(memA.asSlice(200_000, 13))).isEqualTo(-1);
        assertThat(memB.get(ValueLayout.JAVA_LONG, 0)).as("bytes before the range untouched").isZero();

        MemorySegment back = memA.asSlice(512 * 1024, 104_109);
        WorkRequest r = new WorkRequest(1).wrId(8).opcode(Opcode.RDMA_READ).signaled(true)
                .addSge(back.address(), back.byteSize(), mrA.lkey()).remote(memB.address() + 4096, key);
        qpA.postSend(r);
        await(1);
        assertThat(wcs[0].status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(wcs[0].opcode()).isEqualTo(Opcode.RDMA_READ);
        assertThat(back.mismatch(memB.asSlice(4096, back.byteSize()))).isEqualTo(-1);
    }

    @Test
    void manyWritesCompleteInOrder() {
        fill(memA, 2);
        int key = qpA.importRemoteKey(mrB.exportRemoteKey());
        WorkRequest w = new WorkRequest(1);
        for (int i = 0; i < 32; i++) {
            w.reset().wrId(i).opcode(Opcode.RDMA_WRITE).signaled(i % 2 == 1).addSge(memA.address() + i * 4096L, 4096, mrA.lkey())
                    .remote(memB.address() + i * 4096L, key);
            qpA.postSend(w);
        }
        for (int i = 0; i < 16; i++) {
            await(1);
            assertThat(wcs[0].status()).isEqualTo(WcStatus.SUCCESS);
            assertThat(wcs[0].wrId()).as("the %dth signaled WRITE", i).isEqualTo(2L * i + 1);
        }
        assertThat(memB.asSlice(0, 32 * 4096).mismatch(memA.asSlice(0, 32 * 4096))).isEqualTo(-1);
    }

    @Test
    void aWritePastTheRegionFailsMovesNoByteAndFlushesWhatFollows() {
        fill(memA, 3);
        int key = qpA.importRemoteKey(mrB.exportRemoteKey());
        WorkRequest bad = new WorkRequest(1).wrId(1).opcode(Opcode.RDMA_WRITE).signaled(true)
                .addSge(memA.address(), 8192, mrA.lkey()).remote(memB.address() + (1 << 20) - 4096, key);
        WorkRequest next = new WorkRequest(1).wrId(2).opcode(Opcode.RDMA_WRITE).signaled(true)
                .addSge(memA.address(), 64, mrA.lkey()).remote(memB.address(), key);
        bad.next(next);
        qpA.postSend(bad);
        await(2);
        assertThat(wcs[0].status()).as("%s then %s", wcs[0], wcs[1]).isEqualTo(WcStatus.REM_ACCESS_ERR);
        assertThat(wcs[1].status()).isEqualTo(WcStatus.WR_FLUSH_ERR);
        assertThat(qpA.state()).isEqualTo(QueuePair.State.ERROR);
        assertThat(memB.asSlice((1 << 20) - 4096, 4096).mismatch(MemorySegment.ofArray(new byte[4096]))).as("no byte moved").isEqualTo(-1);
        assertThat(memB.get(ValueLayout.JAVA_LONG, 0)).isZero();
    }

    @Test
    void aRegionWithoutTheRightIsRefusedAtTheInitiator() {
        MemoryRegion readOnly = pdB.register(memB.asSlice(0, 65536), Access.REMOTE_READ);
        int key = qpA.importRemoteKey(readOnly.exportRemoteKey());
        fill(memA, 4);
        qpA.postSend(new WorkRequest(1).wrId(3).opcode(Opcode.RDMA_WRITE).signaled(true)
                .addSge(memA.address(), 64, mrA.lkey()).remote(memB.address(), key));
        await(1);
        assertThat(wcs[0].status()).isEqualTo(WcStatus.REM_ACCESS_ERR);
        assertThat(memB.get(ValueLayout.JAVA_LONG, 0)).isZero();
        readOnly.close();
    }

    @Test
    void aRawKeyIsTheTargetsToCheckAndAHandleNeverGivenOutIsRefused() {
        fill(memA, 4);
        // The target's own rkey, sent as it is: checked there like any key (as a NIC's responder does).
        qpA.postSend(new WorkRequest(1).wrId(4).opcode(Opcode.RDMA_WRITE).signaled(true)
                .addSge(memA.address(), 64, mrA.lkey()).remote(memB.address(), mrB.rkey()));
        await(1);
        assertThat(wcs[0].status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(memB.asSlice(0, 64).mismatch(memA.asSlice(0, 64))).isEqualTo(-1);
        // A handle of this QP's table it never gave out: refused before anything is sent.
        qpA.postSend(new WorkRequest(1).wrId(5).opcode(Opcode.RDMA_WRITE).signaled(true)
                .addSge(memA.address() + 64, 64, mrA.lkey()).remote(memB.address() + 64, 0x5C00_0777));
        await(1);
        assertThat(wcs[0].status()).isEqualTo(WcStatus.REM_ACCESS_ERR);
        assertThat(memB.get(ValueLayout.JAVA_LONG, 64)).isZero();
    }

    @Test
    void aRawKeyTheTargetNeverIssuedIsRefusedThereAndBreaksTheConnection() {
        qpA.postSend(new WorkRequest(1).wrId(6).opcode(Opcode.RDMA_WRITE).signaled(true)
                .addSge(memA.address(), 64, mrA.lkey()).remote(memB.address(), mrB.rkey() ^ 0x7700));
        awaitBoth(1, 0);
        assertThat(wcs[0].status()).isEqualTo(WcStatus.REM_ACCESS_ERR);
        assertThat(memB.get(ValueLayout.JAVA_LONG, 0)).isZero();
        assertThat(qpA.state()).isEqualTo(QueuePair.State.ERROR);
        assertThat(lb.qpB.state()).as("a NAKed protection error breaks both ends").isEqualTo(QueuePair.State.ERROR);
    }

    @Test
    void aBadLocalKeyIsALocalProtectionError() {
        int key = qpA.importRemoteKey(mrB.exportRemoteKey());
        qpA.postSend(new WorkRequest(1).wrId(5).opcode(Opcode.RDMA_WRITE).signaled(true)
                .addSge(memA.address(), 64, mrA.lkey() ^ 0x100).remote(memB.address(), key));
        await(1);
        assertThat(wcs[0].status()).isEqualTo(WcStatus.LOC_PROT_ERR);
        assertThat(memB.get(ValueLayout.JAVA_LONG, 0)).isZero();
    }

    @Test
    void bytesThatAreNotAnExportedKeyAreEinvalNotACrash() {
        byte[] garbage = new byte[64];
        java.util.Arrays.fill(garbage, (byte) 0x7F);
        assertThatThrownBy(() -> qpA.importRemoteKey(garbage)).isInstanceOf(RdmaException.class)
                .satisfies(e -> assertThat(((RdmaException) e).errno()).isEqualTo(Errno.EINVAL));
        byte[] good = mrB.exportRemoteKey();
        good[good.length - 1] ^= 1;
        assertThatThrownBy(() -> qpA.importRemoteKey(good)).hasMessageContaining("checksum");
    }

    @Test
    void aSendGatheredFromThreePiecesLandsInTheReceiveAndCompletesAtBothEnds() {
        fill(memA, 5);
        QueuePair qpB = idB.qp();
        qpB.postRecv(new WorkRequest(1).wrId(90).addSge(memB.address() + 65536, 200_000, mrB.lkey()));
        qpA.postSend(new WorkRequest(3).wrId(9).opcode(Opcode.SEND).signaled(true)
                .addSge(memA.address(), 100, mrA.lkey()).addSge(memA.address() + 4096, 70_000, mrA.lkey())
                .addSge(memA.address() + 100_000, 7, mrA.lkey()));
        awaitBoth(1, 1);
        assertThat(wcs[0].status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(wcs[0].wrId()).isEqualTo(9);
        WorkCompletion recv = atB.get(0);
        assertThat(recv.status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(recv.wrId()).isEqualTo(90);
        assertThat(recv.opcode()).isEqualTo(Opcode.RECV);
        assertThat(recv.byteLen()).isEqualTo(70_107);
        assertThat(memB.asSlice(65536, 100).mismatch(memA.asSlice(0, 100))).isEqualTo(-1);
        assertThat(memB.asSlice(65636, 70_000).mismatch(memA.asSlice(4096, 70_000))).isEqualTo(-1);
        assertThat(memB.asSlice(135_636, 7).mismatch(memA.asSlice(100_000, 7))).isEqualTo(-1);
        assertThat(memB.asSlice(135_643, 64).mismatch(MemorySegment.ofArray(new byte[64]))).as("nothing past the message").isEqualTo(-1);
    }

    @Test
    void aSendWithNoReceivePostedIsAnRnrError() {
        qpA.postSend(new WorkRequest(1).wrId(10).opcode(Opcode.SEND).signaled(true).addSge(memA.address(), 64, mrA.lkey()));
        await(1);
        assertThat(wcs[0].status()).isEqualTo(WcStatus.RNR_RETRY_EXC_ERR);
        assertThat(qpA.state()).isEqualTo(QueuePair.State.ERROR);
    }

    @Test
    void aSendLongerThanTheReceiveFailsAtBothEndsAndPlacesNothing() {
        fill(memA, 6);
        idB.qp().postRecv(new WorkRequest(1).wrId(91).addSge(memB.address(), 100, mrB.lkey()));
        qpA.postSend(new WorkRequest(1).wrId(11).opcode(Opcode.SEND).signaled(true).addSge(memA.address(), 101, mrA.lkey()));
        awaitBoth(1, 1);
        assertThat(wcs[0].status()).isEqualTo(WcStatus.REM_INV_REQ_ERR);
        assertThat(atB.get(0).status()).isEqualTo(WcStatus.LOC_LEN_ERR);
        assertThat(memB.asSlice(0, 128).mismatch(MemorySegment.ofArray(new byte[128]))).isEqualTo(-1);
    }

    @Test
    void aWriteWithImmediatePlacesItsBytesAndConsumesAReceiveWithTheImmediate() {
        fill(memA, 7);
        int key = qpA.importRemoteKey(mrB.exportRemoteKey());
        idB.qp().postRecv(new WorkRequest(1).wrId(92)); // no bytes: the immediate only
        qpA.postSend(new WorkRequest(1).wrId(12).opcode(Opcode.RDMA_WRITE_WITH_IMM).immData(0xC0FFEE).signaled(true)
                .addSge(memA.address(), 8192, mrA.lkey()).remote(memB.address() + 32768, key));
        awaitBoth(1, 1);
        assertThat(wcs[0].status()).isEqualTo(WcStatus.SUCCESS);
        WorkCompletion recv = atB.get(0);
        assertThat(recv.status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(recv.opcode()).isEqualTo(Opcode.RECV_RDMA_WITH_IMM);
        assertThat(recv.withImm()).isTrue();
        assertThat(recv.immData()).isEqualTo(0xC0FFEE);
        assertThat(memB.asSlice(32768, 8192).mismatch(memA.asSlice(0, 8192))).isEqualTo(-1);
    }

    @Test
    void aSendPostedAfterWritesArrivesAfterTheirBytes() {
        fill(memA, 8);
        int key = qpA.importRemoteKey(mrB.exportRemoteKey());
        idB.qp().postRecv(new WorkRequest(1).wrId(93).addSge(memB.address() + 900_000, 64, mrB.lkey()));
        WorkRequest w = new WorkRequest(1);
        for (int i = 0; i < 8; i++) {
            w.reset().wrId(100 + i).opcode(Opcode.RDMA_WRITE).signaled(false).addSge(memA.address() + i * 65536L, 65536, mrA.lkey())
                    .remote(memB.address() + i * 65536L, key);
            qpA.postSend(w);
        }
        qpA.postSend(new WorkRequest(1).wrId(13).opcode(Opcode.SEND).signaled(true).addSge(memA.address(), 64, mrA.lkey()));
        // When B sees the message, every byte written before it must be there already.
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (atB.isEmpty()) {
            WorkCompletion b = new WorkCompletion();
            if (cqB.poll(new WorkCompletion[] {b}) == 1) {
                atB.add(b);
                assertThat(memB.asSlice(0, 8 * 65536).mismatch(memA.asSlice(0, 8 * 65536))).as("the WRITEs' bytes").isEqualTo(-1);
            }
            cqA.poll(new WorkCompletion[] {wcs[0]});
            assertThat(System.nanoTime()).isLessThan(deadline);
        }
        assertThat(atB.get(0).status()).isEqualTo(WcStatus.SUCCESS);
    }

    @Test
    void aKeyWhoseRegionWasDeregisteredAndItsMemoryFreedFailsAtTheTargetAndTouchesNothing() {
        Arena gone = Arena.ofShared();
        MemorySegment target = gone.allocate(65536, 4096);
        MemoryRegion mr = pdB.register(target, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ);
        int key = qpA.importRemoteKey(mr.exportRemoteKey()); // the envelope says: writable, 64 KiB
        long address = target.address();
        mr.close();
        gone.close(); // unmapped: a byte written there now would crash the process
        fill(memA, 9);
        qpA.postSend(new WorkRequest(1).wrId(20).opcode(Opcode.RDMA_WRITE).signaled(true)
                .addSge(memA.address(), 4096, mrA.lkey()).remote(address, key));
        awaitBoth(1, 0);
        assertThat(wcs[0].status()).as("checked by the target against its own tables").isEqualTo(WcStatus.REM_ACCESS_ERR);
        assertThat(qpA.state()).isEqualTo(QueuePair.State.ERROR);
    }

    @Test
    void aRevokedRegionRefusesWritesAndReadsAtTheTarget() {
        MemoryRegion mr = pdB.register(memB.asSlice(0, 65536), Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ);
        int key = qpA.importRemoteKey(mr.exportRemoteKey());
        mr.revoke();
        qpA.postSend(new WorkRequest(1).wrId(21).opcode(Opcode.RDMA_READ).signaled(true)
                .addSge(memA.address(), 4096, mrA.lkey()).remote(memB.address(), key));
        awaitBoth(1, 0);
        assertThat(wcs[0].status()).isEqualTo(WcStatus.REM_ACCESS_ERR);
        mr.close();
    }

    @Test
    void aReadOfManyPiecesBringsEveryByteBack() {
        fill(memB, 10);
        int key = qpA.importRemoteKey(mrB.exportRemoteKey());
        qpA.postSend(new WorkRequest(3).wrId(22).opcode(Opcode.RDMA_READ).signaled(true)
                .addSge(memA.address(), 3000, mrA.lkey()).addSge(memA.address() + 100_000, 300_000, mrA.lkey())
                .addSge(memA.address() + 500_000, 1, mrA.lkey()).remote(memB.address() + 17, key));
        awaitBoth(1, 0);
        assertThat(wcs[0].status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(wcs[0].byteLen()).isEqualTo(303_001);
        assertThat(memA.asSlice(0, 3000).mismatch(memB.asSlice(17, 3000))).isEqualTo(-1);
        assertThat(memA.asSlice(100_000, 300_000).mismatch(memB.asSlice(3017, 300_000))).isEqualTo(-1);
        assertThat(memA.get(ValueLayout.JAVA_BYTE, 500_000)).isEqualTo(memB.get(ValueLayout.JAVA_BYTE, 303_017));
    }

    /** Lines of /proc/self/maps: every mapping this process holds. */
    private static long mappings() throws java.io.IOException {
        try (var lines = java.nio.file.Files.lines(java.nio.file.Path.of("/proc/self/maps"))) {
            return lines.count();
        }
    }

    @org.junit.jupiter.params.ParameterizedTest
    @org.junit.jupiter.params.provider.ValueSource(booleans = {false, true})
    void reconnectingManyTimesLeavesNoMappingsBehind(boolean breakEachConnection) throws Exception {
        lb.close(); // this test makes its own connections on the same two devices
        lb = null;
        try (Arena arena = Arena.ofShared();
             io.regmem.registration.RdmaDevice a = io.regmem.registration.RdmaDevice.open("ucx");
             io.regmem.registration.RdmaDevice b = io.regmem.registration.RdmaDevice.open("ucx")) {
            MemorySegment memory = arena.allocate(8192, 4096);
            ProtectionDomain pa = a.allocPd();
            ProtectionDomain pb = b.allocPd();
            CompletionQueue ca = a.createCq(16);
            CompletionQueue cb = b.createCq(16);
            CmId listener = b.createCmId();
            String address = Providers.address("ucx", "reconnect");
            listener.listen(address);
            long before = 0;
            for (int round = 0; round < 300; round++) {
                if (round == 50) {
                    before = mappings(); // after the first connections settled whatever UCX keeps per worker
                }
                CmId ia = a.createCmId();
                ia.createQp(pa, QpInitAttributes.of(ca));
                ia.connect(address);
                CmId ib = listener.getRequest();
                ib.createQp(pb, QpInitAttributes.of(cb));
                ib.accept();
                { // a WRITE of 4 KiB through B's key, or (breaking the connection) past its region
                    MemoryRegion target = pb.register(memory.asSlice(0, 4096), Access.LOCAL_WRITE, Access.REMOTE_WRITE);
                    MemoryRegion source = pa.register(memory.asSlice(4096, 4096), Access.LOCAL_WRITE);
                    int key = ia.qp().importRemoteKey(target.exportRemoteKey());
                    ia.qp().postSend(new WorkRequest(1).wrId(1).opcode(Opcode.RDMA_WRITE).signaled(true)
                            .addSge(source.address(), 4096, source.lkey())
                            .remote(memory.address() + (breakEachConnection ? 1 : 0), key));
                    WorkCompletion[] one = {new WorkCompletion()};
                    long deadline = System.nanoTime() + 10_000_000_000L;
                    while (ca.poll(one) == 0) {
                        cb.poll(one);
                        assertThat(System.nanoTime()).isLessThan(deadline);
                    }
                    assertThat(one[0].status()).isEqualTo(breakEachConnection ? WcStatus.REM_ACCESS_ERR : WcStatus.SUCCESS);
                    target.close();
                    source.close();
                }
                ia.disconnect();
                ia.destroyQp();
                ib.destroyQp();
                ia.close();
                ib.close();
            }
            long after = mappings();
            assertThat(after - before).as("mappings added by 250 connections (%d before)", before).isLessThan(100);
            listener.close();
            ca.close();
            cb.close();
            pa.close();
            pb.close();
        }
    }

    @Test
    void registeringManyTimesLeavesNoMappingsBehind() throws Exception {
        MemorySegment piece = memB.asSlice(4096, 8192);
        long before = 0;
        for (int round = 0; round < 500; round++) {
            if (round == 50) {
                before = mappings();
            }
            MemoryRegion mr = pdB.register(piece, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
            qpA.importRemoteKey(mr.exportRemoteKey());
            mr.close();
        }
        assertThat(mappings() - before).as("mappings added by 450 registrations").isLessThan(100);
    }

    /**
     * A peer whose rendezvous WRITE offers memory it took away after posting (a stand-in for a hostile
     * or dying process: the bounce buffer of A's QP is memory the test maps, then protects from any
     * access, as if unmapped): B's
     * pull over shared memory ({@code process_vm_readv}) fails. Nothing aborts; the WRITE fails, moves
     * no byte, and the connection breaks.
     */
    @Test
    void aRendezvousOfMemoryUnmappedUnderItFailsTheWriteAndMovesNoByte() throws Throwable {
        int length = 512 << 10;
        int key = qpA.importRemoteKey(mrB.exportRemoteKey());
        memB.fill((byte) 0x5A);
        memA.fill((byte) 0x77);
        MemorySegment bounce = UcxPeerMain.mapAnonymous(length);
        qpA.unwrap(UcxQp.class).staging.give(bounce); // the next bounce buffer of that size
        qpA.postSend(new WorkRequest(1).wrId(1).opcode(Opcode.RDMA_WRITE).signaled(true)
                .addSge(memA.address(), length, mrA.lkey()).remote(memB.address(), key));
        UcxPeerMain.protectNone(bounce); // before B saw the offer: B did not progress since the post
        WorkCompletion[] one = {new WorkCompletion()};
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (cqA.poll(one) == 0) {
            cqB.poll(new WorkCompletion[] {new WorkCompletion()});
            assertThat(System.nanoTime()).as("the WRITE completes within 10 s").isLessThan(deadline);
        }
        assertThat(one[0].status()).isIn(WcStatus.RETRY_EXC_ERR, WcStatus.WR_FLUSH_ERR, WcStatus.REM_OP_ERR);
        for (long k = 0; k < length; k += 509) {
            assertThat(memB.get(ValueLayout.JAVA_BYTE, k)).as("B's byte %d", k).isEqualTo((byte) 0x5A);
        }
        assertThat(lb.qpB.state()).isEqualTo(QueuePair.State.ERROR);
        lb.close(); // (UCX holds nothing of the bounce buffer once both devices closed)
        lb = null;
        UcxPeerMain.unmap(bounce);
    }

    @Test
    void aPeerDeviceClosingMidTransferFailsWhatIsLeftAndANewPeerWorks() {
        int key = qpA.importRemoteKey(mrB.exportRemoteKey());
        int posted = 32;
        for (int i = 0; i < posted; i++) {
            qpA.postSend(new WorkRequest(1).wrId(100 + i).opcode(Opcode.RDMA_WRITE).signaled(true)
                    .addSge(memA.address() + i * 4096L, 4096, mrA.lkey()).remote(memB.address() + i * 4096L, key));
        }
        lb.devB.forceClose(); // its QP, MRs, worker and endpoints go while A's requests are under way
        int got = 0;
        long deadline = System.nanoTime() + 10_000_000_000L;
        WorkCompletion[] one = {new WorkCompletion()};
        java.util.Set<WcStatus> seen = java.util.EnumSet.noneOf(WcStatus.class);
        while (got < posted) {
            if (cqA.poll(one) == 1) {
                assertThat(one[0].wrId()).isEqualTo(100 + got);
                seen.add(one[0].status());
                got++;
            }
            assertThat(System.nanoTime()).as("every request completes within 10 s (got %d)", got).isLessThan(deadline);
        }
        assertThat(seen).isSubsetOf(WcStatus.SUCCESS, WcStatus.RETRY_EXC_ERR, WcStatus.WR_FLUSH_ERR);
        assertThat(qpA.state()).isEqualTo(QueuePair.State.ERROR);
        lb.idA.destroyQp();

        try (io.regmem.registration.RdmaDevice c = io.regmem.registration.RdmaDevice.open("ucx")) {
            ProtectionDomain pc = c.allocPd();
            CompletionQueue cc = c.createCq(16);
            CmId listener = c.createCmId();
            String address = Providers.address("ucx", "after");
            listener.listen(address);
            CmId ia = lb.devA.createCmId();
            QueuePair qa = ia.createQp(pdA, QpInitAttributes.of(cqA));
            ia.connect(address);
            CmId ic = listener.getRequest();
            ic.createQp(pc, QpInitAttributes.of(cc));
            ic.accept();
            MemoryRegion mrC = pc.register(memB.asSlice(0, 4096), Access.LOCAL_WRITE, Access.REMOTE_WRITE);
            fill(memA.asSlice(0, 4096), 3);
            qa.postSend(new WorkRequest(1).wrId(7).opcode(Opcode.RDMA_WRITE).signaled(true)
                    .addSge(memA.address(), 4096, mrA.lkey()).remote(mrC.address(), qa.importRemoteKey(mrC.exportRemoteKey())));
            while (cqA.poll(one) == 0) {
                cc.poll(new WorkCompletion[] {new WorkCompletion()});
                assertThat(System.nanoTime()).isLessThan(deadline + 10_000_000_000L);
            }
            assertThat(one[0].status()).isEqualTo(WcStatus.SUCCESS);
            assertThat(memB.asSlice(0, 4096).mismatch(memA.asSlice(0, 4096))).isEqualTo(-1);
            ia.disconnect();
            ia.destroyQp();
            ic.destroyQp();
            ia.close();
            ic.close();
            listener.close();
            mrC.close();
            cc.close();
            pc.close();
        }
        mrA.close();
        lb.arena.close();
        lb.idA.close();
        lb.cqA.close();
        lb.pdA.close();
        lb.devA.close();
        lb = null;
    }

    @Test
    void fourByteKeysImportAsThemselvesAndOnlyATagLookalikeTakesAnEntry() {
        byte[] k = new byte[4];
        for (int i = 0; i < 100_000; i++) { // an RPC's fresh fast-reg key per call: nothing grows
            int rkey = (i << 8) | 0x11;
            MemorySegment.ofArray(k).set(UcxKeyTable.BE_INT, 0, rkey); // exported keys are big-endian
            assertThat(qpA.importRemoteKey(k)).isEqualTo(rkey);
        }
        int lookalike = 0x5C00_0101; // the top byte of this QP's handles: an entry of the table names it
        MemorySegment.ofArray(k).set(UcxKeyTable.BE_INT, 0, lookalike);
        int handle = qpA.importRemoteKey(k);
        assertThat(handle).isNotEqualTo(lookalike).isEqualTo(qpA.importRemoteKey(k));
        int envelope = qpA.importRemoteKey(mrB.exportRemoteKey());
        assertThat(envelope).isNotEqualTo(handle).isNotEqualTo(mrB.rkey());
    }
}
