package io.regmem.registration.shm;

import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.TwoProcessExampleRun;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;

/** The two-process example (docs/providers.md) on shm: a server JVM and a client JVM of one host. */
@ExtendWith(NoLeaks.class)
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class ShmTwoProcessExampleTest {
    @Test
    void aClientProcessWritesIntoAServerProcessWithTheKeyFromTheAccept() throws Exception {
        TwoProcessExampleRun.check("shm");
    }
}
