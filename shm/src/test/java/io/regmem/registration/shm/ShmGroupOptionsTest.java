package io.regmem.registration.shm;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.Errno;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.Refused;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** shm's group options: {@code groupRingBytes} a power of two from 64 KiB to 64 MiB, {@code multicastUdp} a boolean. */
@ExtendWith(NoLeaks.class)
class ShmGroupOptionsTest {
    private static final String SECRET = "shm-group-options-test-secret-0123456789";

    @Test
    void aRingSizeOrAFlagOutsideTheRulesIsRefusedNamingTheOption() {
        for (String bad : new String[] {"1000", "65535", String.valueOf(3 << 20), String.valueOf(128 << 20), "-1", "big"}) {
            Refused.assertRdma(() -> RdmaDevice.open("shm", Map.of("secret", SECRET, "groupRingBytes", bad)), Errno.EINVAL,
                    "groupRingBytes");
        }
        Refused.assertRdma(() -> RdmaDevice.open("shm", Map.of("secret", SECRET, "multicastUdp", "maybe")), Errno.EINVAL,
                "multicastUdp");
        assertThat(RdmaDevice.openDevices()).isEmpty();
    }

    @Test
    void theBoundsThemselvesAreTaken() {
        for (String good : new String[] {String.valueOf(64 << 10), String.valueOf(64 << 20)}) {
            try (RdmaDevice d = RdmaDevice.open("shm", Map.of("secret", SECRET, "groupRingBytes", good, "multicastUdp", "true"))) {
                assertThat(d.supportsDatagrams()).isTrue();
            }
        }
    }
}
