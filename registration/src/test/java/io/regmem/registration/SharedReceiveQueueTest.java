package io.regmem.registration;

import static io.regmem.registration.ObjectModelTest.assertRdma;
import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.Errno;
import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.Providers;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Shared receive queues ({@code ibv_create_srq}, {@code ibv_post_srq_recv}, {@code ibv_modify_srq}):
 * one receive queue serving several connections' QPs, each message taking the oldest receive posted,
 * its completion on the taking QP's CQ naming that QP; slots freed when completions are polled; the
 * limit event; errors that flush only what a QP took; the object rules (same PD, EBUSY while used).
 */
@ExtendWith(NoLeaks.class)
class SharedReceiveQueueTest {
    private static int names;
    private static final int CONNECTIONS = 3;
    private static final int SLOT = 256;

    private final Arena arena = Arena.ofShared();
    private final MemorySegment memA = arena.allocate(1 << 16, 4096);
    private final MemorySegment memB = arena.allocate(1 << 20, 4096);
    private final RdmaDevice devA = Providers.open();
    private final RdmaDevice devB = Providers.open();
    private final ProtectionDomain pdA = devA.allocPd();
    private final ProtectionDomain pdB = devB.allocPd();
    private final CompletionQueue cqA = devA.createCq(1024);
    private final CompletionQueue cqB = devB.createCq(1024);
    private final SharedReceiveQueue srq = pdB.createSrq(64, 2);
    private final MemoryRegion srcA = pdA.register(memA, Access.LOCAL_WRITE);
    private final MemoryRegion sinkB = pdB.register(memB, Access.LOCAL_WRITE);
    private final CmId listener = devB.createCmId();
    private final List<CmId> clients = new ArrayList<>();
    private final List<CmId> servers = new ArrayList<>();
    private final WorkCompletion[] wcs = new WorkCompletion[64];
    private final WorkCompletion[] one = {new WorkCompletion()};
    private final WorkCompletion[] none = new WorkCompletion[0];
    private final WorkRequest wr = new WorkRequest(2);
    private final String address = Providers.address("srq-" + (++names));

    SharedReceiveQueueTest() {
        for (int i = 0; i < wcs.length; i++) {
            wcs[i] = new WorkCompletion();
        }
        listener.listen(address);
        for (int i = 0; i < CONNECTIONS; i++) {
            connect(0);
        }
    }

    /** One more connection whose server QP uses the SRQ; its client QP retries RNR {@code rnrRetry} times. */
    private void connect(int rnrRetry) {
        CmId a = devA.createCmId();
        clients.add(a);
        a.createQp(pdA, QpInitAttributes.of(cqA).maxSendWr(256).rnrRetry(rnrRetry).minRnrTimer(1));
        a.connect(address);
        CmId b = Providers.awaitRequest(listener);
        servers.add(b);
        b.createQp(pdB, QpInitAttributes.of(cqB).srq(srq).maxSendWr(16));
        b.accept();
        assertThat(a.qp().state()).isEqualTo(QueuePair.State.RTS);
    }

    @AfterEach
    void tearDown() {
        for (CmId id : clients) {
            id.disconnect();
        }
        for (List<CmId> ids : List.of(clients, servers)) {
            for (CmId id : ids) {
                if (id.qp() != null) {
                    id.destroyQp();
                }
                id.close();
            }
        }
        listener.close();
        srq.close();
        srcA.close();
        sinkB.close();
        cqA.close();
        cqB.close();
        pdA.close();
        pdB.close();
        devA.close();
        devB.close();
        arena.close();
    }

    private QueuePair client(int i) {
        return clients.get(i).qp();
    }

    private QueuePair server(int i) {
        return servers.get(i).qp();
    }

