package io.regmem.registration;

import static io.regmem.registration.ObjectModelTest.assertRdma;
import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.testkit.Loopback;
import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.Providers;
import java.lang.foreign.ValueLayout;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Completion channels and events ({@code ibv_create_comp_channel}, {@code ibv_req_notify_cq},
 * {@code ibv_get_cq_event}, {@code ibv_ack_cq_events}), after rdma-core's test_cq_events.py: a thread
 * sleeps in {@code getEvent} until a completion arrives, one event per arming, none for completions
 * already there, solicited-only arming, and the errors.
 */
@ExtendWith(NoLeaks.class)
class CompletionChannelTest {
    private Loopback lb;
    private MemoryRegion local;
    private MemoryRegion sink;
    private final WorkRequest wr = new WorkRequest(1);

    private void open(Map<String, String> options) {
        lb = Loopback.withChannels(options);
        local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        sink = lb.pdB.register(lb.memB, Access.LOCAL_WRITE);
    }

    @AfterEach
    void tearDown() {
        if (lb != null) {
            lb.cqA.ackAll();
            lb.cqB.ackAll();
            lb.close();
        }
    }

    private void postRecv(long id, int length) {
        lb.qpB.postRecv(new WorkRequest(1).wrId(id).addSge(lb.memB.address() + 4096 * id, length, sink.lkey()));
    }

    /** A's SEND of {@code length} bytes, polled until it completes (its status). */
    private WcStatus send(long id, int length, boolean solicited) {
        lb.memA.set(ValueLayout.JAVA_LONG, 0, id);
        lb.qpA.postSend(wr.reset().wrId(id).opcode(Opcode.SEND).signaled(true).solicited(solicited)
                .addSge(lb.memA.address(), length, local.lkey()));
        WorkCompletion[] one = {new WorkCompletion()};
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (lb.cqA.poll(one) == 0) {
            assertThat(System.nanoTime()).as("A's SEND completes within 10 s").isLessThan(deadline);
        }
        return one[0].status();
    }

    /** A thread waiting on B's channel for up to 10 s; what it got goes into {@code got}. */
    private Thread waiter(AtomicReference<Object> got) {
        return Thread.ofPlatform().start(() -> {
            try {
                CompletionQueue cq = lb.chB.getEvent(10, TimeUnit.SECONDS);
                got.set(cq == null ? "timed out" : cq);
            } catch (RuntimeException e) {
                got.set(e);
            }
        });
    }

    @ParameterizedTest(name = "progressThread={0}")
    @ValueSource(booleans = {false, true})
    void aThreadSleepsInGetEventUntilAReceiveCompletesThenPollsIt(boolean progressThread) throws Exception {
        open(progressThread ? Map.of("progressThread", "true") : Map.of());
        postRecv(1, 4096);
        lb.cqB.requestNotify(false);
        AtomicReference<Object> got = new AtomicReference<>();
        Thread t = waiter(got);
        Thread.sleep(30);
        assertThat(got.get()).as("nothing completed yet: the waiter still waits").isNull();
        assertThat(t.getState()).isIn(Thread.State.WAITING, Thread.State.TIMED_WAITING, Thread.State.RUNNABLE);
        assertThat(send(1, 64, false)).isEqualTo(WcStatus.SUCCESS);
        t.join(10_000);
        assertThat(got.get()).isSameAs(lb.cqB);
        assertThat(lb.cqB.unackedEvents()).isEqualTo(1);
        WorkCompletion[] wcs = {new WorkCompletion()};
        assertThat(lb.cqB.poll(wcs)).isEqualTo(1);
        assertThat(wcs[0].opcode()).isEqualTo(Opcode.RECV);
        assertThat(wcs[0].byteLen()).isEqualTo(64);
        assertThat(lb.memB.get(ValueLayout.JAVA_LONG, 4096)).isEqualTo(1);
        lb.cqB.ackEvents(1);
        assertThat(lb.cqB.unackedEvents()).isZero();
    }

