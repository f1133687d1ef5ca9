package io.regmem.registration.ucx;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.CmId;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.testkit.NamespacedPair;
import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.Providers;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A ucx client process the listener refuses is told why by its ID (what {@code regmem demo --connect}
 * prints): the two sides' secrets differ; the listener serves another provider (shm).
 */
@ExtendWith(NoLeaks.class)
class UcxRefusalTest {
    private static final String SECRET = "ucx-refusal-test-secret-0123456789";

    @Test
    void aClientWithAnotherSecretIsToldTheSecretsDiffer() throws Exception {
        UcxAvailable.assumeInstalled();
        String address = Providers.address("ucx", "x");
        try (RdmaDevice dev = RdmaDevice.open("ucx", Map.of("secret", SECRET))) {
            CmId listener = dev.createCmId();
            listener.listen(address);
            String out = NamespacedPair.oneCycle("ucx", address, "secret=another-secret-long-enough-0123");
            assertThat(out).contains("REGMEM FAILED cycle 0: not connected: ECONNREFUSED", "the request failed",
                    "the two sides' connection secrets differ");
            assertThat(listener.getRequest()).isNull();
            listener.close();
        }
    }

    @Test
    void aUcxClientOfAnShmListenerIsToldItServesAnotherProvider() throws Exception {
        UcxAvailable.assumeInstalled();
        String address = Providers.address("shm", "x");
        try (RdmaDevice dev = RdmaDevice.open("shm", Map.of("secret", SECRET))) {
            CmId listener = dev.createCmId();
            listener.listen(address);
            String out = NamespacedPair.oneCycle("ucx", address, "secret=" + SECRET);
            assertThat(out).contains("REGMEM FAILED cycle 0: not connected: ECONNREFUSED",
                    "the listener serves another provider");
            assertThat(listener.getRequest()).isNull();
            listener.close();
        }
    }
}
