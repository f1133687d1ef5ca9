package io.regmem.registration.ucx;

import io.regmem.registration.testkit.ChildJvm;
import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.RdmaDevice;
import io.regmem.registration.link.Link;
import io.regmem.registration.testkit.NoLeaks;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;

/** The provider as users find it: listed for {@code RdmaDevice.open("ucx")}, and clear when UCX is missing. */
@ExtendWith(NoLeaks.class)
class UcxProviderTest {

    @Test
    void usersOpenItByName() {
        UcxAvailable.require();
        try (RdmaDevice d = RdmaDevice.open("ucx")) {
            assertThat(d.providerName()).isEqualTo("ucx");
            assertThat(d.attributes().integrityHandover()).isFalse();
        }
    }

    /** Before UCX 1.19 a one-sided request could crash the process (see UcxProvider): the option is refused there. */
    @Test
    void oneSidedIsRefusedOnAUcxWhoseKeyUnpackCanCrash() {
        Ucp u = UcxAvailable.require();
        org.junit.jupiter.api.Assumptions.assumeTrue(u.major == 1 && u.minor < UcxProvider.ONE_SIDED_MINOR, "UCX is new enough");
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> RdmaDevice.open("ucx", java.util.Map.of("oneSided", "true")))
                .isInstanceOf(io.regmem.core.RdmaException.class).hasMessageContaining("needs UCX 1.19 or later")
                .matches(e -> ((io.regmem.core.RdmaException) e).errno() == io.regmem.core.Errno.EOPNOTSUPP);
        try (RdmaDevice d = RdmaDevice.open("ucx", java.util.Map.of("oneSided", "false"))) {
            assertThat(d.providerName()).isEqualTo("ucx");
        }
    }

    @Test
    void rndvThresholdMustBeABytecountFromOneTo2GiB() {
        UcxAvailable.require();
        for (String bad : new String[] {"0", "-1", "2147483649", "16k", ""}) {
            org.assertj.core.api.Assertions.assertThatThrownBy(() -> RdmaDevice.open("ucx", java.util.Map.of("rndvThreshold", bad)))
                    .isInstanceOf(io.regmem.core.RdmaException.class).hasMessageContaining("rndvThreshold")
                    .matches(e -> ((io.regmem.core.RdmaException) e).errno() == io.regmem.core.Errno.EINVAL);
        }
        try (RdmaDevice d = RdmaDevice.open("ucx", java.util.Map.of("rndvThreshold", "1"))) {
            assertThat(d.isClosed()).isFalse();
        }
    }

    @Test
    void withoutUcxOpeningFailsWithThePackageToInstallAndSoftStillWorks(@TempDir Path empty) throws Exception {
        String out;
        try (ChildJvm c = ChildJvm.of(UcxMissingMain.class).jvm("-D" + Ucp.LIBDIR + "=" + empty).start()) {
            assertThat(c.awaitExit()).as(c.output()).isZero();
            out = c.output();
        }
        assertThat(out.lines().filter(l -> l.startsWith("REFUSED ENODEV ")).toList()).as(out).hasSize(2)
                .allSatisfy(l -> assertThat(l).contains("libucp.so.0").contains("apt-get install libucx0"));
        assertThat(out).contains("SOFT soft");
        assertThat(Files.list(empty)).isEmpty();
    }

    @Test
    void theBootstrapSocketProbesAPeerThatFallsSilent() throws Exception {
        try (java.net.ServerSocket server = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress());
             Link link = Link.connect("test", UcxCm.KIND, "127.0.0.1", server.getLocalPort(), null, Link.HANDSHAKE_MILLIS);
             java.net.Socket accepted = server.accept()) {
            assertThat(link.keepalive()).as("on, idle s, interval s, probes").containsExactly(1,
                    Link.KEEPALIVE_IDLE_SECONDS, Link.KEEPALIVE_INTERVAL_SECONDS, Link.KEEPALIVE_PROBES);
            assertThat(new Link(accepted, null, Link.HANDSHAKE_MILLIS, UcxCm.KIND).keepalive()[0]).isEqualTo(1);
        }
    }
}
