package io.regmem.examples;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.testkit.ModulePath;
import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.uring.IoRing;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;

/**
 * The io.regmem.uring module on the module path with io.regmem.core alone (no registration module):
 * the storage example, compiled into an application module that requires io.regmem.uring, with
 * native access granted to the two modules by name.
 */
@ExtendWith(NoLeaks.class)
class UringModulePathTest {

    @TempDir
    Path dir;

    @Test
    void theStorageExampleRunsOnTheModulePathWithCoreOnly() throws Exception {
        try (IoRing probe = IoRing.open(2)) {
            assertThat(probe.inFlight()).isZero();
        } catch (RdmaException e) {
            boolean unavailable = e.errno() == Errno.ENOSYS || e.errno() == Errno.EPERM;
            Assumptions.assumeFalse(unavailable && !"true".equals(System.getenv("CI")), e.getMessage());
            throw e;
        }
        List<String> path = ModulePath.of(List.of("core", "uring"), List.of("agrona", "jctools-core"));
        String example = Files.readString(Path.of("src/test/java/io/regmem/examples/StorageExample.java"));
        String out = ModulePath.run(dir, path, Map.of(
                        "module-info.java", "module storage.app { requires io.regmem.uring; }\n",
                        "io/regmem/examples/StorageExample.java", example),
                "storage.app", "io.regmem.examples.StorageExample",
                List.of("--enable-native-access=io.regmem.core,io.regmem.uring", "--sun-misc-unsafe-memory-access=allow"));
        assertThat(out).isEqualTo("read 8192 bytes\nequal: true\n");
        assertThat(path).noneMatch(p -> p.contains("registration"));
    }
}
