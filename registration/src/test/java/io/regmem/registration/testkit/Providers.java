package io.regmem.registration.testkit;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.CmId;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.QueuePair;
import io.regmem.registration.RdmaDevice;
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

    private static final java.util.concurrent.atomic.AtomicInteger PORTS = new java.util.concurrent.atomic.AtomicInteger(20_000);

    /**
     * A connection address for the provider under test: soft listens under any name (this one);
     * ucx and shm under {@code host:port} (a fresh loopback port each call).
     */
    public static String address(String name) {
        return address(NAME, name);
    }

    /**
     * An address to bind an ID to ({@code bindAddr}): soft binds to any name (this one), ucx and shm
     * to {@code 127.0.0.1:0} (a port the system picks).
     */
    public static String bindAddress(String name) {
        return NAME.equals("ucx") || NAME.equals("shm") ? "127.0.0.1:0" : name;
    }

    /**
     * True if the provider under test carries datagrams over the kernel's UDP/IP (ucx, shm): they arrive
     * when its device is next progressed rather than within the send, and the kernel may lose some
     * (counted as {@code DatagramDrop.LOST} when a later one of the same sender arrives).
     */
    public static boolean datagramsCrossANetwork() {
        return NAME.equals("ucx") || NAME.equals("shm");
    }

    /** As {@link #address(String)}, for the named provider. */
    public static String address(String provider, String name) {
        return provider.equals("ucx") || provider.equals("shm") ? "127.0.0.1:" + PORTS.incrementAndGet() : name;
    }

    /**
     * Skips the test when the provider under test is {@code ucx} and UCX is not installed (fails it
     * where {@code CI=true}). {@link NoLeaks} calls it before every test class is made.
     */
    public static void assumeAvailable() {
        if (!NAME.equals("ucx")) {
            return;
        }
        String missing = ucxMissing;
        if (missing == null) {
            missing = "";
            try (RdmaDevice probe = RdmaDevice.open("ucx")) {
                probe.attributes();
            } catch (RdmaException e) {
                if (e.errno() != Errno.ENODEV) {
                    throw e;
                }
                missing = e.getMessage();
            }
            ucxMissing = missing;
        }
        if (!missing.isEmpty()) {
            if ("true".equals(System.getenv("CI"))) {
                throw new AssertionError("CI=true and UCX is missing: " + missing);
            }
            Assumptions.abort("UCX is not installed: " + missing);
        }
    }

    /** Why {@code RdmaDevice.open("ucx")} failed ("" if it worked), once known. */
    private static volatile String ucxMissing;

    /** A device of the provider under test. */
    public static RdmaDevice open() {
        return RdmaDevice.open(NAME, defaults(NAME));
    }

    /**
     * The device options the suites run {@code provider} with: on ucx, {@code rndvThreshold} from
     * {@code -Dregmem.ucx.rndvThreshold} when set (the build sets it low, so that the contract suites
     * and the fuzz run the rendezvous path too, not only eager messages), else none.
     */
    public static Map<String, String> defaults(String provider) {
        String t = System.getProperty("regmem.ucx.rndvThreshold");
        return provider.equals("ucx") && t != null ? Map.of("rndvThreshold", t) : Map.of();
    }

    /**
     * A device of the provider under test with device options (attribute knobs such as
     * {@code maxSendSge}); a provider that does not know an option, or lacks the capability it asks
     * for ({@code EOPNOTSUPP}), skips the test instead of failing it.
     */
    public static RdmaDevice open(Map<String, String> options) {
        return open(NAME, options);
    }

    /** As {@link #open(Map)}, on the named provider. */
    public static RdmaDevice open(String provider, Map<String, String> options) {
        Map<String, String> all = new java.util.HashMap<>(defaults(provider));
        all.putAll(options);
        try {
            return RdmaDevice.open(provider, all);
        } catch (RdmaException e) {
            Assumptions.assumeFalse(e.getMessage().contains("unknown option") || e.errno() == io.regmem.core.Errno.EOPNOTSUPP,
                    () -> provider + " has no such device option: " + e.getMessage());
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

    /** The next request of {@code listener}, waiting up to 10 s (ucx delivers requests from a thread of its own). */
    public static CmId awaitRequest(CmId listener) {
        long deadline = System.nanoTime() + 10_000_000_000L;
        CmId r;
        while ((r = listener.getRequest()) == null) {
            org.assertj.core.api.Assertions.assertThat(System.nanoTime()).as("a connection request within 10 s")
                    .isLessThan(deadline);
            Thread.onSpinWait();
        }
        return r;
    }

    /** Waits up to 10 s until {@code id} is in {@code state}. */
    public static void awaitState(CmId id, CmId.ConnState state) {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (id.connState() != state) {
            org.assertj.core.api.Assertions.assertThat(System.nanoTime())
                    .as("%s reaches %s (it is %s)", id, state, id.connState()).isLessThan(deadline);
            Thread.onSpinWait();
        }
    }
}
