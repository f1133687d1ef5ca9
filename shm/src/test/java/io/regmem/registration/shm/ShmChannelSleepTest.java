package io.regmem.registration.shm;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.Access;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.Opcode;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import io.regmem.registration.testkit.Loopback;
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.MemorySegment;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A completion channel's waiter on an shm device without a progress thread sleeps on its connections'
 * lanes (their futex words) and the peer's work wakes it, rather than the waiter sleeping in slices
 * and progressing its CQs between them.
 */
@ExtendWith(NoLeaks.class)
class ShmChannelSleepTest {

    /** The sleeping word of B's side of the loopback's lane: 1 while a thread of B sleeps on it. */
    private static int sleepingWord(Loopback lb) throws ReflectiveOperationException {
        Lane lane = ShmProgressFaultTest.shm(lb.devB).qps()[0].lane();
        return MemorySegment.ofAddress(lane.sleepWord()).reinterpret(4).get(JAVA_INT, 0);
    }

    @Test
    void aWaiterSleepsOnTheLaneAndThePeersSendWakesIt() throws Exception {
        try (Loopback lb = Loopback.withChannels("shm", Map.of())) {
            MemoryRegion mrA = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
            MemoryRegion mrB = lb.pdB.register(lb.memB, Access.LOCAL_WRITE);
            WorkRequest w = new WorkRequest(1);
            lb.qpB.postRecv(w.reset().wrId(7).addSge(lb.memB.address(), 64, mrB.lkey()));
            lb.cqB.requestNotify(false);
            CompletableFuture<CompletionQueue> got = CompletableFuture.supplyAsync(() -> lb.chB.getEvent(60, TimeUnit.SECONDS));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (sleepingWord(lb) != 1) {
                assertThat(System.nanoTime()).as("B's waiter sleeps on the lane's word").isLessThan(deadline);
                Thread.sleep(1);
            }
            Thread.sleep(20); // (several of its bounded sleeps: the peer's SEND must wake the one it is in)
            lb.qpA.postSend(w.reset().wrId(1).opcode(Opcode.SEND).signaled(true).addSge(lb.memA.address(), 64, mrA.lkey()));
            assertThat(got.get(30, TimeUnit.SECONDS)).isSameAs(lb.cqB);
            lb.cqB.ackEvents(1);
            WorkCompletion wc = lb.one(lb.cqB);
            assertThat(wc.wrId()).isEqualTo(7);
            assertThat(wc.status()).isEqualTo(WcStatus.SUCCESS);
            assertThat(sleepingWord(lb)).as("the waiter cleared its word").isZero();
            // (whether this one SEND ended a sleep by its wake or came between two bounded sleeps is a
            // race; that the wakes end most sleeps is the spaced test's)
            assertThat(lb.chB.diagnostics()).matches(".*: [1-9]\\d* sleep\\(s\\) on its connections, \\d+ woken");
            while (lb.poll(lb.cqA) == 0) {
                Thread.onSpinWait();
            }
            mrA.close();
            mrB.close();
        }
    }

    /**
     * Spaced SENDs each find B's waiter asleep (its device has no progress thread, and it waits on its
     * channel for up to a minute): each is received through an event, and most of the sleeps they end
     * are ended by the peer's wake, not by the sleep's bound.
     */
    @Test
    void spacedSendsEachWakeTheSleepingWaiter() throws Exception {
        try (Loopback lb = Loopback.withChannels("shm", Map.of())) {
            MemoryRegion mrA = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
            MemoryRegion mrB = lb.pdB.register(lb.memB, Access.LOCAL_WRITE);
            int rounds = 20;
            WorkRequest w = new WorkRequest(1);
            for (int i = 0; i < rounds; i++) {
                lb.qpB.postRecv(w.reset().wrId(i).addSge(lb.memB.address() + 64L * i, 64, mrB.lkey()));
            }
            CompletableFuture<Integer> received = CompletableFuture.supplyAsync(() -> {
                WorkCompletion[] wcs = {new WorkCompletion(), new WorkCompletion()};
                int n = 0;
                while (n < rounds) {
                    lb.cqB.requestNotify(false);
                    int k = lb.cqB.poll(wcs);
                    if (k == 0) {
                        CompletionQueue cq = lb.chB.getEvent(60, TimeUnit.SECONDS);
                        assertThat(cq).as("an event within the minute").isSameAs(lb.cqB);
                        cq.ackEvents(1);
                        k = lb.cqB.poll(wcs);
                    }
                    for (int i = 0; i < k; i++) {
                        assertThat(wcs[i].status()).isEqualTo(WcStatus.SUCCESS);
                        assertThat(wcs[i].wrId()).isEqualTo(n++);
                    }
                }
                return n;
            });
            long wokenBefore = woken(lb);
            for (int i = 0; i < rounds; i++) {
                Thread.sleep(20); // B's waiter is asleep on the lane by now (its sleeps grew to 1 ms first)
                lb.memA.set(JAVA_INT, 0, i);
                lb.qpA.postSend(w.reset().wrId(i).opcode(Opcode.SEND).signaled(true).addSge(lb.memA.address(), 64, mrA.lkey()));
                while (lb.poll(lb.cqA) == 0) {
                    Thread.onSpinWait();
                }
            }
            assertThat(received.get(60, TimeUnit.SECONDS)).isEqualTo(rounds);
            for (int i = 0; i < rounds; i++) {
                assertThat(lb.memB.get(JAVA_INT, 64L * i)).isEqualTo(i);
            }
            long woken = woken(lb) - wokenBefore;
            System.out.println("shm: " + rounds + " spaced SENDs to a channel's sleeping waiter: " + lb.chB.diagnostics());
            assertThat(woken).as("the waiter was woken by the peer's SENDs").isGreaterThanOrEqualTo(rounds / 2);
            mrA.close();
            mrB.close();
        }
    }

    private static long woken(Loopback lb) {
        String d = lb.chB.diagnostics();
        return Long.parseLong(d.replaceAll(".* (\\d+) woken$", "$1"));
    }
}
