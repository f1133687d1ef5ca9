package io.regmem.registration.rpc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.testkit.NoLeaks;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The poll role on its own: one holder, re-entry refused, a bounded wait that gives up cleanly. */
@ExtendWith(NoLeaks.class)
class PollRoleTest {

    @Test
    void aWaiterGivesUpAfterItsLimitAndTheHolderKeepsTheRole() throws Exception {
        PollRole role = new PollRole("transport-under-test", TimeUnit.MILLISECONDS.toNanos(50));
        CountDownLatch held = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        AtomicBoolean reentryRefused = new AtomicBoolean();
        Thread holder = Thread.ofPlatform().start(() -> {
            assertThat(role.tryTake()).isTrue();
            try {
                role.tryTake(); // a handler polling its own transport
            } catch (RdmaException e) {
                reentryRefused.set(e.errno() == Errno.EBUSY);
            }
            held.countDown();
            try {
                release.await(10, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            role.release();
        });
        held.await(10, TimeUnit.SECONDS);
        assertThat(reentryRefused).isTrue();
        assertThat(role.tryTake()).as("another thread holds it").isFalse();
        long start = System.nanoTime();
        RdmaException e = catchThrowableOfType(RdmaException.class, role::await);
        assertThat(e.errno()).isEqualTo(Errno.EBUSY);
        assertThat(e.getMessage()).contains("transport-under-test").contains("50 ms").contains("changed nothing");
        assertThat(System.nanoTime() - start).as("it waited").isGreaterThanOrEqualTo(TimeUnit.MILLISECONDS.toNanos(50));
        assertThat(role.tryTake()).as("the holder still has it").isFalse();
        release.countDown();
        holder.join(10_000);
        role.await(); // free now: taken at once
        assertThat(catchThrowableOfType(RdmaException.class, role::tryTake).errno())
                .as("now this thread holds it: taking it again is re-entry").isEqualTo(Errno.EBUSY);
        role.release();
        assertThat(role.tryTake()).isTrue();
        role.release();
    }
}
