package io.regmem.examples;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.NoLeaks;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The storage guide's example runs, says what it should, and docs/storage.md quotes it as it is. */
@ExtendWith(NoLeaks.class)
class StorageExampleTest {

    @Test
    void theExampleWritesReadsBackAndLeaksNothing() throws Exception {
        PrintStream original = System.out;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        try {
            System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
            StorageExample.main(new String[0]);
        } finally {
            System.setOut(original);
        }
        assertThat(captured.toString(StandardCharsets.UTF_8)).isEqualTo("read 8192 bytes\nequal: true\n");
    }

    @Test
    void theGuideQuotesTheExampleSource() throws Exception {
        Path root = Path.of("").toAbsolutePath().getParent();
        String source = Files.readString(root.resolve("registration/src/test/java/io/regmem/examples/StorageExample.java"));
        String quoted = source.substring(source.indexOf("// example: storage\n") + "// example: storage\n".length(),
                source.indexOf("// end example"));
        String guide = Files.readString(root.resolve("docs/storage.md"));
        assertThat(guide).as("docs/storage.md quotes StorageExample.java between its markers").contains(quoted);
    }
}
