package io.regmem.examples;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.testkit.ModulePath;
import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.ucx.UcxAvailable;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;

/**
 * The io.regmem.ucx module on the module path: the UCX example, compiled into an application module
 * that requires only io.regmem.registration, finds the ucx provider through the service that
 * io.regmem.ucx provides (service binding resolves it: no {@code --add-modules}), with native access
 * granted to the modules by name.
 */
@ExtendWith(NoLeaks.class)
class UcxModulePathTest {

    @TempDir
    Path dir;

    @Test
    void theUcxExampleRunsOnTheModulePathThroughTheProviderService() throws Exception {
        UcxAvailable.assumeInstalled();
        List<String> path = ModulePath.of(List.of("core", "registration", "shm", "ucx"), List.of("agrona", "jctools-core"));
        String example = Files.readString(Path.of("src/test/java/io/regmem/examples/UcxExample.java"));
        String out = ModulePath.run(dir, path, Map.of(
                        "module-info.java", "module ucx.app { requires io.regmem.registration; }\n",
                        "io/regmem/examples/UcxExample.java", example),
                "ucx.app", "io.regmem.examples.UcxExample",
                List.of("--enable-native-access=io.regmem.core,io.regmem.registration,io.regmem.shm,io.regmem.ucx",
                        "--sun-misc-unsafe-memory-access=allow"));
        assertThat(out).isEqualTo("""
                completion: SUCCESS, 64 bytes
                server reads: hello, registered memory
                """);
    }
}