    @Test
    void oneEventPerArmingAndNoneForCompletionsAlreadyThere() throws Exception {
        open(Map.of());
        for (int i = 1; i <= 3; i++) {
            postRecv(i, 4096);
        }
        assertThat(send(1, 8, false)).isEqualTo(WcStatus.SUCCESS);
        lb.cqB.requestNotify(false); // the receive completed before the arming: no event for it
        assertThat(lb.chB.getEvent(30, TimeUnit.MILLISECONDS)).as("an event for a completion made before arming").isNull();
        assertThat(lb.cqB.pending()).isEqualTo(1);
        assertThat(send(2, 8, false)).isEqualTo(WcStatus.SUCCESS);
        assertThat(send(3, 8, false)).isEqualTo(WcStatus.SUCCESS);
        assertThat(lb.chB.getEvent(10, TimeUnit.SECONDS)).isSameAs(lb.cqB);
        assertThat(lb.chB.getEvent(30, TimeUnit.MILLISECONDS)).as("a second event from one arming").isNull();
        assertThat(lb.chB.pollEvent()).isNull();
        assertThat(lb.cqB.poll(lb.wcs)).isEqualTo(3);
        postRecv(4, 4096);
        lb.cqB.requestNotify(false);
        assertThat(send(4, 8, false)).isEqualTo(WcStatus.SUCCESS);
        assertThat(lb.chB.getEvent(10, TimeUnit.SECONDS)).as("armed again: the next completion raises one").isSameAs(lb.cqB);
        lb.cqB.ackEvents(2);
    }

    @Test
    void solicitedOnlyWakesForASolicitedSendOrAFailureNotForAPlainOne() throws Exception {
        open(Map.of());
        for (int i = 1; i <= 3; i++) {
            postRecv(i, i == 3 ? 16 : 4096);
        }
        lb.cqB.requestNotify(true);
        assertThat(send(1, 8, false)).isEqualTo(WcStatus.SUCCESS);
        assertThat(lb.chB.getEvent(30, TimeUnit.MILLISECONDS)).as("an event for an unsolicited receive").isNull();
        assertThat(send(2, 8, true)).isEqualTo(WcStatus.SUCCESS);
        assertThat(lb.chB.getEvent(10, TimeUnit.SECONDS)).isSameAs(lb.cqB);
        lb.cqB.requestNotify(true);
        // 64 bytes into a 16-byte receive: the receive fails LOC_LEN_ERR, an unsuccessful completion
        assertThat(send(3, 64, false)).isEqualTo(WcStatus.REM_INV_REQ_ERR);
        assertThat(lb.chB.getEvent(10, TimeUnit.SECONDS)).as("a failed completion wakes a solicited-only arming").isSameAs(lb.cqB);
        lb.cqB.ackEvents(2);
        assertThat(lb.cqB.poll(lb.wcs)).isEqualTo(3);
        assertThat(lb.wcs[2].status()).isEqualTo(WcStatus.LOC_LEN_ERR);
    }

    @Test
    void misuseIsAClearErrorAndChangesNothing() throws Exception {
        open(Map.of());
        try (CompletionQueue plain = lb.devB.createCq(8)) {
            assertRdma(() -> plain.requestNotify(false), Errno.EINVAL, "created without a completion channel");
            assertThat(plain.channel()).isNull();
        }
        assertThat(lb.cqB.channel()).isSameAs(lb.chB);
        assertRdma(() -> lb.cqB.ackEvents(1), Errno.EINVAL, "ackEvents(1) with 0 event(s) got");
        assertRdma(() -> lb.cqB.ackEvents(-1), Errno.EINVAL);
        assertRdma(() -> lb.chB.getEvent(-1, TimeUnit.SECONDS), Errno.EINVAL, "timeout");
        assertRdma(() -> lb.chB.getEvent(1, null), Errno.EINVAL);
        assertRdma(() -> lb.devB.createCq(8, lb.chA), Errno.EINVAL, "of device");
        assertRdma(lb.chB::close, Errno.EBUSY, "1 completion queue(s) created on it");

        postRecv(1, 4096);
        lb.cqB.requestNotify(false);
        assertThat(send(1, 8, false)).isEqualTo(WcStatus.SUCCESS);
        assertThat(lb.chB.getEvent(10, TimeUnit.SECONDS)).isSameAs(lb.cqB);
        assertThat(lb.cqB.poll(lb.wcs)).isEqualTo(1);
        assertRdma(lb.cqB::close, Errno.EBUSY, "1 completion event(s) got and not acknowledged");
        assertThat(lb.cqB.isDestroyed()).isFalse();
        assertRdma(() -> lb.cqB.ackEvents(2), Errno.EINVAL);
        lb.cqB.ackEvents(1);

        CompletionChannel lone = lb.devB.createCompletionChannel();
        AtomicReference<Object> got = new AtomicReference<>();
        Thread t = Thread.ofPlatform().start(() -> {
            try {
                got.set(lone.getEvent(10, TimeUnit.SECONDS));
            } catch (RuntimeException e) {
                got.set(e);
            }
        });
        Thread.sleep(20);
        lone.close();
        t.join(10_000);
        assertThat(got.get()).isInstanceOf(RdmaException.class)
                .satisfies(e -> assertThat(((RdmaException) e).errno()).isEqualTo(Errno.EBADF));
        assertRdma(lone::pollEvent, Errno.EBADF);
        assertRdma(() -> lb.devB.createCq(8, lone), Errno.EBADF);
    }

