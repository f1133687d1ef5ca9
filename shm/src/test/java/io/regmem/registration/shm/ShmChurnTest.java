package io.regmem.registration.shm;

import io.regmem.registration.testkit.Churn;
import io.regmem.registration.testkit.NoLeaks;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * 10,000 connect / WRITE / READ / disconnect cycles from client processes against one shm listener,
 * most of the clients killed or ending themselves at random points ({@link Churn}): the listener's
 * progress thread survives them all and serves a new client byte-exact.
 */
@ExtendWith(NoLeaks.class)
class ShmChurnTest {
    @Test
    void aListenersProgressThreadOutlivesTenThousandCyclesOfPeersKilledAtRandomPoints() throws Exception {
        new Churn("shm", Map.of("secret", "shm-churn-test-secret-0123456789"), 2, 2026_12_04L)
                .expecting("lane to process").run(Integer.getInteger("regmem.churn.cycles", 10_000), 600);
    }
}
