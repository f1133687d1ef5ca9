package io.regmem.registration.uring;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.testkit.NoLeaks;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * io_uring refused by a seccomp filter, for real: a child JVM installs a filter on its main thread
 * (as Docker's default profile refuses the call) and builds a ring; the failure must be one line
 * saying io_uring is unavailable, with the errno the filter returned.
 */
@ExtendWith(NoLeaks.class)
class UringUnavailableTest {

    @ParameterizedTest
    @CsvSource({"38, ENOSYS, io_uring is not available", "1, EPERM, io_uring is not permitted here"})
    void aSeccompFilterGivesOneClearLine(int errno, String name, String text) throws Exception {
        String javaBin = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        ProcessBuilder b = new ProcessBuilder(List.of(javaBin, "--enable-native-access=ALL-UNNAMED",
                "--sun-misc-unsafe-memory-access=allow", "-Xmx128m", "-cp", System.getProperty("java.class.path"),
                UringSeccompMain.class.getName(), Integer.toString(errno)));
        b.redirectErrorStream(true);
        Process p = b.start();
        String out = new String(p.getInputStream().readAllBytes());
        assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
        assertThat(p.exitValue()).as(out).isZero();
        assertThat(out.strip()).startsWith("OK " + name + " " + name + ": " + text).doesNotContain("\n").contains("seccomp");
    }
}
