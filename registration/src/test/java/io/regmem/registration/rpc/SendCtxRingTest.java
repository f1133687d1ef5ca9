package io.regmem.registration.rpc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.testkit.NoLeaks;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The send-context ring: the trace of section 4 (N = 4), invariant 13, stale completions, signaling. */
@ExtendWith(NoLeaks.class)
class SendCtxRingTest {

    static void assertEinval(Runnable r) {
        assertThatThrownBy(r::run).isInstanceOfSatisfying(RdmaException.class, e -> assertThat(e.errno()).isEqualTo(Errno.EINVAL));
    }

    @Test
    void theTraceWithFourSlots() {
        List<Integer> released = new ArrayList<>();
        SendCtxRing ring = new SendCtxRing(2, 3, sc -> released.add(sc.index()), null);
        assertThat(ring.size()).isEqualTo(4);
        assertThat(ring.getLocked().index()).isEqualTo(1);
        SendCtx two = ring.getLocked();
        assertThat(two.index()).isEqualTo(2);
        assertThat(ring.getLocked().index()).isEqualTo(3);
        assertThat(ring.getLocked()).as("next(3) = 0 = tail").isNull();
        assertThat(ring.outstanding()).as("N - 1 at most").isEqualTo(3);
        ring.putLocked(two);
        assertThat(released).as("the CQE for slot 2 sweeps 1 and 2").containsExactly(1, 2);
        assertThat(ring.getLocked().index()).isEqualTo(0);
        assertThat(ring.getLocked().index()).isEqualTo(1);
        assertThat(ring.getLocked()).as("next(1) = 2 = tail").isNull();
        assertThat(ring.fullEvents()).isEqualTo(2);
    }

    @Test
    void invariant13_putsOutsideTheOutstandingRangeAndUngetsOfOlderSlotsAreRefused() {
        List<Integer> released = new ArrayList<>();
        SendCtxRing ring = new SendCtxRing(4, 3, sc -> released.add(sc.index()), null);
        SendCtx a = ring.getLocked();
        SendCtx b = ring.getLocked();
        SendCtx notYet = ring.slot(5);
        assertEinval(() -> ring.putLocked(notYet));
        assertEinval(() -> ring.putLocked(ring.slot(0)));
        assertEinval(() -> ring.ungetLocked(a));
        assertThat(ring.outstanding()).as("refusals change nothing").isEqualTo(2);
        long bId = b.wrId();
        ring.ungetLocked(b);
        assertThat(ring.outstanding()).isEqualTo(1);
        SendCtx again = ring.getLocked();
        assertThat(again).as("the ungot slot is the next handed out").isSameAs(b);
        assertThat(again.wrId()).as("with the number given back: the first Send never existed").isEqualTo(bId);
        ring.putLocked(a);
        assertThat(released).containsExactly(a.index());
        assertEinval(() -> ring.putLocked(a));
        ring.putLocked(b);
        assertEinval(() -> ring.ungetLocked(b));
        assertThat(ring.outstanding()).isZero();
    }

    @Test
    void aSlotIsNotHandedOutAgainBeforeItIsReleased() {
        SendCtxRing ring = new SendCtxRing(3, 3, null, null);
        boolean[] out = new boolean[ring.size()];
        java.util.ArrayDeque<SendCtx> fifo = new java.util.ArrayDeque<>();
        java.util.Random rnd = new java.util.Random(1);
        for (int step = 0; step < 10_000; step++) {
            if (rnd.nextBoolean()) {
                SendCtx sc = ring.getLocked();
                assertThat(sc == null).isEqualTo(fifo.size() == ring.size() - 1);
                if (sc != null) {
                    assertThat(out[sc.index()]).as("slot %d handed out twice", sc.index()).isFalse();
                    out[sc.index()] = true;
                    fifo.add(sc);
                }
            } else if (!fifo.isEmpty()) {
                int k = rnd.nextInt(fifo.size());
                SendCtx upTo = null;
                for (int i = 0; i <= k; i++) {
                    upTo = fifo.poll();
                    out[upTo.index()] = false;
                }
                assertThat(ring.complete(upTo.wrId())).isTrue();
            }
        }
    }

