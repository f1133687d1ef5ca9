package io.regmem.bench;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.cli.RegmemCommand;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * {@code regmem bench}, which this module adds to the command line ({@link BenchSubcommand}): a bad
 * option is one clear line on standard error and exit status 2, before any benchmark runs.
 */
class BenchOptionsTest {

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "bench --include NoSuch             | --include 'NoSuch' | AllocatorBenchmark",
        "bench --include [                  | --include '[' | not a regular expression",
        "bench --forks -1                   | --forks -1 | 0 to 20",
        "bench --iterations 0               | --iterations 0 | 1 to 100",
        "bench --size x                     | --size 'x' | 1 to",
        "bench --json /nonexistent/dir/x.json | --json '/nonexistent/dir/x.json' | does not exist",
    })
    void aBadOptionIsOneClearLineAndExitStatusTwoBeforeAnyWork(String args, String names, String allowed) {
        PrintStream original = System.out;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        StringWriter err = new StringWriter();
        int status;
        try {
            System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
            status = RegmemCommand.commandLine().setErr(new PrintWriter(err, true)).execute(args.trim().split("\\s+"));
        } finally {
            System.setOut(original);
        }
        String line = err.toString();
        assertThat(status).as(line).isEqualTo(2);
        assertThat(line.strip()).as("one line").doesNotContain("\n").startsWith("regmem bench: ")
                .contains(names.trim(), allowed.trim()).doesNotContain("Exception");
        assertThat(captured.toString(StandardCharsets.UTF_8)).as("no work started").isEmpty();
    }
}
