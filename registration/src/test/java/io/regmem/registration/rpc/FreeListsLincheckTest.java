package io.regmem.registration.rpc;

import io.regmem.registration.LincheckBudget;
import org.jetbrains.lincheck.datastructures.IntGen;
import org.jetbrains.lincheck.datastructures.ModelCheckingOptions;
import org.jetbrains.lincheck.datastructures.Operation;
import org.jetbrains.lincheck.datastructures.Param;
import org.jetbrains.lincheck.datastructures.Validate;
import org.junit.jupiter.api.Test;

/**
 * Lincheck model checking of the request free list and the reply stack of {@link RpcBuffer}
 * ({@link FreeLists}, over requests and replies without buffers, so nothing allocates). Requests are
 * taken (the lowest free number of a word, by compare-and-set) and put back (an atomic OR) from any
 * thread (handed to one RPC at a time, put back once): linearizable against the same operations run
 * sequentially. A reply is pushed from any thread and popped by one thread at a time (the receive
 * poster): every interleaving must leave it on the stack at most once, and on it exactly when it is
 * free, with no pop ever taking a reply that is not free. Bounded for CI; a soak run explores more
 * ({@link LincheckBudget}).
 *
 * <p>The reply stack is not linearizable, and its operations return nothing here: a push frees its
 * reply by compare-and-set (so a second push is refused) and then enqueues it, so a pop that overlaps
 * the push may find none, and a later push that overlapped it is refused (a soak run showed exactly
 * that). Nothing is lost: the reply is there once the push returns. One reply, because which free
 * reply a pop returns is not part of the contract either; several replies crossing between threads,
 * with ownership marks, are {@code FreeListsStressTest}'s.
 */
@Param(name = "id", gen = IntGen.class, conf = "0:2")
public class FreeListsLincheckTest {
    private final FreeLists lists = new FreeLists(3, 3);
    private final Req[] reqs = new Req[3];
    private final Rep rep = new Rep(0, null);

    public FreeListsLincheckTest() {
        for (int i = 0; i < 3; i++) {
            reqs[i] = new Req(null, i, null, null, null);
            lists.addFree(reqs[i]);
        }
        rep.move(Rep.FREE, Rep.POSTED);
        lists.push(rep);
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

    /** The receive poster takes the reply if it is on the stack (it is then the test's until pushed). */
    @Operation(nonParallelGroup = "receiver")
    public void pop() {
        Rep r = lists.pop(); // throws if it took a reply that was not free
        if (r != null && r != rep) {
            throw new AssertionError("popped " + r + ", which was never pushed");
        }
    }

    /** Any thread gives the reply back (refused, changing nothing, if it is free already). */
    @Operation
    public void push() {
        lists.push(rep);
    }

    /** After every scenario: the reply is free exactly when it is on the stack, and on it once. */
    @Validate
    public void theReplyIsFreeExactlyWhenItIsOnTheStackOnce() {
        boolean free = rep.state() == Rep.FREE;
        int copies = 0;
        while (lists.pop() != null) { // a second copy would throw: it is no longer free after the first pop
            copies++;
        }
        if (copies != (free ? 1 : 0)) {
            throw new AssertionError("reply " + (free ? "free" : "taken") + " with " + copies + " copies on the stack");
        }
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
