package io.regmem.registration.rpc;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicReferenceArray;
import org.junit.jupiter.api.Test;

/**
 * The reply stack across both cores, with ownership marks: one thread pops replies (the receive
 * poster) and hands them to another, which pushes them back (replies finished on another thread).
 * No reply is ever popped while it is out, none is lost, none is pushed twice.
 */
class FreeListsStressTest {
    @Test
    void repliesPoppedOnOneThreadAndPushedOnAnotherAreNeverSharedNorLost() throws Exception {
        int n = 16;
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
        Thread pusher = Thread.ofPlatform().start(() -> {
            int pushed = 0;
            while (pushed < rounds) {
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
        while (popped < rounds) {
            Rep r = lists.pop();
            if (r == null) {
                Thread.onSpinWait();
                continue;
            }
            if (!out.compareAndSet(r.id(), 0, 1)) {
                shared.incrementAndGet();
            }
            while (!handoff.compareAndSet(r.id(), null, r)) {
                Thread.onSpinWait();
            }
            popped++;
        }
        pusher.join();
        assertThat(shared).as("replies popped while out").hasValue(0);
        assertThat(refusedPushes).as("pushes of a reply already free").hasValue(0);
        assertThat(lists.freeReplies()).as("none lost").isEqualTo(n);
    }
}
