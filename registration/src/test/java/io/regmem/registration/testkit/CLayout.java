package io.regmem.registration.testkit;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * For layout tests of native bindings: compiles a C program from the test resources with gcc, runs
 * it, and reads the {@code NAME=VALUE} lines it prints ({@code sizeof}, {@code offsetof}, constants).
 */
public final class CLayout {
    private CLayout() {
    }

    /** Compiles and runs test resource {@code resource} in {@code dir}; its output as name to value. */
    public static Map<String, Long> measure(String resource, Path dir) throws IOException, InterruptedException {
        Path src = dir.resolve("layout.c");
        try (InputStream in = CLayout.class.getResourceAsStream(resource)) {
            assertThat(in).as("test resource %s", resource).isNotNull();
            Files.copy(in, src);
        }
        Path exe = dir.resolve("layout");
        run(dir, "gcc", "-o", exe.toString(), src.toString());
        String out = run(dir, exe.toString());
        Map<String, Long> actual = new LinkedHashMap<>();
        for (String line : out.split("\n")) {
            int eq = line.indexOf('=');
            if (eq > 0) {
                actual.put(line.substring(0, eq), Long.parseLong(line.substring(eq + 1).strip()));
            }
        }
        return actual;
    }

    private static String run(Path dir, String... command) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(command).directory(dir.toFile()).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes());
        assertThat(p.waitFor(60, TimeUnit.SECONDS)).as("%s finished", command[0]).isTrue();
        assertThat(p.exitValue()).as("%s: %s", String.join(" ", command), out).isZero();
        return out;
    }
}
