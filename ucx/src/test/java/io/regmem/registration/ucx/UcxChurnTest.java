package io.regmem.registration.ucx;

import io.regmem.registration.testkit.Churn;
import io.regmem.registration.testkit.NoLeaks;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * {@link UcxLaneChurnTest} with the same-host lane off: the connections go over UCX's own transports
 * (a worker per peer process at the listener), and every connect a live client makes to the listener
 * succeeds while other clients are killed or end themselves at random points, mid-handshake included.
 * 2,000 cycles in CI ({@code -Dregmem.churn.cycles} for more; 10,000 over {@code UCX_TLS=tcp,self} and
 * over UCX's defaults passed here).
 */
@ExtendWith(NoLeaks.class)
class UcxChurnTest {
    @Test
    void everyConnectToALiveListenerOverUcxSucceedsWhilePeersAreKilledAtRandomPoints() throws Exception {
        new Churn("ucx", Map.of("secret", "ucx-churn-test-secret-0123456789", "sameHostLane", "false"), 2, 2026_12_07L)
                .expecting("on the worker").run(Integer.getInteger("regmem.churn.cycles", 2_000), 600);
    }
}