    @Test
    void staleAndDuplicateCompletionsAreRejectedAndCounted() {
        SendCtxRing ring = new SendCtxRing(2, 3, null, null);
        SendCtx a = ring.getLocked();
        long oldId = a.wrId();
        assertThat(ring.complete(oldId)).isTrue();
        assertThat(ring.complete(oldId)).as("duplicate").isFalse();
        ring.getLocked(); // 2
        ring.getLocked(); // 3
        ring.complete(ring.slot(3).wrId());
        SendCtx reused = ring.getLocked(); // 0
        ring.getLocked(); // 1: slot 1 again, a later hand-out
        assertThat(ring.slot(1).wrId()).isEqualTo(oldId + ring.size());
        assertThat(ring.complete(oldId)).as("a completion for slot 1's earlier user").isFalse();
        assertThat(ring.outstanding()).isEqualTo(2);
        assertThat(ring.complete(-1L)).isFalse();
        assertThat(ring.complete(ring.slot(1).wrId() + 1)).as("an id not handed out yet").isFalse();
        assertThat(ring.complete(1L << 62 | ring.slot(1).wrId())).as("a tagged id").isFalse();
        assertThat(ring.staleCompletions()).isEqualTo(5);
        assertThat(ring.complete(reused.wrId())).isTrue();

        SendCtxRing other = new SendCtxRing(4, 3, null, null);
        SendCtx posted = other.getLocked();
        SendCtx failed = other.getLocked();
        other.ungetLocked(failed); // its Send was never posted
        assertThat(other.complete(failed.wrId())).as("a completion for a slot given back").isFalse();
        assertThat(other.outstanding()).isEqualTo(1);
        assertThat(other.complete(posted.wrId())).isTrue();
    }

    /**
     * The producer answers from its last look at the head; an unget moves the head back, so a
     * completion for the slot given back must make it look again (the unget count tells it).
     */
    @Test
    void aCompletionForASlotGivenBackIsRefusedAfterTheProducerSawItHandedOut() {
        SendCtxRing ring = new SendCtxRing(4, 3, null, null);
        SendCtx a = ring.getLocked();
        ring.getLocked();
        SendCtx c = ring.getLocked();
        assertThat(ring.complete(a.wrId())).as("the producer looks at the head: three handed out").isTrue();
        long cId = c.wrId();
        ring.ungetLocked(c);
        assertThat(ring.complete(cId)).as("given back, never posted").isFalse();
        assertThat(ring.outstanding()).isEqualTo(1);
        assertThat(ring.getLocked()).isSameAs(c);
        assertThat(ring.complete(cId)).as("handed out again under the same id").isTrue();
        assertThat(ring.outstanding()).isZero();
    }

    @Test
    void afterAResetTheIdsGoOnAndEarlierCompletionsAreStale() {
        List<Integer> released = new ArrayList<>();
        SendCtxRing ring = new SendCtxRing(4, 3, sc -> released.add(sc.index()), null);
        ring.getLocked();
        SendCtx b = ring.getLocked();
        long bId = b.wrId();
        ring.reset();
        assertThat(released).as("the reset releases what was outstanding").containsExactly(1, 2);
        assertThat(ring.outstanding()).isZero();
        SendCtx first = ring.getLocked();
        assertThat(first.index()).as("starts over at slot 1").isEqualTo(1);
        assertThat(first.wrId()).isEqualTo(bId + 1);
        assertThat(ring.complete(bId)).as("a completion from before the reset").isFalse();
        assertThat(ring.complete(first.wrId())).isTrue();
        assertThat(released).containsExactly(1, 2, 1);
    }

    @Test
    void aLostCompletionIsCoveredByTheNextOne() {
        List<Integer> released = new ArrayList<>();
        SendCtxRing ring = new SendCtxRing(8, 3, sc -> released.add(sc.index()), null);
        SendCtx first = ring.getLocked();
        SendCtx second = ring.getLocked();
        SendCtx third = ring.getLocked();
        assertThat(ring.newestWrId()).as("what \"everything posted so far\" would complete").isEqualTo(third.wrId());
        // first's and second's completions are lost; third's sweeps them all, in order
        assertThat(ring.complete(third.wrId())).isTrue();
        assertThat(ring.newestWrId()).as("nothing outstanding").isEqualTo(-1);
        assertThat(released).containsExactly(first.index(), second.index(), third.index());
        assertThat(ring.complete(first.wrId())).as("if the lost one turns up after all, it is stale").isFalse();
        assertThat(ring.outstanding()).isZero();
    }

    @Test
    void theSpaceHookRunsOnceAfterAFullRingGetsRoom() {
        AtomicInteger wakes = new AtomicInteger();
        SendCtxRing ring = new SendCtxRing(1, 3, null, wakes::incrementAndGet);
        SendCtx a = ring.getLocked();
        SendCtx b = ring.getLocked();
        assertThat(ring.getLocked()).isNull();
        ring.putLocked(a);
        assertThat(wakes).hasValue(1);
        ring.putLocked(b);
        assertThat(wakes).as("nobody waits any more").hasValue(1);
    }

