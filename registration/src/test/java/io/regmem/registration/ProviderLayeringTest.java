package io.regmem.registration;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The providers (soft, ucx) reach the verbs layer through the spi's contexts and their values only:
 * no provider source calls a context's {@code queuePair()}, {@code region()} or {@code cmId()}, which
 * hand out the public verbs objects and are there for the verbs layer's own helpers, nor names those
 * objects' types ({@code QueuePair}, {@code CmId}, {@code CompletionQueue}, {@code MemoryRegion};
 * their public constants, e.g. {@code CmId.MAX_CONNECT_PRIVATE_DATA}, are values); and a context's
 * attachment is read in one helper per provider ({@code SoftContexts}, {@code UcxContexts}). The one
 * exception is {@code SoftQp}, the fault-injection view, which names the public QP it is a view of.
 * A new upward call fails here, naming the file and line.
 */
@ExtendWith(NoLeaks.class)
class ProviderLayeringTest {
    private static final Pattern UPWARD = Pattern.compile("\\.(queuePair|region|cmId)\\(\\)");
    /** The verbs objects by name (their public constants, such as {@code CmId.MAX_*}, are values). */
    private static final Pattern VERBS_TYPE = Pattern.compile("\\b(QueuePair|CmId|CompletionQueue|MemoryRegion)\\b(?!\\.MAX_)");

    @Test
    void providersUseTheContextsValuesNotThePublicObjects() throws IOException {
        Path root = Path.of("src/main/java/io/regmem/registration");
        assertThat(root).as("run from the module's directory").isDirectory();
        List<String> upward = new ArrayList<>();
        int checked = 0;
        for (String provider : new String[] {"soft", "ucx"}) {
            try (Stream<Path> files = Files.walk(root.resolve(provider))) {
                for (Path f : files.filter(p -> p.toString().endsWith(".java")).toList()) {
                    if (f.getFileName().toString().equals("SoftQp.java")) {
                        continue;
                    }
                    checked++;
                    List<String> lines = Files.readAllLines(f);
                    for (int i = 0; i < lines.size(); i++) {
                        String line = lines.get(i).trim();
                        if (line.startsWith("*") || line.startsWith("//")) {
                            continue;
                        }
                        Matcher m = UPWARD.matcher(line);
                        if (m.find()) {
                            upward.add(f + ":" + (i + 1) + ": " + m.group());
                        }
                        if (line.contains("attachment()") && !f.getFileName().toString().endsWith("Contexts.java")) {
                            upward.add(f + ":" + (i + 1) + ": attachment() outside the provider's Contexts helper");
                        }
                        Matcher t = VERBS_TYPE.matcher(line);
                        if (t.find()) {
                            upward.add(f + ":" + (i + 1) + ": " + t.group());
                        }
                    }
                }
            }
        }
        assertThat(checked).as("provider sources found").isGreaterThan(20);
        assertThat(upward).as("provider code that reaches the public verbs objects through a context").isEmpty();
    }
}
