package io.regmem.registration;

import io.regmem.core.RdmaException;
import java.util.Map;
import org.junit.jupiter.api.Assumptions;

/**
 * Where the provider-neutral (contract) tests get their devices: the provider named by
 * {@code -Dregmem.provider} (default {@code soft}; {@code delegate} is the test-only provider that
 * wraps soft through the provider interface). Soft-only tests (fault injection, the progress thread,
 * soft internals) are tagged {@code soft-only} and open {@code "soft"} themselves.
 */
public final class Providers {
    /** The provider under test. */
    public static final String NAME = System.getProperty("regmem.provider", "soft");

    private Providers() {
    }

    /** A device of the provider under test. */
    public static RdmaDevice open() {
        return RdmaDevice.open(NAME);
    }

    /**
     * A device of the provider under test with device options (attribute knobs such as
     * {@code maxSendSge}); a provider that does not know an option skips the test instead of failing it.
     */
    public static RdmaDevice open(Map<String, String> options) {
        try {
            return RdmaDevice.open(NAME, options);
        } catch (RdmaException e) {
            Assumptions.assumeFalse(e.getMessage().contains("unknown option"),
                    () -> NAME + " has no such device option: " + e.getMessage());
            throw e;
        }
    }

    /**
     * {@code mr}'s remote key as {@code qp} uses it in work requests: exported by the region's owner,
     * imported on the QP that sends (what two processes would exchange once per registration).
     */
    public static int key(QueuePair qp, MemoryRegion mr) {
        return qp.importRemoteKey(mr.exportRemoteKey());
    }
}
