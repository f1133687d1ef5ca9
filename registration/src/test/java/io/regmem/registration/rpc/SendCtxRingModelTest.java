package io.regmem.registration.rpc;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.testkit.NoLeaks;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;
import net.jqwik.api.lifecycle.AddLifecycleHook;

/**
 * Random chains of ring operations, one thread playing both roles, against a naive model (the
 * outstanding hand-outs in order, and every id ever released): hand-outs come in ring order with the
 * next id and stop at N - 1; an unget gives back the latest and the next hand-out repeats it; a
 * completion of any outstanding id releases exactly the hand-outs up to it, in order; duplicates,
 * ids of given-back or never-made hand-outs, tagged and negative ids are refused and counted; a
 * reset releases everything and the ids go on. The producer's cached look at the head is exercised
 * by completions that follow ungets and re-hand-outs at every distance.
 */
@AddLifecycleHook(NoLeaks.class)
class SendCtxRingModelTest {
    /** One outstanding hand-out of the model. */
    record Out(long id, int index) {
    }

    @Property(tries = 300)
    void ringAgreesWithTheModel(@ForAll @Size(min = 1, max = 200) List<@IntRange(min = 0, max = 99) Integer> ops,
                                @ForAll @IntRange(min = 1, max = 6) int maxRequests) {
        List<Integer> released = new ArrayList<>();
        SendCtxRing ring = new SendCtxRing(maxRequests, 3, sc -> released.add(sc.index()), null);
        int n = ring.size();
        ArrayDeque<Out> out = new ArrayDeque<>();
        List<Long> done = new ArrayList<>(); // ids released: a completion for one again is a duplicate
        long nextId = 1;
        int nextIndex = 1;
        long stale = 0;
        for (int op : ops) {
            if (op < 40) { // get
                SendCtx sc = ring.getLocked();
                if (out.size() == n - 1) {
                    assertThat(sc).as("full at N - 1").isNull();
                } else {
                    assertThat(sc.index()).isEqualTo(nextIndex);
                    assertThat(sc.wrId()).isEqualTo(nextId);
                    out.addLast(new Out(nextId++, nextIndex));
                    nextIndex = (nextIndex + 1) % n;
                }
            } else if (op < 50) { // unget the latest
                if (out.isEmpty()) {
                    continue;
                }
                Out latest = out.removeLast();
                ring.ungetLocked(ring.slot(latest.index()));
                nextId--;
                nextIndex = latest.index();
                if (out.isEmpty() || op % 2 == 0) { // a completion forged for it before it is handed out again
                    assertThat(ring.complete(latest.id())).as("given back: %s", latest).isFalse();
                    stale++;
                }
            } else if (op < 80) { // complete an outstanding id: releases everything up to it
                if (out.isEmpty()) {
                    continue;
                }
                int k = op % out.size();
                List<Integer> expect = new ArrayList<>();
                Out upTo;
                do {
                    upTo = out.removeFirst();
                    expect.add(upTo.index());
                    done.add(upTo.id());
                } while (expect.size() <= k);
                assertThat(ring.complete(upTo.id())).isTrue();
                assertThat(released).containsExactlyElementsOf(expect);
                released.clear();
            } else if (op < 88) { // a duplicate of a released id
                if (done.isEmpty()) {
                    continue;
                }
                assertThat(ring.complete(done.get(op % done.size()))).as("duplicate").isFalse();
                stale++;
            } else if (op < 96) { // ids that were never handed out, or are not ours
                long junk = switch (op % 4) {
                    case 0 -> nextId; // the next hand-out's, not made yet
                    case 1 -> nextId + n; // far ahead
                    case 2 -> -nextId; // negative
                    default -> (1L << 62) | nextId; // tagged as the user's work
                };
                assertThat(ring.complete(junk)).as("junk id %d", junk).isFalse();
                stale++;
            } else { // reset: everything outstanding is released, slots start over, ids go on
                List<Integer> expect = out.stream().map(Out::index).toList();
                out.forEach(o -> done.add(o.id()));
                out.clear();
                ring.reset();
                assertThat(released).containsExactlyElementsOf(expect);
                released.clear();
                nextIndex = 1;
            }
            assertThat(released).as("nothing released but by a completion or a reset").isEmpty();
            assertThat(ring.outstanding()).isEqualTo(out.size());
            assertThat(ring.staleCompletions()).isEqualTo(stale);
        }
    }
}
