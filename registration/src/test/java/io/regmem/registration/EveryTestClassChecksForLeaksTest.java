package io.regmem.registration;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.testkit.NoLeaks;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Every test class of the modules that use regmem's devices and pools (registration, ucx, shm, uring, netty, cli)
 * ends its tests leak-free through the one shared
 * {@link NoLeaks} check: a JUnit class carries {@code @ExtendWith(NoLeaks.class)}, a jqwik class
 * {@code @AddLifecycleHook(NoLeaks.class)}. A new test class without it fails here.
 */
@ExtendWith(NoLeaks.class)
class EveryTestClassChecksForLeaksTest {

    @Test
    void everyTestClassUsesNoLeaks() throws IOException {
        assertThat(Path.of("src/test/java")).as("run from the module's directory").isDirectory();
        List<String> missing = new ArrayList<>();
        int checked = 0;
        List<Path> sources = new ArrayList<>();
        for (String module : List.of("registration", "ucx", "shm", "uring", "netty", "cli")) {
            Path root = Path.of("..", module, "src/test/java");
            assertThat(root).as("the %s module's tests", module).isDirectory();
            try (Stream<Path> files = Files.walk(root)) {
                files.filter(p -> p.toString().endsWith(".java")).forEach(sources::add);
            }
        }
        for (Path f : sources) {
            String src = Files.readString(f);
            boolean junit = src.contains("@Test") || src.contains("@ParameterizedTest");
            boolean jqwik = src.contains("@Property");
            if (!junit && !jqwik) {
                continue;
            }
            checked++;
            if (junit && !src.contains("@ExtendWith(NoLeaks.class)") && !src.contains("NoLeaks.class)")) {
                missing.add(f + ": @ExtendWith(NoLeaks.class)");
            }
            if (jqwik && !src.contains("@AddLifecycleHook(NoLeaks.class)")) {
                missing.add(f + ": @AddLifecycleHook(NoLeaks.class)");
            }
        }
        assertThat(checked).isGreaterThan(60);
        assertThat(missing).as("test classes that do not check for leaks").isEmpty();
    }
}
