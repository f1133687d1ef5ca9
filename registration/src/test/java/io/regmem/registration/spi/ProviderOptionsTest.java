package io.regmem.registration.spi;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.DeviceAttributes;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.testkit.NoLeaks;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.BusySpinIdleStrategy;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The one options parser every provider reads its device options with: typed values with their
 * ranges, and each bad value an {@code EINVAL} whose message names the provider, the option, the
 * rule and what was given, the same line whatever the provider.
 */
@ExtendWith(NoLeaks.class)
class ProviderOptionsTest {
    private static final Set<String> OWN = Set.of("progressThread", "idleStrategy", "ring", "pull", "waitMillis");

    private static ProviderOptions of(String provider, Map<String, String> given) {
        return ProviderOptions.of(provider, given, OWN);
    }

    private static void refused(Runnable r, Errno errno, String message) {
        assertThatThrownBy(r::run).isInstanceOfSatisfying(RdmaException.class, e -> {
            assertThat(e.errno()).isEqualTo(errno);
            assertThat(e.getMessage()).isEqualTo(errno.name() + ": " + message);
        });
    }

    @Test
    void anUnknownOptionIsRefusedNamingEveryKnownOne() {
        assertThatThrownBy(() -> of("p", Map.of("rnig", "1"))).isInstanceOfSatisfying(RdmaException.class, e -> {
            assertThat(e.errno()).isEqualTo(Errno.EINVAL);
            assertThat(e.getMessage()).startsWith("EINVAL: p: unknown option 'rnig' (known: [").contains("maxSendSge", "ring", "pull");
        });
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "ring       | 12      | p: ring must be 16 to 1024, got 12",
        "ring       | 1025    | p: ring must be 16 to 1024, got 1025",
        "ring       | 0x20    | p: ring must be 16 to 1024, got 0x20",
        "ring       | ''      | 'p: ring must be 16 to 1024, got '",
        "ring       | 99999999999999999999 | p: ring must be 16 to 1024, got 99999999999999999999",
        "waitMillis | -1      | p: waitMillis must be 0 to 600000, got -1",
        "waitMillis | 600001  | p: waitMillis must be 0 to 600000, got 600001",
        "pull       | yes     | p: pull must be true or false, got yes",
        "pull       | TRUE    | p: pull must be true or false, got TRUE",
        "progressThread | 1   | p: progressThread must be true or false, got 1",
        "idleStrategy | nap   | p: idleStrategy must be busy, yield, backoff or sleep, got nap",
    })
    void aBadValueIsOneLineNamingTheProviderTheOptionTheRuleAndTheValue(String name, String value, String message) {
        ProviderOptions o = of("p", Map.of(name, value));
        refused(() -> {
            o.number("ring", 64, 16, 1024);
            o.millis("waitMillis", 5, 0);
            o.flag("pull", true);
            o.progressThread();
            o.idleStrategy();
        }, Errno.EINVAL, message);
    }

    @Test
    void valuesAndDefaults() {
        ProviderOptions given = of("p", Map.of("ring", "1024", "pull", "false", "waitMillis", "0", "progressThread", "true",
                "idleStrategy", "busy"));
        assertThat(given.number("ring", 64, 16, 1024)).isEqualTo(1024);
        assertThat(given.flag("pull", true)).isFalse();
        assertThat(given.millis("waitMillis", 5, 0)).isZero();
        assertThat(given.progressThread()).isTrue();
        assertThat(given.idleStrategy()).isInstanceOf(BusySpinIdleStrategy.class);
        assertThat(given.idleSleeps()).isFalse();
        ProviderOptions none = of("p", Map.of());
        assertThat(none.number("ring", 64, 16, 1024)).isEqualTo(64);
        assertThat(none.flag("pull", true)).isTrue();
        assertThat(none.millis("waitMillis", 5, 0)).isEqualTo(5);
        assertThat(none.progressThread()).isFalse();
        assertThat(none.idleStrategy()).isInstanceOf(BackoffIdleStrategy.class);
        assertThat(none.idleSleeps()).isTrue();
        assertThat(none.get("ring", "x")).isEqualTo("x");
    }

    @Test
    void attributeLimitsLowerTheDefaultsAndAMissingCapabilityIsRefused() {
        DeviceAttributes a = of("p", Map.of("maxSendSge", "2", "ring", "32")).attributes(DeviceAttributes.defaults(), "no", null);
        assertThat(a.maxSendSge()).isEqualTo(2);
        refused(() -> of("p", Map.of("iWarp", "true")).attributes(DeviceAttributes.defaults(), "its READs carry no sink", null),
                Errno.EOPNOTSUPP, "p: iWarp=true is not offered (its READs carry no sink)");
        refused(() -> of("p", Map.of("integrityHandover", "true")).attributes(DeviceAttributes.defaults(), null, "no T10-PI"),
                Errno.EOPNOTSUPP, "p: integrityHandover=true is not offered (no T10-PI)");
        assertThat(of("p", Map.of("iWarp", "true")).attributes(DeviceAttributes.defaults(), null, null).iWarp()).isTrue();
    }

    @Test
    void theGivenMapIsCopied() {
        HashMap<String, String> m = new HashMap<>(Map.of("ring", "32"));
        ProviderOptions o = of("p", m);
        m.put("ring", "2048");
        assertThat(o.number("ring", 64, 16, 1024)).isEqualTo(32);
    }

    @Test
    void softReadsItsOptionsWithIt() {
        refused(() -> RdmaDevice.open("soft", Map.of("progressThread", "yes")), Errno.EINVAL,
                "soft: progressThread must be true or false, got yes");
        assertThatThrownBy(() -> RdmaDevice.open("soft", Map.of("ring", "1"))).isInstanceOfSatisfying(RdmaException.class,
                e -> assertThat(e.getMessage()).startsWith("EINVAL: soft: unknown option 'ring' (known: ["));
    }
}
