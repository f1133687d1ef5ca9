package io.regmem.registration;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.Providers;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * docs/guarantees.md: a receive CQ as deep as the SRQ's {@code maxWr} that only the SRQ's receives
 * complete on never overruns, however many QPs share the SRQ and the CQ, whatever the interleaving of
 * their senders and the poller. Here: an SRQ of {@value #DEPTH}, one receive CQ of {@value #DEPTH}
 * shared by {@value #CONNECTIONS} QPs, a sender thread per connection pipelining SENDs (RNR retry for
 * ever, so a sender waits for receives instead of failing), and a poller that reposts each receive as
 * soon as its completion is polled, or a poster thread of its own that tops the SRQ up whenever a slot
 * is free (any thread may post), or two pollers, so the SRQ is full nearly all the time. Exact counts: every
 * message arrives once, in its connection's order, no CQ_ERR or QP_FATAL is raised, and every slot is
 * accounted for at the end.
 */
@ExtendWith(NoLeaks.class)
class SrqCqDepthTest {
    private static final int DEPTH = 32;
    private static final int CONNECTIONS = 3;
    private static final int MESSAGES = 1500;
    private static final int WINDOW = 16;
    private static final int SLOT = 64;
    /** Receive buffers: twice the SRQ, so a separate poster always has one for a freed slot. */
    private static final int BUFFERS = 2 * DEPTH;
    private static final WorkCompletion[] NONE = new WorkCompletion[0];
    private static int names;

    private final Arena arena = Arena.ofShared();
    private final MemorySegment memA = arena.allocate((long) CONNECTIONS * MESSAGES * 8, 4096);
    private final MemorySegment memB = arena.allocate((long) BUFFERS * SLOT, 4096);
    private final RdmaDevice devA = Providers.open();
    private final RdmaDevice devB = Providers.open();
    private final ProtectionDomain pdA = devA.allocPd();
    private final ProtectionDomain pdB = devB.allocPd();
    private final CompletionQueue sendB = devB.createCq(64);
    private final CompletionQueue recvB = devB.createCq(DEPTH);
    private final SharedReceiveQueue srq = pdB.createSrq(DEPTH, 1);
    private final MemoryRegion srcA = pdA.register(memA, Access.LOCAL_WRITE);
    private final MemoryRegion sinkB = pdB.register(memB, Access.LOCAL_WRITE);
    private final CmId listener = devB.createCmId();
    private final List<CompletionQueue> cqsA = new ArrayList<>();
    private final List<CmId> clients = new ArrayList<>();
    private final List<CmId> servers = new ArrayList<>();
    private final String address = Providers.address("srq-depth-" + (++names));

    SrqCqDepthTest() {
        listener.listen(address);
        for (int i = 0; i < CONNECTIONS; i++) {
            CompletionQueue cq = devA.createCq(WINDOW * 2);
            cqsA.add(cq);
            CmId a = devA.createCmId();
            clients.add(a);
            a.createQp(pdA, QpInitAttributes.of(cq).maxSendWr(WINDOW * 2).rnrRetry(7).minRnrTimer(1));
            a.connect(address);
            CmId b = Providers.awaitRequest(listener);
            servers.add(b);
            b.createQp(pdB, new QpInitAttributes().sendCq(sendB).recvCq(recvB).srq(srq).maxSendWr(8));
            b.accept();
        }
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
        cqsA.forEach(CompletionQueue::close);
        sendB.close();
        recvB.close();
        pdA.close();
        pdB.close();
        devA.close();
        devB.close();
        arena.close();
    }

    private void post(int slot) {
        srq.postRecv(new WorkRequest(1).wrId(slot).addSge(memB.address() + (long) slot * SLOT, SLOT, sinkB.lkey()));
    }

    /** Who polls the receive CQ and who posts the receives again. */
    enum Reposting {
        /** One poller, which reposts each receive it polled. */
        POLLER,
        /** One poller; a poster thread tops the SRQ up whenever a slot is free. */
        SEPARATE_POSTER,
        /** Two pollers, each reposting what it polled. */
        TWO_POLLERS
    }

    @ParameterizedTest
    @EnumSource(Reposting.class)
    void aReceiveCqAsDeepAsTheSrqNeverOverrunsUnderConcurrentSendersAndPollers(Reposting mode) throws Exception {
        ConcurrentLinkedQueue<Integer> freeBuffers = new ConcurrentLinkedQueue<>();
        for (int s = 0; s < BUFFERS; s++) {
            freeBuffers.add(s);
        }
        for (int s = 0; s < DEPTH; s++) {
            post(freeBuffers.poll());
        }
        boolean separatePoster = mode == Reposting.SEPARATE_POSTER;
        AtomicReference<Throwable> failure = new AtomicReference<>();
        AtomicBoolean done = new AtomicBoolean();
        AtomicInteger received = new AtomicInteger();
        BitSet seen = new BitSet();
        List<Thread> threads = new ArrayList<>();
        for (int c = 0; c < CONNECTIONS; c++) {
            int conn = c;
            threads.add(Thread.ofPlatform().name("sender-" + c).start(() -> sendAll(conn, failure)));
        }
        if (separatePoster) {
            threads.add(Thread.ofPlatform().name("poster").start(() -> {
                try {
                    long deadline = System.nanoTime() + 120_000_000_000L;
                    while (!done.get() && failure.get() == null && System.nanoTime() < deadline) {
                        Integer b = srq.outstandingRecvs() < DEPTH ? freeBuffers.poll() : null;
                        if (b != null) {
                            post(b); // the only poster: a free slot stays free until this post
                        } else {
                            Thread.onSpinWait();
                        }
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            }));
        }
        Thread second = null;
        if (mode == Reposting.TWO_POLLERS) {
            second = Thread.ofPlatform().name("poller-2").start(() -> {
                try {
                    pollAll(received, seen, freeBuffers, false, false, failure);
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            });
            threads.add(second);
        }
        try {
            pollAll(received, seen, freeBuffers, separatePoster, mode != Reposting.TWO_POLLERS, failure);
        } catch (Throwable e) {
            failure.compareAndSet(null, e);
        } finally {
            done.set(true);
            for (Thread t : threads) {
                t.join(60_000);
            }
        }
        assertThat(failure.get()).isNull();
        while (srq.outstandingRecvs() < DEPTH) {
            post(freeBuffers.poll()); // what the poster had not topped up when it stopped
        }
        assertThat(seen.cardinality()).isEqualTo(CONNECTIONS * MESSAGES);
        assertThat(recvB.overrun()).isFalse();
        assertThat(devB.pollAsyncEvent()).isNull();
        assertThat(srq.taken()).isEqualTo(CONNECTIONS * MESSAGES);
        assertThat(srq.outstandingRecvs()).as("the reposted receives, no slot lost").isEqualTo(srq.queued());
        assertThat(srq.queued()).isEqualTo(DEPTH);
    }

    /**
     * Polls B's receive CQ until every message arrived (counted in {@code received}, across pollers),
     * checking each, then reposting its buffer (or handing it to the poster). {@code inOrder}: the only
     * poller sees each connection's messages in order.
     */
    private void pollAll(AtomicInteger received, BitSet seen, ConcurrentLinkedQueue<Integer> freeBuffers,
                         boolean separatePoster, boolean inOrder, AtomicReference<Throwable> failure) {
        WorkCompletion[] batch = new WorkCompletion[DEPTH];
        for (int k = 0; k < batch.length; k++) {
            batch[k] = new WorkCompletion();
        }
        int[] next = new int[CONNECTIONS];
        long deadline = System.nanoTime() + 120_000_000_000L;
        while (received.get() < CONNECTIONS * MESSAGES && failure.get() == null) {
            assertThat(System.nanoTime()).as("every message within 120 s (%d received)", received.get()).isLessThan(deadline);
            assertThat(recvB.overrun()).as("the receive CQ overran after %d receives", received.get()).isFalse();
            AsyncEvent ev = devB.pollAsyncEvent();
            assertThat(ev).as("no asynchronous event on B after %d receives", received.get()).isNull();
            int n = recvB.poll(batch);
            for (int k = 0; k < n; k++) {
                WorkCompletion wc = batch[k];
                assertThat(wc.status()).as("receive %d", received.get()).isEqualTo(WcStatus.SUCCESS);
                int buffer = (int) wc.wrId();
                long tag = memB.get(ValueLayout.JAVA_LONG_UNALIGNED, (long) buffer * SLOT);
                int conn = (int) (tag / MESSAGES);
                assertThat(wc.qp()).isSameAs(servers.get(conn).qp());
                if (inOrder) {
                    assertThat(tag % MESSAGES).as("connection %d's messages in order", conn).isEqualTo(next[conn]);
                    next[conn]++;
                }
                synchronized (seen) {
                    assertThat(seen.get((int) tag)).as("message %d received twice", tag).isFalse();
                    seen.set((int) tag);
                }
                received.incrementAndGet();
                if (separatePoster) {
                    freeBuffers.add(buffer);
                } else {
                    post(buffer); // at once: the SRQ stays as full as it can be
                }
            }
            if (n == 0) {
                sendB.poll(NONE); // B's own work (it sends nothing)
            }
        }
    }

    /** Connection {@code c} sends MESSAGES tagged SENDs, up to WINDOW in flight. */
    private void sendAll(int c, AtomicReference<Throwable> failure) {
        try {
            QueuePair qp = clients.get(c).qp();
            CompletionQueue cq = cqsA.get(c);
            WorkRequest w = new WorkRequest(1);
            WorkCompletion[] done = new WorkCompletion[WINDOW];
            for (int k = 0; k < done.length; k++) {
                done[k] = new WorkCompletion();
            }
            int posted = 0;
            int completed = 0;
            long deadline = System.nanoTime() + 120_000_000_000L;
            while (completed < MESSAGES && failure.get() == null) {
                while (posted < MESSAGES && posted - completed < WINDOW) {
                    long tag = (long) c * MESSAGES + posted;
                    MemorySegment src = memA.asSlice(8 * tag, 8); // never reused
                    src.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, tag);
                    qp.postSend(w.reset().wrId(posted).opcode(Opcode.SEND).signaled(true).addSge(src.address(), 8, srcA.lkey()));
                    posted++;
                }
                int n = cq.poll(done);
                for (int k = 0; k < n; k++) {
                    if (done[k].status() != WcStatus.SUCCESS) {
                        throw new AssertionError("connection " + c + ": send " + done[k].wrId() + " completed " + done[k].status());
                    }
                }
                completed += n;
                if (System.nanoTime() > deadline) {
                    throw new AssertionError("connection " + c + ": " + completed + " of " + MESSAGES + " sends in 120 s");
                }
                if (n == 0) {
                    Thread.onSpinWait();
                }
            }
        } catch (Throwable e) {
            failure.compareAndSet(null, e);
        }
    }
}
