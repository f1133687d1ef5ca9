package io.regmem.registration.rpc;

import io.regmem.registration.testkit.Providers;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.regmem.core.BufferPool;
import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.CmId;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.DmaMapping;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.WcStatus;
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.agrona.concurrent.AgentInvoker;
import org.agrona.concurrent.CompositeAgent;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Calls and replies over two soft transports: receive posting with credits (invariant 15), Sends
 * through the ring, reply handling, completion only after both the reply and the Send are done, and
 * the flush at disconnect (invariant 16), also after the QP breaks mid-run.
 */
@ExtendWith(NoLeaks.class)
class RpcTransportTest {
    private static final int MAX = 16;
    private static int names;

    /** Both ends: devices, PDs, CQs, connected QPs, pools, transports. */
    static final class Pair implements AutoCloseable {
        final RdmaDevice devC = Providers.open();
        final RdmaDevice devS = Providers.open();
        final ProtectionDomain pdC = devC.allocPd();
        final ProtectionDomain pdS = devS.allocPd();
        final CompletionQueue cqC = devC.createCq(1024);
        final CompletionQueue cqS = devS.createCq(1024);
        final BufferPool pool = BufferPool.builder().name("rpc-pair").build();
        final CmId listener = devS.createCmId();
        final CmId idC = devC.createCmId();
        final CmId idS;
        final QueuePair qpC;
        final QueuePair qpS;
        final RpcBuffer bufC = RpcBuffer.builder(pdC, pool).maxRequests(MAX).inline(256, 256).build();
        final RpcBuffer bufS = RpcBuffer.builder(pdS, pool).maxRequests(MAX).inline(256, 256).build();
        final SendLock lockC = new SendLock();
        final SendLock lockS = new SendLock();
        final Req[] inflight = new Req[1 << 16];
        final AtomicInteger completed = new AtomicInteger();
        /** Calls the flush ended before their reply came ({@link RpcTransport.Handler#aborted}). */
        final AtomicInteger aborted = new AtomicInteger();
        final AtomicInteger disconnects = new AtomicInteger();
        final List<Integer> wrongReplies = new ArrayList<>();
        long lastRecvWrId;
        /** Runs first in the client's receive handler (tests that need to act from inside it). */
        volatile java.util.function.Consumer<Rep> onClientReceive = rep -> { };
        final RpcTransport client;
        final RpcTransport server;

        Pair() {
            this(0);
        }

        /** A pair whose QPs have {@code maxInline} bytes of inline room (header-only Sends go inline). */
        Pair(int maxInline) {
            String name = Providers.address("rpc-" + (++names));
            listener.listen(name);
            QpInitAttributes attrs = QpInitAttributes.of(cqC).maxSendWr(4 * MAX).maxRecvWr(MAX + 8).signalAll(false)
                    .maxInlineData(maxInline);
            qpC = idC.createQp(pdC, attrs);
            idC.connect(name);
            idS = listener.getRequest();
            qpS = idS.createQp(pdS, QpInitAttributes.of(cqS).maxSendWr(4 * MAX).maxRecvWr(MAX + 8).signalAll(false)
                    .maxInlineData(maxInline));
            idS.accept();
            client = new RpcTransport(qpC, cqC, bufC, lockC, new RpcTransport.Handler() {
                @Override
                public void received(Rep rep, long bytes) {
                    onClientReceive.accept(rep);
                    lastRecvWrId = RpcTransport.recvWrId(rep);
                    int xid = rep.buffer().segment().get(ValueLayout.JAVA_INT, 0);
                    Req req = inflight[xid];
                    int answer = rep.buffer().segment().get(ValueLayout.JAVA_INT, 4);
                    if (answer != xid * 3) {
                        wrongReplies.add(xid);
                    }
                    req.attachReply(rep);
                    client().replyDone(req);
                    client().postRecvs(MAX);
                }

                @Override
                public void completed(Req req) {
                    completed.incrementAndGet();
                    bufC.put(req); // also gives its reply back
                }

                @Override
                public void aborted(Req req) {
                    aborted.incrementAndGet();
                    bufC.put(req);
                }

                @Override
                public void disconnected(WcStatus cause) {
                    disconnects.incrementAndGet();
                }
            }, 8, 4);
            server = new RpcTransport(qpS, cqS, bufS, lockS, new RpcTransport.Handler() {
                @Override
                public void received(Rep rep, long bytes) {
                    int xid = rep.buffer().segment().get(ValueLayout.JAVA_INT, 0);
                    bufS.repPut(rep);
                    Req reply = bufS.get();
                    reply.header().segment().set(ValueLayout.JAVA_INT, 0, xid);
                    reply.header().segment().set(ValueLayout.JAVA_INT, 4, xid * 3);
                    lockS.lock();
                    try {
                        server().send(reply, 8, 0, false);
                    } finally {
                        lockS.unlock();
                    }
                    server().postRecvs(MAX);
                }

                @Override
                public void completed(Req req) {
                    bufS.put(req);
                }
            }, 8, 4);
        }

