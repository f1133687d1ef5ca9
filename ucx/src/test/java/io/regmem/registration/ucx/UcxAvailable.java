package io.regmem.registration.ucx;

import io.regmem.core.RdmaException;
import org.junit.jupiter.api.Assumptions;

/**
 * Whether this machine has UCX. Tests that need it call {@link #require()}: without UCX they are
 * skipped on a developer's machine and fail where {@code CI=true} (CI installs {@code libucx0}).
 */
public final class UcxAvailable {
    private UcxAvailable() {
    }

    /** Skips the test (or fails it under CI) when UCX is missing: for tests of the ucx provider in other packages. */
    public static void assumeInstalled() {
        require();
    }

    /** The loaded library; skips the test (or fails it under CI) when UCX is missing. */
    static Ucp require() {
        try {
            return Ucp.get();
        } catch (RdmaException e) {
            if ("true".equals(System.getenv("CI"))) {
                throw new AssertionError("CI=true and UCX is missing: " + e.getMessage(), e);
            }
            Assumptions.abort("UCX is not installed: " + e.getMessage());
            throw e;
        }
    }

    /**
     * Skips the test unless UCX is recent enough for {@code oneSided=true} (1.19: its remote-key
     * unpack survives a key of memory that is gone; older ones crash the process, so regmem refuses
     * the option there). Not a CI failure: the distribution's UCX decides.
     */
    static void requireOneSided() {
        Ucp u = require();
        Assumptions.assumeTrue(u.major > 1 || u.minor >= UcxProvider.ONE_SIDED_MINOR,
                () -> "oneSided=true needs UCX 1." + UcxProvider.ONE_SIDED_MINOR + ", this is " + u.major + "." + u.minor);
    }
}
