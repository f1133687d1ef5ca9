package io.regmem.registration.ucx;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.testkit.NamespacedPair;
import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.Providers;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Two processes of one host in different namespaces, as two containers are, with the same-host lane
 * on (the default): the lane is taken where it works, and where it cannot (another network namespace:
 * the listener's abstract socket is out of reach; another pid namespace: neither process may be
 * shown to the other by the kernel) the connection goes over UCX as if the lane were off. Each run's
 * cycles are byte-checked WRITEs and READs ({@link NamespacedPair}).
 */
@ExtendWith(NoLeaks.class)
class UcxNamespacesTest {
    private static final String OPTIONS = "secret=ucx-namespaces-test-secret-0123456789,sameHostLane=true";
    private static final int CYCLES = 5;

    private static int port() {
        return Integer.parseInt(Providers.address("ucx", "x").split(":")[1]) + 1000;
    }

    @Test
    void twoNetworkNamespacesJoinedByAVethPairConnectOverUcx() throws Exception {
        try (NamespacedPair.NetworkNamespaces ns = NamespacedPair.networkNamespaces()) {
            NamespacedPair.Result r = NamespacedPair.run("ucx", OPTIONS, List.of("ip", "netns", "exec", ns.a),
                    NamespacedPair.NetworkNamespaces.A_ADDRESS, List.of("ip", "netns", "exec", ns.b),
                    NamespacedPair.NetworkNamespaces.A_ADDRESS, port(), CYCLES);
            assertThat(r.accepted()).allSatisfy(a -> assertThat(a).contains("ucx: peer QP", "network transports only"));
        }
    }

    /** With its own /proc (as a container has) or the host's (plain {@code unshare --pid --fork}). */
    @ParameterizedTest
    @ValueSource(booleans = {true, false})
    void aClientInAPidNamespaceOfItsOwnConnectsOverUcx(boolean ownProc) throws Exception {
        List<String> prefix = ownProc ? List.of("unshare", "--pid", "--fork", "--mount-proc") : List.of("unshare", "--pid", "--fork");
        NamespacedPair.assume("a pid namespace", "unshare", "--pid", "--fork", "--mount-proc", "true");
        NamespacedPair.Result r = NamespacedPair.run("ucx", OPTIONS, List.of(), "127.0.0.1", prefix, "127.0.0.1", port(), CYCLES);
        assertThat(r.accepted()).allSatisfy(a -> assertThat(a).contains("ucx: peer QP", "network transports only"));
    }

    @Test
    void aListenerInAPidNamespaceOfItsOwnIsReachedOverUcx() throws Exception {
        NamespacedPair.assume("a pid namespace", "unshare", "--pid", "--fork", "--mount-proc", "true");
        NamespacedPair.Result r = NamespacedPair.run("ucx", OPTIONS, List.of("unshare", "--pid", "--fork", "--mount-proc"),
                "127.0.0.1", List.of(), "127.0.0.1", port(), CYCLES);
        assertThat(r.accepted()).allSatisfy(a -> assertThat(a).contains("ucx: peer QP", "network transports only"));
    }

    @Test
    void aClientInAUserNamespaceWhoseCopiesAreRefusedTakesTheLaneThroughItsRings() throws Exception {
        NamespacedPair.assume("a user namespace", "unshare", "--user", "--map-root-user", "true");
        NamespacedPair.Result r = NamespacedPair.run("ucx", OPTIONS, List.of(), "127.0.0.1",
                List.of("unshare", "--user", "--map-root-user"), "127.0.0.1", port(), CYCLES);
        assertThat(r.accepted()).allSatisfy(a -> assertThat(a).contains("over the same-host lane"));
        assertThat(r.clientOutput()).as("the client may not copy out of the listener: it said so")
                .contains("may not copy out of its peer process");
    }

    @Test
    void aClientInAMountNamespaceOfItsOwnTakesTheLane() throws Exception {
        NamespacedPair.assume("a mount namespace", "unshare", "--mount", "true");
        NamespacedPair.Result r = NamespacedPair.run("ucx", OPTIONS, List.of(), "127.0.0.1", List.of("unshare", "--mount"),
                "127.0.0.1", port(), CYCLES);
        assertThat(r.accepted()).allSatisfy(a -> assertThat(a).contains("over the same-host lane", "pulls"));
    }
}
