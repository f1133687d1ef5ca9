package io.regmem.examples;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.BufferPool;
import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.ucx.UcxAvailable;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The providers guide's UCX example runs and prints what docs/providers.md says (DocsTest checks the quote). */
@ExtendWith(NoLeaks.class)
class UcxExampleTest {

    @Test
    void theExampleWritesOverUcxAndLeaksNothing() throws Exception {
        UcxAvailable.assumeInstalled();
        PrintStream original = System.out;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        try {
            System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
            UcxExample.main(new String[0]);
        } finally {
            System.setOut(original);
        }
        assertThat(BufferPool.openPools()).as("pools left open by the example").isEmpty();
        assertThat(captured.toString(StandardCharsets.UTF_8)).isEqualTo("""
                completion: SUCCESS, 64 bytes
                server reads: hello, registered memory
                """);
    }
}
