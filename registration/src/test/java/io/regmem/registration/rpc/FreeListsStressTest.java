package io.regmem.registration.rpc;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.testkit.NoLeaks;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicReferenceArray;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The request and reply free lists across both cores, with ownership marks, at sizes where they
 * span several bitmap words.
 */
@ExtendWith(NoLeaks.class)
class FreeListsStressTest {

    /**
     * Requests over four bitmap words, on both cores: each thread holds up to 49 of 100 at once, so
     * at least two are free at every moment; a get must never come back empty-handed nor hand out
     * a request another thread holds, and no request is lost.
     */
    @Test
    void requestsOverSeveralWordsAreNeverMissedNorSharedOnBothCores() throws Exception {
        int n = 100;
        FreeLists lists = new FreeLists(n, 1);
        Req[] reqs = new Req[n];
        for (int i = 0; i < n; i++) {
            reqs[i] = new Req(null, i, null, null, null);
            lists.addFree(reqs[i]);
        }
        AtomicIntegerArray owned = new AtomicIntegerArray(n);
        AtomicInteger misses = new AtomicInteger();
        AtomicInteger shared = new AtomicInteger();
        int rounds = 400_000;
        Runnable worker = () -> {
            java.util.SplittableRandom rnd = new java.util.SplittableRandom(Thread.currentThread().threadId());
            Req[] mine = new Req[49];
            int held = 0;
            for (int i = 0; i < rounds; i++) {
                if (held < mine.length && (held == 0 || rnd.nextInt(3) > 0)) {
                    Req r = lists.get();
                    if (r == null) {
                        misses.incrementAndGet();
                        continue;
                    }
                    if (!owned.compareAndSet(r.id(), 0, 1)) {
                        shared.incrementAndGet();
                    }
                    mine[held++] = r;
                } else {
                    int k = rnd.nextInt(held);
                    Req r = mine[k];
                    mine[k] = mine[--held];
                    owned.set(r.id(), 0);
                    if (!lists.release(r)) {
                        throw new AssertionError(r + " was held, yet its put was refused");
                    }
                }
            }
            for (int k = 0; k < held; k++) {
                owned.set(mine[k].id(), 0);
                lists.release(mine[k]);
            }
        };
        Thread a = Thread.ofPlatform().start(worker);
        Thread b = Thread.ofPlatform().start(worker);
        a.join();
        b.join();
        assertThat(misses).as("gets that found nothing while two or more requests were free").hasValue(0);
        assertThat(shared).as("requests handed out while another thread held them").hasValue(0);
        assertThat(lists.freeRequests()).as("none lost").isEqualTo(n);
    }

    /**
     * Replies over three bitmap words: one thread pops batches of them (the receive poster) and
     * hands them to another, which pushes them back (replies finished on another thread). No reply
     * is popped while it is out, none is lost, none is pushed twice.
     */
    @Test
    void repliesPoppedOnOneThreadAndPushedOnAnotherAreNeverSharedNorLost() throws Exception {
        int n = 150; // three 64-bit words
        FreeLists lists = new FreeLists(4, n);
        Rep[] reps = new Rep[n];
        for (int i = 0; i < n; i++) {
            reps[i] = new Rep(i, null);
            lists.addRep(reps[i]); // made taken, as RpcBuffer makes them
            lists.push(reps[i]);
        }
        AtomicIntegerArray out = new AtomicIntegerArray(n); // 1 while popped and not yet pushed back
        AtomicReferenceArray<Rep> handoff = new AtomicReferenceArray<>(n);
        AtomicInteger shared = new AtomicInteger();
        AtomicInteger refusedPushes = new AtomicInteger();
        int rounds = 500_000;
        AtomicInteger handedOver = new AtomicInteger(); // replies the popper handed over, in all
        java.util.concurrent.atomic.AtomicBoolean popperDone = new java.util.concurrent.atomic.AtomicBoolean();
        Thread pusher = Thread.ofPlatform().start(() -> {
            int pushed = 0;
            while (!popperDone.get() || pushed < handedOver.get()) {
                for (int i = 0; i < n; i++) {
                    Rep r = handoff.getAndSet(i, null);
                    if (r != null) {
                        out.set(r.id(), 0);
                        if (!lists.push(r)) {
                            refusedPushes.incrementAndGet();
                        }
                        pushed++;
                    }
                }
                Thread.onSpinWait();
            }
        });
        int popped = 0;
        Rep[] batch = new Rep[n];
        java.util.SplittableRandom rnd = new java.util.SplittableRandom(11);
        while (popped < rounds) {
            // Pop a batch (up to all of them, so the lowest free number moves across the words)
            // before handing any over, then hand the batch to the pusher.
            int want = 1 + rnd.nextInt(n);
            int k = 0;
            Rep r;
            while (k < want && (r = lists.pop()) != null) {
                if (!out.compareAndSet(r.id(), 0, 1)) {
                    shared.incrementAndGet();
                }
                batch[k++] = r;
            }
            if (k == 0) {
                Thread.onSpinWait();
                continue;
            }
            for (int i = 0; i < k; i++) {
                while (!handoff.compareAndSet(batch[i].id(), null, batch[i])) {
                    Thread.onSpinWait();
                }
                handedOver.incrementAndGet();
            }
            popped += k;
        }
        popperDone.set(true);
        pusher.join();
        assertThat(shared).as("replies popped while out").hasValue(0);
        assertThat(refusedPushes).as("pushes of a reply already free").hasValue(0);
        assertThat(lists.freeReplies()).as("none lost").isEqualTo(n);
    }
}