        RpcTransport client() {
            return client;
        }

        RpcTransport server() {
            return server;
        }

        /** Sends call {@code xid}; false if no request or ring slot was free. */
        boolean call(int xid) {
            Req req = bufC.get();
            if (req == null) {
                return false;
            }
            req.header().segment().set(ValueLayout.JAVA_INT, 0, xid);
            inflight[xid] = req;
            client.postRecvs(MAX); // as at marshal time: receives for every call that may be outstanding
            lockC.lock();
            try {
                if (!client.send(req, 8, 0, true)) {
                    bufC.put(req);
                    return false;
                }
                return true;
            } finally {
                lockC.unlock();
            }
        }

        String state(int sent) {
            return "sent " + sent + ", completed " + completed + ", client ring " + bufC.ring().outstanding()
                    + ", server ring " + bufS.ring().outstanding() + ", client recvs " + client.receiveCount()
                    + ", server recvs " + server.receiveCount() + ", free reqs " + bufC.freeRequests() + "/"
                    + bufS.freeRequests() + ", sq " + qpC.outstandingSends() + "/" + qpS.outstandingSends()
                    + ", connected " + client.isConnected() + "/" + server.isConnected();
        }

        void pollBoth() {
            server.poll();
            client.poll();
        }

        @Override
        public void close() {
            assertThat(bufC.destroy()).isEmpty();
            assertThat(bufS.destroy()).isEmpty();
            idC.disconnect();
            idC.destroyQp();
            idS.destroyQp();
            idC.close();
            idS.close();
            listener.close();
            cqC.close();
            cqS.close();
            pdC.close();
            pdS.close();
            assertThat(devC.resources().survivors()).as(devC.resources().report()).isEmpty();
            assertThat(devS.resources().survivors()).as(devS.resources().report()).isEmpty();
            devC.close();
            devS.close();
            assertThat(pool.closeAndReport().clean()).isTrue();
        }
    }

    static void assertFlushed(Pair p, RpcTransport t, RpcBuffer b, QueuePair qp) {
        // invariant 16: nothing mapped, no send context, no MR, nothing posted
        b.forEachReq(r -> assertThat(r.header().isMapped() || r.send().isMapped() || r.recv().isMapped())
                .as("%s mapped after disconnect", r).isFalse());
        b.forEachRep(rep -> assertThat(rep.buffer().isMapped()).isFalse());
        assertThat(b.ring().outstanding()).isZero();
        assertThat(t.mrs()).isZero();
        assertThat(qp.outstandingSends()).isZero();
        assertThat(qp.outstandingRecvs()).isZero();
        assertThat(t.receiveCount()).isZero();
        assertThat(p.devC.resources().survivors(DmaMapping.class)).isEmpty();
    }

