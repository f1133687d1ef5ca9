package io.regmem.registration.ucx;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.link.Secret;
import io.regmem.registration.testkit.NoLeaks;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Where a UCX device's handshake secret comes from ({@link Secret}); needs no UCX. */
@org.junit.jupiter.api.extension.ExtendWith(NoLeaks.class)
class UcxSecretTest {
    @TempDir
    Path home;
    private String realHome;

    @BeforeEach
    void pointHomeAtATemporaryDirectory() {
        realHome = System.getProperty("user.home");
        System.setProperty("user.home", home.toString());
    }

    @AfterEach
    void restoreHome() {
        System.setProperty("user.home", realHome);
    }

    @Test
    void theDefaultSecretIsMadeOnceWithOwnerOnlyPermissionsAndAgreedOnByRacingMakers() throws Exception {
        Path file = home.resolve(".regmem").resolve("secret");
        ExecutorService pool = Executors.newFixedThreadPool(8);
        try {
            List<Future<byte[]>> makers = new ArrayList<>();
            for (int i = 0; i < 8; i++) {
                makers.add(pool.submit((Callable<byte[]>) () -> Secret.defaultSecret("ucx")));
            }
            byte[] first = makers.get(0).get();
            for (Future<byte[]> f : makers) {
                assertThat(f.get()).isEqualTo(first);
            }
            assertThat(new String(first, StandardCharsets.US_ASCII)).matches("[0-9a-f]{64}");
        } finally {
            pool.shutdown();
        }
        assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(file))).isEqualTo("rw-------");
        assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(file.getParent()))).isEqualTo("rwx------");
        try (var left = Files.list(file.getParent())) {
            assertThat(left.map(p -> p.getFileName().toString())).containsExactly("secret");
        }
        assertThat(Secret.defaultSecret("ucx")).isEqualTo(Files.readString(file).strip().getBytes(StandardCharsets.US_ASCII));
    }

    @Test
    void aDefaultFileOthersMayReadIsRefused() throws Exception {
        Secret.defaultSecret("ucx");
        Path file = home.resolve(".regmem").resolve("secret");
        Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rw-r--r--"));
        assertThatThrownBy(() -> Secret.defaultSecret("ucx")).isInstanceOf(RdmaException.class)
                .hasMessageContaining("chmod 600").matches(e -> ((RdmaException) e).errno() == Errno.EACCES);
    }

    @Test
    void optionsComeFirstThenTheEnvironmentThenNothing() throws Exception {
        Path f = home.resolve("s");
        Files.writeString(f, "secret from a file, long enough\n");
        assertThat(Secret.configured("ucx", Map.of("secret", "the option's secret text"), Map.of(Secret.ENV, "environment's secret")))
                .isEqualTo("the option's secret text".getBytes());
        assertThat(Secret.configured("ucx", Map.of("secretFile", f.toString()), Map.of(Secret.ENV, "environment's secret")))
                .isEqualTo("secret from a file, long enough".getBytes());
        assertThat(Secret.configured("ucx", Map.of(), Map.of(Secret.ENV, "environment's secret")))
                .isEqualTo("environment's secret".getBytes());
        assertThat(Secret.configured("ucx", Map.of(), Map.of(Secret.ENV_FILE, f.toString())))
                .isEqualTo("secret from a file, long enough".getBytes());
        assertThat(Secret.configured("ucx", Map.of(), Map.of())).isNull();
        Files.writeString(f, "too short\n");
        assertThatThrownBy(() -> Secret.configured("ucx", Map.of("secretFile", f.toString()), Map.of()))
                .isInstanceOf(RdmaException.class).hasMessageContaining("has 9 bytes; it needs at least 16");
    }
}