    /** Posts {@code n} receives of SLOT bytes each to the SRQ, wrIds {@code firstId..}, buffers from {@code firstSlot}. */
    private void postReceives(int firstId, int firstSlot, int n) {
        WorkRequest head = null;
        WorkRequest prev = null;
        for (int k = 0; k < n; k++) {
            WorkRequest r = new WorkRequest(1).wrId(firstId + k)
                    .addSge(memB.address() + (long) (firstSlot + k) * SLOT, SLOT, sinkB.lkey());
            if (prev == null) {
                head = r;
            } else {
                prev.next(r);
            }
            prev = r;
        }
        srq.postRecv(head);
    }

    /** Connection {@code i} sends {@code bytes} bytes, each {@code fill}. */
    private void send(int i, long wrId, int bytes, byte fill) {
        MemorySegment src = memA.asSlice((long) i * 4096, bytes);
        src.fill(fill);
        client(i).postSend(wr.reset().wrId(wrId).opcode(Opcode.SEND).signaled(true).addSge(src.address(), bytes, srcA.lkey()));
    }

    /** Polls {@code cq} (progressing the other) until it yields a completion; returns a copy. */
    private WorkCompletion await(CompletionQueue cq, CompletionQueue other) {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (cq.poll(one) == 0) {
            other.poll(none);
            assertThat(System.nanoTime()).as("a completion on %s within 10 s", cq).isLessThan(deadline);
        }
        return one[0];
    }

    private record Seen(long wrId, WcStatus status, long bytes, QueuePair qp) {
    }

    private Seen awaitRecv() {
        WorkCompletion wc = await(cqB, cqA);
        return new Seen(wc.wrId(), wc.status(), wc.byteLen(), wc.qp());
    }

    @Test
    void threeConnectionsTakeTheOldestReceiveOfOneQueueEachCompletionNamingItsQp() {
        postReceives(100, 0, 6);
        assertThat(srq.queued()).isEqualTo(6);
        assertThat(srq.outstandingRecvs()).isEqualTo(6);
        int[] order = {2, 0, 1, 1, 2, 0};
        for (int k = 0; k < order.length; k++) {
            send(order[k], k, 10 + k, (byte) (k + 1));
            Seen recv = awaitRecv();
            assertThat(recv.status()).isEqualTo(WcStatus.SUCCESS);
            assertThat(recv.wrId()).as("message %d takes the oldest receive", k).isEqualTo(100 + k);
            assertThat(recv.bytes()).isEqualTo(10 + k);
            assertThat(recv.qp()).as("the completion names the QP that took it").isSameAs(server(order[k]));
            assertThat(memB.get(ValueLayout.JAVA_BYTE, (long) k * SLOT + 9 + k)).isEqualTo((byte) (k + 1));
            assertThat(memB.get(ValueLayout.JAVA_BYTE, (long) k * SLOT + 10 + k)).as("nothing past the message").isZero();
            assertThat(await(cqA, cqB).status()).isEqualTo(WcStatus.SUCCESS);
        }
        assertThat(srq.queued()).isZero();
        assertThat(srq.outstandingRecvs()).as("every completion was polled: every slot is free").isZero();
        assertThat(srq.taken()).isEqualTo(6);
        assertThat(server(0).outstandingRecvs()).isZero();
        assertRdma(() -> server(0).postRecv(new WorkRequest(1).addSge(memB.address(), 8, sinkB.lkey())), Errno.EINVAL,
                "post them to the SRQ");
        assertThat(server(0).srq()).isSameAs(srq);
    }