    /**
     * With inline room, a header-only call is copied when it is posted: the header may change at once
     * (here before the Send even executes on soft) and the server still sees the call as sent.
     */
    @Test
    void aHeaderOnlyCallWithinTheInlineRoomIsCopiedAtPost() {
        try (Pair p = new Pair(64)) {
            p.server.postRecvs(MAX);
            Req req = p.bufC.get();
            req.header().segment().set(ValueLayout.JAVA_INT, 0, 7);
            p.inflight[7] = req;
            p.client.postRecvs(MAX);
            p.lockC.lock();
            try {
                assertThat(p.client.send(req, 8, 0, true)).isTrue();
            } finally {
                p.lockC.unlock();
            }
            req.header().segment().set(ValueLayout.JAVA_INT, 0, 9); // what a reused header would hold
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (p.completed.get() < 1) {
                p.pollBoth();
                assertThat(System.nanoTime()).isLessThan(deadline);
            }
            assertThat(p.wrongReplies).as("the server answered call 7, as posted").isEmpty();
            for (int xid = 0; xid < 200; xid++) { // and the inline path runs calls as the other does
                while (!p.call(xid)) {
                    p.pollBoth();
                }
                p.pollBoth();
            }
            while (p.completed.get() < 201) {
                p.pollBoth();
                assertThat(System.nanoTime()).isLessThan(deadline);
            }
            assertThat(p.wrongReplies).isEmpty();
            p.client.flushDisconnect();
            p.server.flushDisconnect();
            assertFlushed(p, p.client, p.bufC, p.qpC);
            assertFlushed(p, p.server, p.bufS, p.qpS);
        }
    }

    /** Both ends' completion handling as Agrona agents in one duty cycle: the calls flow as with poll(). */
    @Test
    void pollAgentsDriveTheTransportsUnderAnAgentInvoker() {
        try (Pair p = new Pair()) {
            p.server.postRecvs(MAX);
            p.client.postRecvs(MAX);
            AgentInvoker invoker = new AgentInvoker(Throwable::printStackTrace,
                    null, new CompositeAgent(new RpcPollAgent(p.server, "server"),
                            new RpcPollAgent(p.client, null)));
            invoker.start();
            int sent = 0;
            long work = 0;
            long deadline = System.nanoTime() + 30_000_000_000L;
            while (p.completed.get() < 500) {
                while (sent < 500 && sent - p.completed.get() < MAX && p.call(sent)) {
                    sent++;
                }
                work += invoker.invoke();
                assertThat(System.nanoTime()).isLessThan(deadline);
            }
            assertThat(work).as("the agents report the completions they handled").isGreaterThanOrEqualTo(1000);
            assertThat(p.wrongReplies).isEmpty();
            invoker.close();
            p.client.flushDisconnect();
            p.server.flushDisconnect();
        }
        assertThatThrownBy(() -> new RpcPollAgent(null, "x")).isInstanceOf(RdmaException.class);
    }

