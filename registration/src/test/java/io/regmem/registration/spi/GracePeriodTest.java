package io.regmem.registration.spi;

import io.regmem.registration.testkit.NoLeaks;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * {@link GracePeriod} on its own: a grace period with no reader in a section returns at once; one
 * waits for a reader that was inside a section when it began, and only for that one; a reader that
 * enters afterwards is not waited for; a reader waiting for itself is refused; readers unregister.
 */
@ExtendWith(NoLeaks.class)
class GracePeriodTest {

    @Test
    void aGracePeriodWaitsForTheSectionsInProgressAndOnlyForThem() throws Exception {
        GracePeriod grace = new GracePeriod();
        GracePeriod.Reader idle = grace.newReader();
        GracePeriod.Reader busy = grace.newReader();
        assertThat(grace.readerCount()).isEqualTo(2);
        grace.synchronize();
        assertThat(grace.periods()).isEqualTo(1);
        assertThat(grace.periodsThatWaited()).as("nobody was inside a section").isZero();

        CountDownLatch entered = new CountDownLatch(1);
        CountDownLatch leave = new CountDownLatch(1);
        Thread reader = Thread.ofPlatform().start(() -> {
            busy.enter();
            entered.countDown();
            try {
                leave.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            busy.exit();
        });
        entered.await();
        assertThat(busy.inSection()).isTrue();
        assertThat(idle.inSection()).isFalse();
        AtomicLong returnedAt = new AtomicLong();
        Thread writer = Thread.ofPlatform().start(() -> {
            grace.synchronize();
            returnedAt.set(System.nanoTime());
        });
        writer.join(200);
        assertThat(writer.isAlive()).as("waits while the reader is inside").isTrue();
        // A section that begins after the grace period did is not waited for.
        idle.enter();
        long released = System.nanoTime();
        leave.countDown();
        writer.join(TimeUnit.SECONDS.toMillis(10));
        assertThat(writer.isAlive()).as("returns once the old section ended, with the new one still open").isFalse();
        assertThat(returnedAt.get()).isGreaterThanOrEqualTo(released);
        assertThat(idle.inSection()).isTrue();
        idle.exit();
        reader.join();
        assertThat(grace.periodsThatWaited()).isEqualTo(1);
        idle.close();
        busy.close();
        busy.close(); // idempotent
        assertThat(grace.readerCount()).isZero();
    }

    @Test
    void aReaderCannotWaitForItself() {
        GracePeriod grace = new GracePeriod();
        try (GracePeriod.Reader r = grace.newReader()) {
            r.enter();
            assertThatThrownBy(grace::synchronize).isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("wait for itself");
            r.exit();
            grace.synchronize();
        }
    }
}
