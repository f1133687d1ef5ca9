package io.regmem.registration.spi;

import io.regmem.registration.LincheckBudget;
import io.regmem.registration.testkit.NoLeaks;
import org.jetbrains.lincheck.datastructures.ModelCheckingOptions;
import org.jetbrains.lincheck.datastructures.Operation;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Lincheck model checking of {@link GracePeriod} as the data path uses it: two readers (each one
 * execution context, so its operations never overlap) look up the current registration inside a
 * section and use it twice; writers replace the registration (the invalidation), wait a grace
 * period and then reclaim the old one. Sequentially a reader never sees a reclaimed registration,
 * so every interleaving must give the same answer: a reader that does would make the history not
 * linearizable. Writers run in parallel with each other too. Bounded for CI; more in a soak run
 * ({@link LincheckBudget}). Checked to fail when {@code synchronize()} does not wait.
 */
@ExtendWith(NoLeaks.class)
public class GracePeriodLincheckTest {
    /** A registration: reclaimed once its memory may be reused. */
    static final class Registration {
        volatile boolean reclaimed;
    }

    private final GracePeriod grace = new GracePeriod();
    private final GracePeriod.Reader reader0 = grace.newReader();
    private final GracePeriod.Reader reader1 = grace.newReader();
    private volatile Registration current = new Registration();

    /** Reader 0 uses the current registration; true if it was never reclaimed while in use. */
    @Operation(nonParallelGroup = "reader0")
    public boolean use0() {
        return use(reader0);
    }

    /** Reader 1, the same. */
    @Operation(nonParallelGroup = "reader1")
    public boolean use1() {
        return use(reader1);
    }

    private boolean use(GracePeriod.Reader r) {
        r.enter();
        try {
            Registration reg = current; // the lookup, after entering
            boolean first = !reg.reclaimed; // "copy" a first piece
            boolean second = !reg.reclaimed; // and a second
            return first && second;
        } finally {
            r.exit();
        }
    }

    /** A writer invalidates the current registration, waits a grace period, then reclaims it. */
    @Operation
    public void deregister() {
        Registration old = current;
        current = new Registration();
        grace.synchronize();
        old.reclaimed = true;
    }

    @Test
    void readersNeverSeeAReclaimedRegistration() {
        new ModelCheckingOptions()
                .iterations(LincheckBudget.iterations(10))
                .invocationsPerIteration(LincheckBudget.invocations(300))
                .threads(3)
                .actorsPerThread(3)
                .check(GracePeriodLincheckTest.class);
    }
}
