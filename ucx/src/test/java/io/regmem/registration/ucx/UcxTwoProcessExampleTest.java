package io.regmem.registration.ucx;

import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.TwoProcessExampleRun;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;

/** The two-process example (docs/providers.md) on ucx: a server JVM and a client JVM ({@link TwoProcessExampleRun}). */
@ExtendWith(NoLeaks.class)
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class UcxTwoProcessExampleTest {
    @Test
    void aClientProcessWritesIntoAServerProcessWithTheKeyFromTheAccept() throws Exception {
        UcxAvailable.assumeInstalled();
        TwoProcessExampleRun.check("ucx");
    }
}