    @Test
    void anInterruptedWaiterGetsEintrWithItsInterruptStatusKept() throws Exception {
        open(Map.of());
        lb.cqB.requestNotify(false);
        AtomicReference<Object> got = new AtomicReference<>();
        AtomicReference<Boolean> interrupted = new AtomicReference<>();
        Thread t = Thread.ofPlatform().start(() -> {
            try {
                got.set(lb.chB.getEvent(10, TimeUnit.SECONDS));
            } catch (RuntimeException e) {
                got.set(e);
                interrupted.set(Thread.currentThread().isInterrupted());
            }
        });
        Thread.sleep(20);
        t.interrupt();
        t.join(10_000);
        assertThat(got.get()).isInstanceOf(RdmaException.class)
                .satisfies(e -> assertThat(((RdmaException) e).errno()).isEqualTo(Errno.EINTR));
        assertThat(interrupted.get()).isTrue();
    }

    @Test
    void wakeupReturnsAWaiterAtOnceOrElseTheNextCallAndAnEventStillComesAfter() throws Exception {
        open(Map.of());
        lb.cqB.requestNotify(false);
        AtomicReference<Object> got = new AtomicReference<>();
        Thread t = waiter(got);
        Thread.sleep(20);
        long before = System.nanoTime();
        lb.chB.wakeup();
        t.join(10_000);
        assertThat(got.get()).as("the sleeping waiter returned as if timed out").isEqualTo("timed out");
        assertThat(System.nanoTime() - before).as("long before its 10 s").isLessThan(5_000_000_000L);
        lb.chB.wakeup();
        lb.chB.wakeup(); // (wakeups do not add up)
        assertThat(lb.chB.getEvent(10, TimeUnit.SECONDS)).as("no waiter: the next call returns at once").isNull();
        Thread again = waiter(got);
        postRecv(1, 64);
        assertThat(send(1, 64, false)).isEqualTo(WcStatus.SUCCESS);
        again.join(10_000);
        assertThat(got.get()).as("the event after a wakeup").isSameAs(lb.cqB);
        lb.cqB.ackEvents(1);
    }

    @Test
    void aDevicesForcedCloseTakesItsChannelsAndUnacknowledgedEvents() {
        RdmaDevice dev = Providers.open(Providers.NAME, Map.of());
        CompletionChannel ch = dev.createCompletionChannel();
        dev.createCq(8, ch);
        assertThat(dev.forceClose()).contains("CompletionChannel");
        assertThat(ch.isDestroyed()).isTrue();
    }

    /**
     * A CQ's close racing another thread's {@code pollEvent} of its event: either the close is refused
     * ({@code EBUSY}, the event was handed out and must be acknowledged) or the event is never handed
     * out; never both (as {@code ibv_destroy_cq} with unacknowledged events). Also: an event raised
     * after the close is not queued.
     */
    @Test
    void aCqsCloseAndTheHandOutOfItsEventNeverBothSucceed() throws Exception {
        try (RdmaDevice dev = Providers.open(Providers.NAME, Map.of())) {
            CompletionChannel ch = dev.createCompletionChannel();
            int rounds = 4000;
            int refused = 0;
            int handedOut = 0;
            java.util.concurrent.CyclicBarrier start = new java.util.concurrent.CyclicBarrier(2);
            AtomicReference<Object> polled = new AtomicReference<>();
            for (int r = 0; r < rounds; r++) {
                CompletionQueue cq = dev.createCq(4, ch);
                ch.raise(cq);
                polled.set(null);
                Thread poller = Thread.ofPlatform().start(() -> {
                    try {
                        start.await();
                        polled.set(ch.pollEvent());
                    } catch (Exception e) {
                        polled.set(e);
                    }
                });
                start.await();
                boolean closed;
                try {
                    cq.close();
                    closed = true;
                } catch (RdmaException e) {
                    assertThat(e.errno()).isEqualTo(Errno.EBUSY);
                    closed = false;
                }
                poller.join();
                Object got = polled.get();
                if (got instanceof Exception e) {
                    throw new AssertionError("pollEvent failed", e);
                }
                if (closed) {
                    assertThat(got).as("round %d: the close succeeded, so its event was not handed out", r).isNull();
                } else {
                    refused++;
                    assertThat(got).as("round %d: the close was refused for the event handed out", r).isSameAs(cq);
                    cq.ackEvents(1);
                    cq.close();
                }
                if (got == cq) {
                    handedOut++;
                }
                ch.raise(cq); // a completion racing the close raises nothing for a destroyed CQ
                assertThat(ch.pendingEvents()).isZero();
            }
            assertThat(refused).isEqualTo(handedOut);
            ch.close();
        }
    }
}
