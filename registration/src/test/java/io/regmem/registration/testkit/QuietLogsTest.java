package io.regmem.registration.testkit;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.logging.Handler;
import java.util.logging.Logger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** {@link QuietLogs} is on for this module's tests (autodetected): the root logger keeps, it does not print. */
@ExtendWith(NoLeaks.class)
class QuietLogsTest {
    @Test
    void duringATestTheRootLoggerKeepsWhatItIsGivenInsteadOfPrintingIt() {
        Handler[] handlers = Logger.getLogger("").getHandlers();
        assertThat(handlers).hasSize(1);
        assertThat(handlers[0].getClass().getName()).isEqualTo(QuietLogs.class.getName() + "$Kept");
        Logger.getLogger("io.regmem.registration.testkit").warning("kept, not printed (this test passes)");
    }
}
