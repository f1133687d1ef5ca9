package io.regmem.examples;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.testkit.NoLeaks;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The Netty guide's example runs and says what it should (DocsTest checks that docs/netty.md quotes it). */
@ExtendWith(NoLeaks.class)
class NettyExampleTest {

    @Test
    void theServerReadsIntoRegisteredMemoryAndLeaksNothing() throws Exception {
        PrintStream original = System.out;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        try {
            System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
            NettyExample.main(new String[0]);
        } finally {
            System.setOut(original);
        }
        assertThat(captured.toString(StandardCharsets.UTF_8)).isEqualTo("lkey true\nreceived hello\n");
    }
}
