package io.regmem.registration.rpc;

import io.regmem.registration.LincheckBudget;
import io.regmem.registration.testkit.NoLeaks;
import java.util.concurrent.atomic.AtomicInteger;
import org.jetbrains.lincheck.datastructures.IntGen;
import org.jetbrains.lincheck.datastructures.ModelCheckingOptions;
import org.jetbrains.lincheck.datastructures.Operation;
import org.jetbrains.lincheck.datastructures.Param;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Lincheck model checking of the request free list and the reply free list of {@link RpcBuffer}
 * ({@link FreeLists}, over requests and replies without buffers, so nothing allocates), at the
 * sizes where a scan crosses words: three requests and three replies in play, one in each of three
 * bitmap words, the rest taken. The free lists are bags (which free request a get returns depends
 * on where its scan starts), so the operations answer what a bag guarantees: a get or a pop
 * says whether it found one, and a put or a push gives back one of the requests or replies its
 * thread holds (false when it holds none). Linearizable against the same operations run
 * sequentially: above all, a get or a pop never comes back empty-handed while a request or a reply
 * was free at every moment of the call. (Double puts and pushes are refused; the unit and stress
 * tests check that: here a second put could race with a get of the same request.) Bounded for CI; a soak run explores more ({@link LincheckBudget}).
 *
 * <p>With three words this test found that a get scanning the words once could miss a request
 * put back into a word it had passed while another thread emptied the next. A soak run found that
 * the first reply list (a compare-and-set on the reply's state, then an enqueue) could miss a reply
 * pushed during a pop.
 */
@ExtendWith(NoLeaks.class)
@Param(name = "start", gen = IntGen.class, conf = "0:3")
public class FreeListsLincheckTest {
    /** Request and reply numbers in play: one in each of three bitmap words (of 32 or of 64 bits). */
    static final int[] IDS = {5, 70, 135};
    private final FreeLists lists = new FreeLists(200, 200);
    private final Req[] reqs = new Req[200];
    /**
     * The requests each of the two threads holds (taken from the list): bit i for {@code IDS[i]}.
     * A thread puts back only what it took itself, so its record is its own and needs no atomicity
     * with the list (a shared record would be a second, separate step of every get).
     */
    private final AtomicInteger heldBy0 = new AtomicInteger();
    private final AtomicInteger heldBy1 = new AtomicInteger();

    public FreeListsLincheckTest() {
        for (int id : IDS) {
            reqs[id] = new Req(null, id, null, null, null);
            lists.addFree(reqs[id]);
        }
    }

    /** Thread 0 takes a free request, the scan starting at word {@code start}; true if one was free. */
    @Operation(nonParallelGroup = "t0")
    public boolean get0(@Param(name = "start") int start) {
        return get(start, heldBy0);
    }

    /** Thread 1 takes one the same way. */
    @Operation(nonParallelGroup = "t1")
    public boolean get1(@Param(name = "start") int start) {
        return get(start, heldBy1);
    }

    /** Thread 0 puts back a request it holds; false when it holds none. */
    @Operation(nonParallelGroup = "t0")
    public boolean put0() {
        return put(heldBy0);
    }

    /** Thread 1 puts back a request it holds; false when it holds none. */
    @Operation(nonParallelGroup = "t1")
    public boolean put1() {
        return put(heldBy1);
    }

    private boolean get(int start, AtomicInteger held) {
        Req r = lists.get(start);
        if (r == null) {
            return false;
        }
        hold(held, r.id());
        return true;
    }

    private boolean put(AtomicInteger held) {
        int id = takeHeld(held);
        if (id < 0) {
            return false;
        }
        if (!lists.release(reqs[id])) {
            throw new AssertionError("request " + id + " was held, yet its put was refused");
        }
        return true;
    }

    private static void hold(AtomicInteger held, int id) {
        int bit = 1 << java.util.Arrays.binarySearch(IDS, id);
        held.getAndUpdate(h -> h | bit);
    }

    /** Takes the lowest id held, or -1. */
    private static int takeHeld(AtomicInteger held) {
        int h;
        do {
            h = held.get();
            if (h == 0) {
                return -1;
            }
        } while (!held.compareAndSet(h, h & (h - 1)));
        return IDS[Integer.numberOfTrailingZeros(h)];
    }

    @Test
    void requestsAreLinearizable() {
        new ModelCheckingOptions()
                .iterations(LincheckBudget.iterations(30))
                .invocationsPerIteration(LincheckBudget.invocations(200))
                .threads(2)
                .actorsPerThread(4)
                .check(FreeListsLincheckTest.class);
    }

    @Test
    void repliesAreLinearizable() {
        new ModelCheckingOptions()
                .iterations(LincheckBudget.iterations(12))
                .invocationsPerIteration(LincheckBudget.invocations(200))
                .threads(2)
                .actorsPerThread(4)
                .check(Replies.class);
    }

    /**
     * The reply list's operations, on the same layout: the receive poster pops replies and pushes
     * back what it popped; another thread pushes back replies it holds (reply 70 to begin with,
     * taken at the start, as a finished RPC's reply is). Each thread's record of what it holds is its
     * own.
     */
    public static class Replies {
        private final FreeLists lists = new FreeLists(200, 200);
        private final Rep[] reps = new Rep[200];
        private final AtomicInteger heldByPoster = new AtomicInteger();
        private final AtomicInteger heldByOther = new AtomicInteger(1 << 1); // IDS[1] = 70

        public Replies() {
            for (int id : IDS) {
                reps[id] = new Rep(id, null);
                lists.addRep(reps[id]); // made taken, as RpcBuffer makes them
                if (id != IDS[1]) {
                    lists.push(reps[id]);
                }
            }
        }

        /** The receive poster takes a reply; true if one was free. */
        @Operation(nonParallelGroup = "poster")
        public boolean pop() {
            Rep rep = lists.pop();
            if (rep == null) {
                return false;
            }
            hold(heldByPoster, rep.id());
            return true;
        }

        /** The receive poster gives back a reply it popped; false when it holds none. */
        @Operation(nonParallelGroup = "poster")
        public boolean pushOwn() {
            return push(heldByPoster);
        }

        /** Another thread gives back a reply it holds; false when it holds none. */
        @Operation(nonParallelGroup = "other")
        public boolean pushOther() {
            return push(heldByOther);
        }

        private boolean push(AtomicInteger held) {
            int id = takeHeld(held);
            if (id < 0) {
                return false;
            }
            if (!lists.push(reps[id])) {
                throw new AssertionError("reply " + id + " was held, yet its push was refused");
            }
            return true;
        }
    }
}