    @Test
    void signalingKeepsUnsignaledWorkBelowTheRing() {
        SendCtxRing ring = new SendCtxRing(64, 3, null, null);
        assertThat(ring.batch()).isEqualTo(8);
        int unsignaled = 0;
        int maxUnsignaled = 0;
        for (int i = 0; i < 1000; i++) {
            boolean mustSignal = i % 37 == 0;
            int wrs = 1 + i % 3;
            if (ring.signal(wrs, mustSignal)) {
                unsignaled = 0;
            } else {
                unsignaled += wrs;
                maxUnsignaled = Math.max(maxUnsignaled, unsignaled);
            }
        }
        assertThat(maxUnsignaled).isLessThanOrEqualTo(ring.batch()).isLessThan(ring.size() - 1);
        assertThat(ring.signal(1, false)).isFalse();
        assertThat(ring.signal(1, true)).as("a Send with mapped pages is always signaled").isTrue();
    }

    /**
     * A sender that finds the ring full waits for the space hook alone (no polling): every such wait
     * must end. The flag and the tail are a Dekker pair (a volatile store, then a volatile load, on
     * each side); with the producer's tail store not volatile, it can pass its load of the flag and
     * a wake-up is lost, which this test sees as a wait that never ends.
     */
    @Test
    void aSenderWaitingForSpaceIsAlwaysWoken() throws Exception {
        int sends = 300_000;
        java.util.concurrent.Semaphore space = new java.util.concurrent.Semaphore(0);
        SendCtxRing ring = new SendCtxRing(2, 3, null, space::release);
        org.jctools.queues.SpscArrayQueue<Long> sq = new org.jctools.queues.SpscArrayQueue<>(8);
        Thread producer = Thread.ofPlatform().start(() -> {
            for (int done = 0; done < sends; ) {
                Long id = sq.poll();
                if (id == null) {
                    Thread.onSpinWait();
                } else {
                    ring.complete(id);
                    done++;
                }
            }
        });
        long waits = 0;
        for (int posted = 0; posted < sends; posted++) {
            SendCtx sc;
            while ((sc = ring.getLocked()) == null) {
                waits++;
                if (!space.tryAcquire(10, java.util.concurrent.TimeUnit.SECONDS)) {
                    producer.interrupt();
                    throw new AssertionError("wake-up lost after " + posted + " Sends: " + ring);
                }
            }
            while (!sq.offer(sc.wrId())) {
                Thread.onSpinWait();
            }
        }
        producer.join();
        assertThat(waits).as("the ring filled").isPositive();
        assertThat(ring.outstanding()).isZero();
    }

    /** The consumer and the producer on two threads, with ownership marks: no slot is ever used by both. */
    @Test
    void consumerAndProducerOnTwoThreadsNeverShareASlot() throws Exception {
        int sends = 2_000_000;
        AtomicIntegerArray owner = new AtomicIntegerArray(66); // 1 while the consumer owns the slot
        AtomicReference<Throwable> failure = new AtomicReference<>();
        SendCtxRing ring = new SendCtxRing(64, 3, sc -> {
            if (!owner.compareAndSet(sc.index(), 1, 0)) {
                failure.compareAndSet(null, new AssertionError("released slot " + sc.index() + " not owned"));
            }
        }, null);
        // The "send queue": slot ids the consumer posted, completed by the producer in order.
        org.jctools.queues.SpscArrayQueue<Long> sq = new org.jctools.queues.SpscArrayQueue<>(128);
        Thread producer = Thread.ofPlatform().start(() -> {
            long done = 0;
            long pending = -1;
            int sinceSignal = 0;
            while (done < sends && failure.get() == null) {
                Long id = sq.poll();
                if (id == null) {
                    Thread.onSpinWait();
                    continue;
                }
                done++;
                pending = id;
                if (++sinceSignal == 4 || done == sends) { // one completion for every four Sends
                    ring.complete(pending);
                    sinceSignal = 0;
                }
            }
        });
        long posted = 0;
        while (posted < sends && failure.get() == null) {
            SendCtx sc = ring.getLocked();
            if (sc == null) {
                Thread.onSpinWait();
                continue;
            }
            if (!owner.compareAndSet(sc.index(), 0, 1)) {
                failure.compareAndSet(null, new AssertionError("slot " + sc.index() + " handed out while owned"));
            }
            while (!sq.offer(sc.wrId())) {
                Thread.onSpinWait();
            }
            posted++;
        }
        producer.join();
        assertThat(failure.get()).isNull();
        assertThat(ring.outstanding()).isZero();
        assertThat(ring.staleCompletions()).isZero();
    }
}
