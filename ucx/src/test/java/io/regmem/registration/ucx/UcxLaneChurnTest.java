package io.regmem.registration.ucx;

import io.regmem.registration.testkit.Churn;
import io.regmem.registration.testkit.NoLeaks;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * 10,000 connect / WRITE / READ / disconnect cycles from client processes against one ucx listener,
 * over the same-host lane (the default between processes of one host), most of the clients killed or
 * ending themselves at random points ({@link Churn}): the listener's progress thread survives them
 * all and serves a new client byte-exact.
 */
@ExtendWith(NoLeaks.class)
class UcxLaneChurnTest {
    @Test
    void aListenersProgressThreadOutlivesTenThousandCyclesOfPeersKilledAtRandomPoints() throws Exception {
        new Churn("ucx", Map.of("secret", "ucx-churn-test-secret-0123456789", "sameHostLane", "true"), 2, 2026_12_05L)
                .expecting("over the same-host lane").run(Integer.getInteger("regmem.churn.cycles", 10_000), 900);
    }
}
