package io.regmem.netty;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.netty.channel.EventLoopGroup;
import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.core.internal.Libc;
import io.regmem.core.internal.Prctl;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.Arena;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * An event loop's thread takes the transport's timer slack when it starts (so that its short sleeps
 * are not stretched by Linux's default 50 us), or keeps the one it inherited with 0, the default;
 * out-of-range values are refused.
 */
@ExtendWith(NoLeaks.class)
class RegmemLoopTimerSlackTest {

    /** The calling thread's timer slack (PR_GET_TIMERSLACK). */
    private static long slack() {
        try (Arena a = Arena.ofConfined()) {
            return Prctl.prctl(a.allocate(Libc.CAPTURE), Prctl.PR_GET_TIMERSLACK, 0);
        }
    }

    /** The timer slack of a loop's thread of {@code group}, read on it. */
    private static long loopSlack(EventLoopGroup group) throws Exception {
        return group.next().submit(RegmemLoopTimerSlackTest::slack).get(10, TimeUnit.SECONDS);
    }

    @Test
    void aLoopThreadTakesTheTransportsTimerSlack() throws Exception {
        long inherited = slack();
        try (Loops loops = new Loops(Map.of(), 1, 1, b -> b.timerSlackNanos(1))) {
            assertThat(loopSlack(loops.workers)).isEqualTo(1);
            assertThat(slack()).as("the thread that made the group keeps its own").isEqualTo(inherited);
        }
        try (Loops loops = new Loops(Map.of(), 1, 1, b -> b.timerSlackNanos(250_000))) {
            assertThat(loopSlack(loops.clients)).isEqualTo(250_000);
        }
        try (Loops loops = new Loops(Map.of(), 1, 1)) {
            assertThat(loops.transport.timerSlackNanos).isZero();
            assertThat(loopSlack(loops.workers)).as("the default, 0: what the thread inherited").isEqualTo(inherited);
        }
    }

    @Test
    void timerSlackOutsideZeroTo50MsIsRefused() {
        try (RdmaDevice dev = RdmaDevice.open("shm", Map.of())) {
            for (long bad : new long[] {-1, 50_000_001L, Long.MAX_VALUE}) {
                assertThatThrownBy(() -> RegmemTransport.builder(dev).timerSlackNanos(bad))
                        .isInstanceOf(RdmaException.class).hasMessageContaining("timerSlackNanos " + bad)
                        .satisfies(e -> assertThat(((RdmaException) e).errno()).isEqualTo(Errno.EINVAL));
            }
        }
    }
}