    @Test
    void aSlotIsFreedWhenItsCompletionIsPolledAndAFullQueueRefusesAWholeChain() {
        SharedReceiveQueue small = pdB.createSrq(4, 1);
        try {
            WorkRequest chain = new WorkRequest(1).addSge(memB.address(), 8, sinkB.lkey());
            WorkRequest tail = chain;
            for (int k = 1; k < 5; k++) {
                WorkRequest r = new WorkRequest(1).wrId(k).addSge(memB.address() + 8L * k, 8, sinkB.lkey());
                tail.next(r);
                tail = r;
            }
            assertRdma(() -> small.postRecv(chain), Errno.ENOMEM, "shared receive queue full (maxWr 4", "bad WR index 4");
            assertThat(small.queued()).as("nothing of a refused chain is posted").isZero();
            assertRdma(() -> small.postRecv(new WorkRequest(2).addSge(memB.address(), 8, sinkB.lkey())
                    .addSge(memB.address() + 8, 8, sinkB.lkey())), Errno.EINVAL, "exceed maxSge 1");
            assertRdma(() -> small.postRecv(new WorkRequest(1).addSge(memB.address(), -1, sinkB.lkey())), Errno.EINVAL,
                    "negative length");
            small.postRecv(new WorkRequest(1).addSge(memB.address(), 8, sinkB.lkey()));
            assertThat(small.outstandingRecvs()).isEqualTo(1);
        } finally {
            small.close();
        }
        // the fixture's SRQ: fill it, consume one, and the slot comes back only once its completion is polled
        postReceives(0, 0, 64);
        assertRdma(() -> postReceives(64, 64, 1), Errno.ENOMEM, "full");
        send(0, 1, 8, (byte) 1);
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (srq.queued() == 64) { // progress both without taking B's completion: it waits unpolled
            cqA.poll(none);
            cqB.poll(none);
            assertThat(System.nanoTime()).isLessThan(deadline);
            Thread.onSpinWait();
        }
        assertThat(await(cqA, cqB).status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(srq.outstandingRecvs()).as("taken, completion not yet polled").isEqualTo(64);
        assertRdma(() -> postReceives(64, 64, 1), Errno.ENOMEM, "full");
        assertThat(awaitRecv().wrId()).isZero();
        assertThat(srq.outstandingRecvs()).isEqualTo(63);
        postReceives(64, 64, 1);
    }

    @Test
    void theLimitEventFiresOnceWhenATakeLeavesFewerQueuedThanTheLimit() {
        assertThat(devB.pollAsyncEvent()).isNull();
        postReceives(0, 0, 4);
        assertRdma(() -> srq.armLimit(65), Errno.EINVAL, "srq limit 65 is outside [0, maxWr 64]");
        assertRdma(() -> srq.armLimit(-1), Errno.EINVAL);
        srq.armLimit(2);
        assertThat(srq.limit()).isEqualTo(2);
        for (int k = 0; k < 2; k++) { // 3 left, then 2 left: not below 2
            send(k, k, 8, (byte) 1);
            awaitRecv();
            await(cqA, cqB);
        }
        assertThat(devB.pollAsyncEvent()).isNull();
        assertThat(srq.limit()).isEqualTo(2);
        send(2, 2, 8, (byte) 1); // 1 left
        awaitRecv();
        await(cqA, cqB);
        AsyncEvent e = devB.pollAsyncEvent();
        assertThat(e).isNotNull();
        assertThat(e.type()).isEqualTo(AsyncEvent.Type.SRQ_LIMIT_REACHED);
        assertThat(e.resource()).isSameAs(srq);
        assertThat(e.description()).contains("1 receive(s) left queued");
        assertThat(srq.limit()).as("the event disarms the limit").isZero();
        send(0, 3, 8, (byte) 1); // 0 left: disarmed, no second event
        awaitRecv();
        await(cqA, cqB);
        assertThat(devB.pollAsyncEvent()).isNull();
    }

    @Test
    void aFailedReceiveErrorsOnlyItsQpAndTheQueuedReceivesServeTheOthers() {
        postReceives(0, 0, 3);
        send(1, 1, SLOT + 1, (byte) 7); // larger than the receive it takes: LOC_LEN_ERR at B, B's QP 1 fails
        Seen failed = awaitRecv();
        assertThat(failed.status()).isEqualTo(WcStatus.LOC_LEN_ERR);
        assertThat(failed.wrId()).isZero();
        assertThat(failed.qp()).isSameAs(server(1));
        assertThat(await(cqA, cqB).status()).isNotEqualTo(WcStatus.SUCCESS);
        assertThat(server(1).state()).isEqualTo(QueuePair.State.ERROR);
        assertThat(srq.queued()).as("the QP's failure flushed none of the SRQ's queued receives").isEqualTo(2);
        AsyncEvent last = null;
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (last == null) { // raised when the QP's flush runs (at its next progress)
            cqB.poll(none);
            last = devB.pollAsyncEvent();
            assertThat(System.nanoTime()).isLessThan(deadline);
        }
        assertThat(last.type()).isEqualTo(AsyncEvent.Type.QP_LAST_WQE_REACHED);
        assertThat(last.resource()).isSameAs(server(1));
        send(2, 2, 16, (byte) 3);
        Seen ok = awaitRecv();
        assertThat(ok.status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(ok.wrId()).isEqualTo(1);
        assertThat(ok.qp()).isSameAs(server(2));
        assertThat(await(cqA, cqB).status()).isEqualTo(WcStatus.SUCCESS);
        server(0).drain(); // drained with nothing taken: only the event
        assertThat(srq.queued()).isEqualTo(1);
        assertThat(devB.pollAsyncEvent().type()).isEqualTo(AsyncEvent.Type.QP_LAST_WQE_REACHED);
        assertThat(cqB.poll(wcs)).as("a QP holding no receive flushes none").isZero();
    }

    @Test
    void aSendThatFindsTheQueueEmptyWaitsUnderRnrRetryUntilAReceiveIsPosted() {
        connect(7);
        int i = CONNECTIONS;
        send(i, 9, 32, (byte) 5);
        for (int k = 0; k < 20; k++) { // the receiver finds no receive: the message waits
            cqB.poll(none);
            assertThat(cqA.poll(one)).as("no completion while no receive is posted").isZero();
        }
        postReceives(40, 40, 1);
        Seen recv = awaitRecv();
        assertThat(recv.status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(recv.wrId()).isEqualTo(40);
        assertThat(recv.qp()).isSameAs(server(i));
        assertThat(await(cqA, cqB).status()).isEqualTo(WcStatus.SUCCESS);
    }

    /**
     * A receive a QP took and had not completed when it was destroyed goes back to the front of the
     * SRQ, for the next message of any connection (soft: the target's flush waits for a poll of its
     * CQ, so the destroy comes first).
     */
    @Test
    @Tag("soft-only")
    void aReceiveHeldByADestroyedQpGoesBackToTheFrontOfTheQueue() {
        postReceives(10, 0, 2);
        client(0).postSend(wr.reset().wrId(1).opcode(Opcode.SEND_WITH_INV).invalidateRkey(0x1234).signaled(true));
        assertThat(await(cqA, cqB).status()).isEqualTo(WcStatus.REM_INV_REQ_ERR);
        assertThat(srq.queued()).as("B's QP took the receive before it found no window to invalidate").isEqualTo(1);
        servers.get(0).destroyQp();
        assertThat(srq.queued()).isEqualTo(2);
        assertThat(srq.useCount()).isEqualTo(CONNECTIONS - 1);
        send(1, 2, 8, (byte) 1);
        Seen recv = awaitRecv();
        assertThat(recv.wrId()).isEqualTo(10);
        assertThat(recv.qp()).isSameAs(server(1));
        assertThat(cqB.poll(wcs)).as("the destroyed QP's receive made no completion").isZero();
        await(cqA, cqB);
    }

    /** A WRITE (retrying RNR or not) takes no receive: the next SEND, on any connection, gets the oldest. */
    @Test
    void aRequestThatConsumesNoReceiveTakesNoneFromTheQueue() {
        connect(7);
        int i = CONNECTIONS;
        MemoryRegion target = pdB.register(memB.asSlice(1 << 19, 4096), Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        try {
            postReceives(10, 0, 2);
            int key = Providers.key(client(i), target);
            MemorySegment src = memA.asSlice(0, 64);
            src.fill((byte) 9);
            client(i).postSend(wr.reset().wrId(1).opcode(Opcode.RDMA_WRITE).signaled(true)
                    .addSge(src.address(), 64, srcA.lkey()).remote(target.address(), key));
            assertThat(await(cqA, cqB).status()).isEqualTo(WcStatus.SUCCESS);
            assertThat(memB.get(ValueLayout.JAVA_BYTE, (1 << 19) + 63)).isEqualTo((byte) 9);
            assertThat(srq.queued()).as("the WRITE took no receive").isEqualTo(2);
            assertThat(srq.taken()).isZero();
            send(0, 2, 8, (byte) 1);
            Seen recv = awaitRecv();
            assertThat(recv.wrId()).as("the oldest receive is still the SRQ's").isEqualTo(10);
            assertThat(recv.qp()).isSameAs(server(0));
            await(cqA, cqB);
            send(i, 3, 8, (byte) 1);
            assertThat(awaitRecv().qp()).isSameAs(server(i));
            await(cqA, cqB);
        } finally {
            target.close();
        }
    }

    /**
     * Two client threads send 400 messages each over three connections while the server thread posts
     * receives to the SRQ in small batches and polls one CQ: every message lands once, in a receive
     * of its own, and no slot is lost.
     */
    @Test
    void messagesFromConcurrentSendersEachTakeOneReceiveAndNoSlotIsLost() throws Exception {
        for (int i = 0; i < CONNECTIONS; i++) {
            connect(7); // connections 3..5 wait for receives instead of failing
        }
        int perSender = 400;
        AtomicReference<Throwable> failure = new AtomicReference<>();
        List<Thread> senders = new ArrayList<>();
        for (int t = 0; t < 2; t++) {
            int thread = t;
            senders.add(Thread.ofPlatform().start(() -> sendMany(thread, perSender, failure)));
        }
        BitSet seen = new BitSet();
        BitSet slotsInUse = new BitSet();
        int posted = 0;
        int received = 0;
        long deadline = System.nanoTime() + 60_000_000_000L;
        WorkCompletion[] batch = new WorkCompletion[16];
        for (int k = 0; k < batch.length; k++) {
            batch[k] = new WorkCompletion();
        }
        List<QueuePair> threadQps = List.of(server(3), server(4), server(5));
        while (received < 2 * perSender && failure.get() == null) {
            assertThat(System.nanoTime()).as("every message within 60 s (%d received)", received).isLessThan(deadline);
            int slot = slotsInUse.nextClearBit(0);
            if (srq.queued() < 8 && posted < 2 * perSender && slot < 64) {
                slotsInUse.set(slot);
                srq.postRecv(new WorkRequest(1).wrId(slot).addSge(memB.address() + (long) slot * SLOT, SLOT, sinkB.lkey()));
                posted++;
            }
            int n = cqB.poll(batch);
            for (int k = 0; k < n; k++) {
                WorkCompletion wc = batch[k];
                assertThat(wc.status()).isEqualTo(WcStatus.SUCCESS);
                assertThat(threadQps).as("a message of the threads' connections").contains(wc.qp());
                int used = (int) wc.wrId();
                long tag = memB.get(ValueLayout.JAVA_LONG_UNALIGNED, (long) used * SLOT);
                assertThat(seen.get((int) tag)).as("message %d received twice", tag).isFalse();
                seen.set((int) tag);
                slotsInUse.clear(used);
                received++;
            }
        }
        for (Thread t : senders) {
            t.join(60_000);
        }
        assertThat(failure.get()).isNull();
        assertThat(seen.cardinality()).isEqualTo(2 * perSender);
        assertThat(srq.outstandingRecvs()).as("no slot lost").isZero();
        assertThat(srq.taken()).isEqualTo(2 * perSender);
    }

    /** Thread {@code t} sends {@code n} tagged messages, alternating over the connections it owns. */
    private void sendMany(int t, int n, AtomicReference<Throwable> failure) {
        try {
            WorkRequest w = new WorkRequest(1);
            WorkCompletion[] mine = {new WorkCompletion()};
            for (int k = 0; k < n; k++) {
                int conn = CONNECTIONS + (t == 0 ? 0 : 1 + (k & 1));
                MemorySegment src = memA.asSlice(8L * (t * n + k), 8); // never reused: completions are shared
                src.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, (long) t * n + k);
                client(conn).postSend(w.reset().wrId(k).opcode(Opcode.SEND).signaled(true)
                        .addSge(src.address(), 8, srcA.lkey()));
                long deadline = System.nanoTime() + 30_000_000_000L;
                while (true) {
                    int got;
                    synchronized (cqA) {
                        got = cqA.poll(mine);
                    }
                    if (got == 1) {
                        assertThat(mine[0].status()).isEqualTo(WcStatus.SUCCESS);
                        break;
                    }
                    if (System.nanoTime() > deadline) {
                        throw new AssertionError("no send completion within 30 s");
                    }
                    Thread.onSpinWait();
                }
            }
        } catch (Throwable e) {
            failure.compareAndSet(null, e);
        }
    }

    @Test
    void theObjectRulesHold() {
        assertRdma(() -> pdB.createSrq(0, 1), Errno.EINVAL, "createSrq(maxWr 0");
        assertRdma(() -> pdB.createSrq(4, 0), Errno.EINVAL);
        assertRdma(() -> pdB.createSrq(devB.attributes().maxQpWr() + 1, 1), Errno.EINVAL);
        assertRdma(srq::close, Errno.EBUSY, "queue pair(s) using it");
        assertThat(srq.useCount()).isEqualTo(CONNECTIONS);
        ProtectionDomain other = devB.allocPd();
        SharedReceiveQueue foreign = other.createSrq(4, 1);
        assertRdma(other::close, Errno.EBUSY, "shared receive queue(s)");
        CmId id = devB.createCmId();
        assertRdma(() -> id.createQp(pdB, QpInitAttributes.of(cqB).srq(foreign)), Errno.EINVAL, "of its own PD");
        assertThat(id.qp()).isNull();
        foreign.close();
        assertRdma(foreign::close, Errno.EBADF);
        assertRdma(() -> foreign.postRecv(new WorkRequest(1).addSge(memB.address(), 8, sinkB.lkey())), Errno.EBADF);
        assertRdma(() -> foreign.armLimit(1), Errno.EBADF);
        assertRdma(() -> id.createQp(other, QpInitAttributes.of(cqB).srq(foreign)), Errno.EBADF);
        id.close();
        other.close();
    }

    /**
     * With an SRQ a QP's receive capacities are ignored ({@code ibv_create_qp(3)}; rxe and mlx5 agree):
     * an oversized {@code maxRecvSge} is accepted; {@code maxRecvWr} is still checked (as mlx5 does).
     */
    @Test
    void aQpOnAnSrqIgnoresItsReceiveSgeCapacity() {
        int tooMany = devB.attributes().maxRecvSge() + 1;
        CmId plain = devB.createCmId();
        assertRdma(() -> plain.createQp(pdB, QpInitAttributes.of(cqB).maxRecvSge(tooMany)), Errno.EINVAL, "maxRecvSge");
        plain.close();
        CmId id = devB.createCmId();
        QueuePair qp = id.createQp(pdB, QpInitAttributes.of(cqB).srq(srq).maxRecvSge(tooMany));
        assertThat(qp.srq()).isSameAs(srq);
        CmId deep = devB.createCmId();
        assertRdma(() -> deep.createQp(pdB, QpInitAttributes.of(cqB).srq(srq).maxRecvWr(devB.attributes().maxQpWr() + 1)),
                Errno.EINVAL, "maxRecvWr");
        deep.close();
        id.destroyQp();
        id.close();
    }
}