    @Test
    void callsAndRepliesFlowWithCreditsAndEverythingComesBackAtDisconnect() {
        try (Pair p = new Pair()) {
            assertThat(p.client.postRecvs(1)).as("connect posts credits + 7 = 8").isEqualTo(8);
            assertThat(p.client.receiveCount()).isGreaterThanOrEqualTo(2);
            assertThat(p.server.postRecvs(MAX)).isEqualTo(MAX + 7);
            assertThat(p.server.receiveCount()).as("invariant 15: at least needed + 1").isGreaterThanOrEqualTo(MAX + 1);
            assertThat(p.server.postRecvs(MAX)).as("enough posted: nothing to do").isZero();
            int calls = 5000;
            int sent = 0;
            int idle = 0;
            while (p.completed.get() < calls) {
                int before = p.completed.get();
                while (sent < calls && sent - p.completed.get() < MAX && p.call(sent)) {
                    sent++;
                }
                p.pollBoth();
                assertThat(p.client.receiveCount()).isNotNegative();
                idle = p.completed.get() == before ? idle + 1 : 0;
                assertThat(idle).as("stuck: %s", p.state(sent)).isLessThan(10_000);
            }
            assertThat(p.wrongReplies).isEmpty();
            assertThat(p.bufC.freeRequests()).isEqualTo(MAX);
            p.client.mrsRefresh();
            assertThat(p.client.mrs()).isEqualTo(4);
            assertThat(p.client.mrGet(p.bufC.get())).isNotNull();
            p.bufC.forEachReq(r -> {
                if (r.isOwned()) {
                    p.bufC.put(r);
                }
            });
            p.client.flushDisconnect();
            p.server.flushDisconnect();
            assertFlushed(p, p.client, p.bufC, p.qpC);
            assertFlushed(p, p.server, p.bufS, p.qpS);
            assertThat(p.bufC.freeReplies()).isEqualTo(p.bufC.replies());
            assertThat(p.bufS.freeReplies()).isEqualTo(p.bufS.replies());
            assertThat(p.disconnects).as("an orderly flush is not a failure").hasValue(0);
        }
    }

    /**
     * A client completion thread whose handler blocks inside the first reply until released, and
     * a teardown step run on a thread of its own meanwhile; records whatever goes wrong.
     */
    static final class BlockedHandler {
        final Pair p;
        final CountDownLatch inside = new CountDownLatch(1);
        final CountDownLatch release = new CountDownLatch(1);
        final AtomicReference<String> wrong = new AtomicReference<>();
        final AtomicReference<Throwable> failure = new AtomicReference<>();
        final AtomicBoolean stop = new AtomicBoolean();
        final Thread poller;

