package io.regmem.registration.uring;

import io.regmem.registration.testkit.ChildJvm;
import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.testkit.NoLeaks;
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
        String out;
        try (ChildJvm c = ChildJvm.of(UringSeccompMain.class).jvm("--sun-misc-unsafe-memory-access=allow", "-Xmx128m")
                .args(Integer.toString(errno)).start()) {
            assertThat(c.awaitExit()).as(c.output()).isZero();
            out = c.output();
        }
        assertThat(out.strip()).startsWith("OK " + name + " " + name + ": " + text).doesNotContain("\n").contains("seccomp");
    }
}
