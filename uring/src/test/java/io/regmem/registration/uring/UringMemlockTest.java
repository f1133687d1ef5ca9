package io.regmem.registration.uring;

import io.regmem.registration.testkit.ChildJvm;
import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.testkit.NoLeaks;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The locked-memory limit, for real: a child JVM started by {@code setpriv} without
 * {@code CAP_IPC_LOCK} (as an unprivileged user runs) under {@code prlimit --memlock} of 256 KiB
 * registers a pool with a 4 MiB chunk. Needs root (to drop the capability) and util-linux; skipped
 * otherwise, except under CI. The child's ring is its own, so the asynchronous release of the
 * charge when a ring closes cannot touch another test.
 */
@ExtendWith(NoLeaks.class)
class UringMemlockTest {

    @Test
    void registeringOverRlimitMemlockFailsWithENOMEMNamingTheLimit() throws Exception {
        boolean tools = Files.isExecutable(Path.of("/usr/bin/setpriv")) && Files.isExecutable(Path.of("/usr/bin/prlimit"));
        boolean root = "root".equals(System.getProperty("user.name"));
        if (!"true".equals(System.getenv("CI"))) {
            Assumptions.assumeTrue(tools && root, "needs root, setpriv and prlimit");
        }
        String out;
        try (ChildJvm c = ChildJvm.of(UringMemlockMain.class)
                .under(List.of("/usr/bin/setpriv", "--inh-caps=-ipc_lock", "--bounding-set=-ipc_lock", "/usr/bin/prlimit",
                        "--memlock=262144:262144"))
                .jvm("--sun-misc-unsafe-memory-access=allow", "-Xmx256m").start()) {
            assertThat(c.awaitExit()).as(c.output()).isZero();
            out = c.output();
        }
        assertThat(out).startsWith("OK ENOMEM").contains("RLIMIT_MEMLOCK is 256 KiB").contains("4194304 bytes")
                .contains("CAP_IPC_LOCK");
    }
}
