package io.regmem.registration.ucx;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.testkit.NoLeaks;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Which connections send WRITE and READ as UCX puts and gets by default: only those whose every
 * transport has its remote keys enforced by a NIC (InfiniBand or RoCE: rc, dc; ud for the messages),
 * on a UCX that can tell (1.19 or later). The transport lists are what {@code ucp_ep_query} reports
 * on such machines; this one has no NIC, so these are stand-ins for them.
 */
@org.junit.jupiter.api.extension.ExtendWith(NoLeaks.class)
class UcxTransportsTest {
    @Test
    void nicTransportsAloneGoOneSided() {
        assertThat(UcxTransports.whyNotOneSided(1, 19, List.of("rc_mlx5", "ud_mlx5"))).isNull();
        assertThat(UcxTransports.whyNotOneSided(1, 19, List.of("dc_mlx5"))).isNull();
        assertThat(UcxTransports.whyNotOneSided(1, 20, List.of("rc_verbs", "ud_verbs"))).isNull();
        assertThat(UcxTransports.whyNotOneSided(2, 0, List.of("rc_mlx5"))).isNull();
    }

    @Test
    void anyTransportWithoutNicChecksKeepsTheConnectionOnCheckedMessages() {
        assertThat(UcxTransports.whyNotOneSided(1, 19, List.of("rc_mlx5", "posix"))).contains("posix");
        assertThat(UcxTransports.whyNotOneSided(1, 19, List.of("cma", "rc_mlx5"))).contains("cma");
        assertThat(UcxTransports.whyNotOneSided(1, 19, List.of("tcp"))).contains("tcp");
        assertThat(UcxTransports.whyNotOneSided(1, 19, List.of("self"))).contains("self");
        assertThat(UcxTransports.whyNotOneSided(1, 19, List.of("sysv", "cma"))).contains("sysv");
        assertThat(UcxTransports.whyNotOneSided(1, 19, List.of("knem"))).contains("knem");
        assertThat(UcxTransports.whyNotOneSided(1, 19, Arrays.asList("rc_mlx5", null))).contains("null");
        assertThat(UcxTransports.whyNotOneSided(1, 19, List.of("ud_mlx5"))).contains("no transport").contains("puts");
    }

    @Test
    void aUcxThatCannotTellSafelyOrSaysNothingUsesMessages() {
        assertThat(UcxTransports.whyNotOneSided(1, 13, List.of("rc_mlx5"))).contains("UCX 1.13").contains("1.19");
        assertThat(UcxTransports.whyNotOneSided(1, 18, List.of("rc_mlx5"))).contains("1.19");
        assertThat(UcxTransports.whyNotOneSided(0, 99, List.of("rc_mlx5"))).isNotNull();
        assertThat(UcxTransports.whyNotOneSided(1, 19, null)).contains("did not say");
        assertThat(UcxTransports.whyNotOneSided(1, 19, List.of())).contains("did not say");
    }

    /** The lines of {@code ucp_ep_print_info} (UCX 1.13) that name the lanes' transports. */
    @Test
    void theLanesOfAnEndpointComeFromItsPrintedInfo() {
        String shm = """
                #
                # UCP endpoint
                #
                #               peer: <no debug data>
                #                 lane[0]:  3:posix/memory.0 md[1]          -> md[1]/posix/sysdev[255] am am_bw#0
                #                 lane[1]:  6:cma/memory md[3]              -> md[3]/cma/sysdev[255] rma_bw#0 rkey_ptr
                #
                """;
        assertThat(UcxTransports.lanes(shm)).containsExactly("posix", "cma");
        assertThat(UcxTransports.rendezvousPays(UcxTransports.lanes(shm))).isTrue();
        String tcp = "#                 lane[0]:  2:tcp/lo.0 md[0]              -> md[0]/tcp/sysdev[255] am am_bw#0\n"
                + "#                 lane[1]:  2:tcp/lo.0 md[0]              -> md[0]/tcp/sysdev[255] rma_bw#0\n";
        assertThat(UcxTransports.lanes(tcp)).containsExactly("tcp", "tcp");
        assertThat(UcxTransports.rendezvousPays(UcxTransports.lanes(tcp))).as("TCP alone: eager").isFalse();
        assertThat(UcxTransports.lanes("no lanes here")).isNull();
        assertThat(UcxTransports.lanes(null)).isNull();
        assertThat(UcxTransports.rendezvousPays(null)).as("unknown: rendezvous").isTrue();
    }

    @Test
    void thisUcxTellsNothingBefore119() {
        UcxAvailable.require();
        Ucp ucp = Ucp.get();
        if (ucp.major == 1 && ucp.minor < UcxProvider.ONE_SIDED_MINOR) {
            assertThat(UcxTransports.of(ucp, 12345)).as("not even asked: the attribute is not known to be safe").isNull();
        }
        assertThat(UcxTransports.of(ucp, 0)).isNull();
    }
}
