package io.regmem.registration.rpc;

import io.regmem.registration.LincheckBudget;
import org.jetbrains.lincheck.datastructures.IntGen;
import org.jetbrains.lincheck.datastructures.ModelCheckingOptions;
import org.jetbrains.lincheck.datastructures.Operation;
import org.jetbrains.lincheck.datastructures.Param;
import org.junit.jupiter.api.Test;

/**
 * Lincheck model checking of the request free list and the reply free list of {@link RpcBuffer}
 * ({@link FreeLists}, over requests and replies without buffers, so nothing allocates): requests are
 * taken (the lowest free number of a word, by compare-and-set) and put back (an atomic OR) from any
 * thread (handed to one RPC at a time, put back once); replies are pushed from any thread (an atomic
 * OR) and popped by one thread at a time (the receive poster). Linearizable against the same
 * operations run sequentially. Bounded for CI; a soak run explores more ({@link LincheckBudget}).
 *
 * <p>A soak run of this test found the first reply list (a compare-and-set on the reply's state,
 * then an enqueue) not linearizable: a pop overlapping a push could miss the reply. The bitmap makes
 * a push one atomic step.
 */
@Param(name = "id", gen = IntGen.class, conf = "0:2")
public class FreeListsLincheckTest {
    private final FreeLists lists = new FreeLists(3, 3);
    private final Req[] reqs = new Req[3];
    private final Rep[] reps = new Rep[3];

    public FreeListsLincheckTest() {
        for (int i = 0; i < 3; i++) {
            reqs[i] = new Req(null, i, null, null, null);
            lists.addFree(reqs[i]);
            reps[i] = new Rep(i, null);
            lists.addRep(reps[i]); // made taken, as RpcBuffer makes them
            lists.push(reps[i]);
        }
    }

    /** Take a free request; its id, or -1 when none is free. */
    @Operation
    public int get() {
        Req r = lists.get();
        return r == null ? -1 : r.id();
    }

    /** Put request {@code id} back; false if it was not taken (a second put is refused). */
    @Operation
    public boolean put(@Param(name = "id") int id) {
        return lists.release(reqs[id]);
    }

    /** The receive poster takes a reply; its id, or -1. */
    @Operation(nonParallelGroup = "receiver")
    public int pop() {
        Rep rep = lists.pop();
        return rep == null ? -1 : rep.id();
    }

    /** Any thread gives reply {@code id} back; false if it was free already. */
    @Operation
    public boolean push(@Param(name = "id") int id) {
        return lists.push(reps[id]);
    }

    @Test
    void isLinearizable() {
        new ModelCheckingOptions()
                .iterations(LincheckBudget.iterations(6))
                .invocationsPerIteration(LincheckBudget.invocations(150))
                .threads(2)
                .actorsPerThread(3)
                .check(FreeListsLincheckTest.class);
    }
}