        /**
         * Sends one call and returns once the reply's handler is blocked on the poller thread.
         *
         * @param check run in the handler after the release (its rep): a message if the rep is not as it should be
         */
        BlockedHandler(Pair p, java.util.function.Function<Rep, String> check) {
            this.p = p;
            p.server.postRecvs(MAX);
            p.onClientReceive = rep -> {
                if (inside.getCount() == 0) {
                    return;
                }
                try {
                    p.client.poll();
                    wrong.set("a handler polled its own transport");
                } catch (RdmaException e) {
                    if (e.errno() != Errno.EBUSY) {
                        wrong.set("nested poll: " + e);
                    }
                }
                inside.countDown();
                try {
                    if (!release.await(10, TimeUnit.SECONDS)) {
                        wrong.set("never released");
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                String problem = check.apply(rep);
                if (problem != null) {
                    wrong.set(problem);
                }
            };
            poller = Thread.ofPlatform().name("client-completions").start(() -> {
                try {
                    while (!stop.get()) {
                        p.client.poll();
                    }
                } catch (Throwable t) {
                    failure.set(t);
                }
            });
            assertThat(p.call(0)).isTrue();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (inside.getCount() > 0 && System.nanoTime() < deadline) {
                p.server.poll(); // the server answers on this thread; the reply reaches the poller thread
            }
            assertThat(inside.getCount()).as("the reply reached the client's handler").isZero();
        }

        /** Starts {@code step} on a thread and checks it is still waiting 200 ms later. */
        Thread startWaiting(String what, Runnable step) throws InterruptedException {
            Thread t = Thread.ofPlatform().name(what).start(() -> {
                try {
                    step.run();
                } catch (Throwable e) {
                    failure.set(e);
                }
            });
            t.join(200);
            assertThat(t.isAlive()).as("%s waits for the handler's batch to end", what).isTrue();
            return t;
        }

        /** Releases the handler, waits for {@code step} and the poller, and checks nothing went wrong. */
        void finish(Thread step) throws InterruptedException {
            release.countDown();
            step.join(10_000);
            assertThat(step.isAlive()).isFalse();
            stop.set(true);
            poller.join(10_000);
            assertThat(failure.get()).isNull();
            assertThat(wrong.get()).isNull();
        }
    }

    @Test
    void aFlushWhileAnotherThreadPollsWaitsForItsHandlerToReturnAndKeepsPollersOut() throws Exception {
        try (Pair p = new Pair()) {
            BlockedHandler b = new BlockedHandler(p, rep -> rep.buffer().isMapped() ? null
                    : "the flush unmapped the reply buffer while its handler was using it");
            assertThat(p.client.poll()).as("another thread holds the poll role: leave at once").isZero();
            Thread flusher = b.startWaiting("flush", p.client::flushDisconnect);
            assertThat(p.client.isConnected()).as("the flush has not started").isTrue();
            b.finish(flusher);
            p.server.flushDisconnect();
            assertFlushed(p, p.client, p.bufC, p.qpC);
            assertThat(p.completed).as("the call the handler finished completed once").hasValue(1);
        }
    }

    @Test
    void destroyWhileAnotherThreadPollsWaitsForItsHandlerBeforeFreeingReplies() throws Exception {
        try (Pair p = new Pair()) {
            BlockedHandler b = new BlockedHandler(p, rep -> rep.buffer().isFreed()
                    ? "destroy freed the reply buffer while its handler was reading it" : null);
            // Destroy alone (the flush's own wait is tested above).
            AtomicReference<List<Req>> leaked = new AtomicReference<>();
            Thread teardown = b.startWaiting("destroy", () -> leaked.set(p.bufC.destroy()));
            b.finish(teardown);
            assertThat(leaked.get()).as("the handler finished the call before destroy ran").isEmpty();
            assertThat(p.completed).hasValue(1);
            p.bufC.forEachRep(rep -> assertThat(rep.buffer().isFreed()).as("%s freed by destroy", rep).isTrue());
            p.client.flushDisconnect();
            p.server.flushDisconnect();
        }
    }

    @org.junit.jupiter.api.Tag("soft-only")
    @Test
    void aQpBrokenMidRunFlushesEverythingAndEveryRequestComesBackOnce() {
        try (Pair p = new Pair()) {
            p.client.postRecvs(MAX);
            p.server.postRecvs(MAX);
            int sent = 0;
            int idle = 0;
            while (p.completed.get() < 100) {
                int before = p.completed.get();
                while (sent - p.completed.get() < MAX && p.call(sent)) {
                    sent++;
                }
                p.pollBoth();
                idle = p.completed.get() == before ? idle + 1 : 0;
                assertThat(idle).as("stuck: %s", p.state(sent)).isLessThan(10_000);
            }
            while (sent - p.completed.get() < MAX && p.call(sent)) { // calls in flight, then the QP breaks
                sent++;
            }
            p.qpC.unwrap(io.regmem.registration.faults.QpFaults.class).breakQp();
            p.pollBoth();
            p.client.flushDisconnect();
            p.server.flushDisconnect();
            assertThat(p.disconnects.get()).as("told at most once").isLessThanOrEqualTo(1);
            // RPCs whose reply will never come were ended by the flush, once each
            assertThat(p.aborted.get()).as("calls in flight when the QP broke").isPositive();
            assertThat(p.completed.get() + p.aborted.get()).as("every call ended exactly once").isEqualTo(sent);
            assertThat(p.bufC.freeRequests()).isEqualTo(MAX);
            assertThat(p.bufS.freeRequests()).isEqualTo(MAX);
            assertFlushed(p, p.client, p.bufC, p.qpC);
            assertThat(p.bufC.freeReplies()).isEqualTo(p.bufC.replies());
            assertThat(p.bufS.freeReplies()).isEqualTo(p.bufS.replies());
        }
    }

    @Test
    void duplicatedAndStaleCompletionsAreCountedAndNeverApplied() {
        try (Pair p = new Pair()) {
            p.server.postRecvs(MAX);
            int sent = 0;
            while (p.completed.get() < 50) {
                while (sent - p.completed.get() < MAX && p.call(sent)) {
                    sent++;
                }
                p.pollBoth();
            }
            int completedBefore = p.completed.get();
            int receivesBefore = p.client.receiveCount();
            long staleBefore = p.client.staleCompletions();
            // a receive completion delivered twice, and one for an earlier posting of the same rep
            p.client.handle(p.lastRecvWrId, WcStatus.SUCCESS, 8);
            p.client.handle(p.lastRecvWrId - (1L << 32), WcStatus.SUCCESS, 8);
            // a Send completion for the previous user of a slot (one lap earlier)
            SendCtx slot = p.bufC.ring().slot(p.bufC.ring().size() - 1);
            p.client.handle(slot.wrId() - p.bufC.ring().size(), WcStatus.SUCCESS, 0);
            assertThat(p.client.staleCompletions() - staleBefore).isEqualTo(3);
            assertThat(p.completed.get()).as("nothing was applied twice").isEqualTo(completedBefore);
            assertThat(p.client.receiveCount()).isEqualTo(receivesBefore);
            assertThat(p.client.isConnected()).as("stale completions are not errors").isTrue();
            while (p.completed.get() < sent) {
                p.pollBoth();
            }
            p.client.flushDisconnect();
            p.server.flushDisconnect();
            assertFlushed(p, p.client, p.bufC, p.qpC);
        }
    }

    /**
     * A rep's posting generation goes into bits 32-62 of its receive id. It used to count in a plain
     * int: after 2^31 postings of one rep it went negative, the id lost its top bit to the tag and no
     * completion for that rep matched again (the receive was dropped as stale, its credit lost).
     */
    @Test
    void receiveIdsStillMatchWhenAPostingGenerationWraps() {
        Rep rep = new Rep(5, null);
        rep.generation = Integer.MAX_VALUE - 1;
        for (int i = 0; i < 3; i++) {
            rep.nextPosting();
            long id = RpcTransport.recvWrId(rep);
            assertThat(id).as("tagged as a receive").isNegative();
            assertThat((int) id).as("the rep's number").isEqualTo(5);
            assertThat(RpcTransport.namesPosting(id, rep)).as("generation %d", rep.generation).isTrue();
        }
        assertThat(rep.generation).as("wrapped to 0, then on").isEqualTo(1);
        long old = RpcTransport.recvWrId(rep);
        rep.nextPosting();
        assertThat(RpcTransport.namesPosting(old, rep)).as("the previous posting's id is stale").isFalse();
    }

    @Test
    void aPeerThatStopsLeavesCallsWaitingUntilTheFlushAndNothingReturnsEarly() {
        try (Pair p = new Pair()) {
            p.server.postRecvs(MAX);
            int sent = 0;
            while (sent < MAX && p.call(sent)) {
                sent++;
            }
            for (int i = 0; i < 1000; i++) {
                p.client.poll(); // the server never answers: it stopped
            }
            assertThat(p.completed).hasValue(0);
            assertThat(p.bufC.freeRequests()).as("a call that times out keeps its buffers").isZero();
            List<Req> waiting = new ArrayList<>();
            p.bufC.forEachReq(r -> {
                if (r.isOwned()) {
                    waiting.add(r);
                }
            });
            p.client.flushDisconnect();
            p.server.flushDisconnect();
            assertThat(p.completed).as("no call completed").hasValue(0);
            assertThat(p.aborted).as("the flush ended each waiting call once").hasValue(sent);
            assertThat(p.bufC.freeRequests()).isEqualTo(MAX);
            for (Req r : waiting) { // the upper layer cannot end them a second time
                org.assertj.core.api.Assertions.assertThatThrownBy(() -> p.client.replyDone(r))
                        .isInstanceOf(RdmaException.class).hasMessageContaining("waits for no reply");
            }
            assertFlushed(p, p.client, p.bufC, p.qpC);
            assertThat(p.bufS.freeReplies()).isEqualTo(p.bufS.replies());
        }
    }
}
