package io.regmem.registration.shm;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.regmem.registration.CmId;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.link.Link;
import io.regmem.registration.testkit.NamespacedPair;
import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.Providers;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A requester the listener refuses before any application sees it is told why (REFUSED), in words
 * it can act on: the two sides' secrets differ, the listener serves another provider; through the
 * public API, {@link CmId#failureReason()} and the message of {@code awaitConnected}.
 */
@ExtendWith(NoLeaks.class)
class ShmRefusalTest {
    private static final String SECRET = "shm-refusal-test-secret-0123456789";

    private static Object hello(int port, String secret, byte[] address) throws IOException {
        Link l = Link.connect("test", ShmCm.KIND, "127.0.0.1", port, secret.getBytes(StandardCharsets.UTF_8), 5000);
        try {
            l.readChallenge(l.deadline());
            l.sendHello(0, Link.token(), address, new byte[0]);
            return l.readAnswer(l.deadline(), () -> { });
        } finally {
            l.close();
        }
    }

    @Test
    void aRequesterWithAnotherSecretOrAnotherProvidersAddressIsToldWhy() throws Exception {
        String address = Providers.address("shm", "x");
        int port = Integer.parseInt(address.split(":")[1]);
        try (RdmaDevice dev = RdmaDevice.open("shm", Map.of("secret", SECRET))) {
            CmId listener = dev.createCmId();
            listener.listen(address);
            byte[] offer = LaneSetup.offer(Lane.DEFAULT_CAPACITY).encode();
            assertThatThrownBy(() -> hello(port, "another secret, long enough", offer)).isInstanceOf(IOException.class)
                    .hasMessageContaining("refused the connection: the two sides' connection secrets differ");
            assertThatThrownBy(() -> hello(port, SECRET, "RMUX, a ucx worker address".getBytes(StandardCharsets.US_ASCII)))
                    .isInstanceOf(IOException.class).hasMessageContaining("refused the connection: the listener serves another provider");
            assertThat(listener.getRequest()).as("no application saw either").isNull();
            listener.close();
        }
    }

    /** A client process whose secret differs: its connect fails with the reason, and the ID says it. */
    @Test
    void aClientProcessWithAnotherSecretLearnsWhyFromItsId() throws Exception {
        String address = Providers.address("shm", "x");
        try (RdmaDevice dev = RdmaDevice.open("shm", Map.of("secret", SECRET))) {
            CmId listener = dev.createCmId();
            listener.listen(address);
            String out = NamespacedPair.oneCycle("shm", address, "secret=another-secret-long-enough-0123");
            assertThat(out).contains("REGMEM FAILED cycle 0: not connected: ECONNREFUSED", "the request failed",
                    "the two sides' connection secrets differ");
            assertThat(listener.getRequest()).isNull();
            listener.close();
        }
    }
}
