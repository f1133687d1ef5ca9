package io.regmem.examples;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.testkit.NoLeaks;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The documentation cannot drift from the code: each guide quotes its example class verbatim
 * (between the {@code // example: NAME} and {@code // end example} markers, which ExamplesTest runs),
 * and every relative link in README.md, BENCHMARKS.md and docs/ resolves in the checkout.
 */
@ExtendWith(NoLeaks.class)
class DocsTest {
    static final Path ROOT = Path.of("").toAbsolutePath().getParent();
    static final Path EXAMPLES = ROOT.resolve("registration/src/test/java/io/regmem/examples");
    /** Every module's examples (the ucx, io_uring and Netty ones live with their modules). */
    static final List<Path> ALL_EXAMPLES = List.of(EXAMPLES, ROOT.resolve("ucx/src/test/java/io/regmem/examples"),
            ROOT.resolve("uring/src/test/java/io/regmem/examples"), ROOT.resolve("netty/src/test/java/io/regmem/examples"));

    /** Which documents quote which example. */
    static final Map<String, List<String>> QUOTED_IN = Map.ofEntries(
            Map.entry("allocator", List.of("docs/allocator.md")),
            Map.entry("rdma-write", List.of("README.md", "docs/verbs.md")),
            Map.entry("sleeping-server", List.of("docs/verbs.md")),
            Map.entry("market-data", List.of("docs/verbs.md")),
            Map.entry("cache", List.of("docs/cache.md")),
            Map.entry("rw", List.of("docs/rw.md")),
            Map.entry("rpc", List.of("docs/rpc.md")),
            Map.entry("ucx", List.of("docs/providers.md")),
            Map.entry("storage", List.of("docs/storage.md")),
            Map.entry("netty", List.of("docs/netty.md")),
            Map.entry("two-process", List.of("docs/providers.md")));

    @Test
    void everyExampleIsQuotedVerbatimWhereItIsDocumented() throws IOException {
        List<String> found = new ArrayList<>();
        List<Path> examples = new ArrayList<>();
        for (Path dir : ALL_EXAMPLES) {
            try (Stream<Path> files = Files.list(dir)) {
                files.filter(p -> p.toString().endsWith("Example.java")).forEach(examples::add);
            }
        }
        for (Path f : examples) {
            String source = Files.readString(f);
            Matcher m = Pattern.compile("// example: ([a-z-]+)\n").matcher(source);
            assertThat(m.find()).as("%s has an // example: marker", f.getFileName()).isTrue();
            String name = m.group(1);
            found.add(name);
            String quoted = source.substring(m.end(), source.indexOf("// end example"));
            assertThat(QUOTED_IN).as("a document for example %s", name).containsKey(name);
            for (String doc : QUOTED_IN.get(name)) {
                assertThat(Files.readString(ROOT.resolve(doc)))
                        .as("%s quotes %s verbatim (copy it again from the source)", doc, f.getFileName())
                        .contains("```java\n" + quoted + "```");
            }
        }
        assertThat(found).containsExactlyInAnyOrderElementsOf(QUOTED_IN.keySet());
    }

    /** The guides name the versions the build uses. */
    @Test
    void theNettyGuideNamesTheNettyTheBuildUses() throws IOException {
        Matcher m = Pattern.compile("<netty.version>([^<]+)</netty.version>").matcher(Files.readString(ROOT.resolve("pom.xml")));
        assertThat(m.find()).isTrue();
        assertThat(Files.readString(ROOT.resolve("docs/netty.md"))).contains("Netty " + m.group(1));
    }

    @Test
    void everyRelativeLinkResolves() throws IOException {
        List<Path> docs = new ArrayList<>(List.of(ROOT.resolve("README.md"), ROOT.resolve("BENCHMARKS.md")));
        try (Stream<Path> files = Files.list(ROOT.resolve("docs"))) {
            files.filter(p -> p.toString().endsWith(".md")).forEach(docs::add);
        }
        Pattern link = Pattern.compile("\\]\\(([^)\\s]+)\\)");
        List<String> broken = new ArrayList<>();
        for (Path doc : docs) {
            String text = Files.readString(doc);
            Matcher m = link.matcher(text);
            while (m.find()) {
                String target = m.group(1);
                if (target.matches("^[a-z]+:.*")) {
                    continue; // http(s), mailto: not checked here
                }
                String file = target.contains("#") ? target.substring(0, target.indexOf('#')) : target;
                String anchor = target.contains("#") ? target.substring(target.indexOf('#') + 1) : null;
                Path resolved = file.isEmpty() ? doc : doc.getParent().resolve(file).normalize();
                if (!Files.exists(resolved)) {
                    broken.add(ROOT.relativize(doc) + ": " + target);
                } else if (anchor != null && resolved.toString().endsWith(".md")
                        && !anchors(Files.readString(resolved)).contains(anchor)) {
                    broken.add(ROOT.relativize(doc) + ": " + target + " (no such heading)");
                }
            }
        }
        assertThat(broken).as("relative links that do not resolve").isEmpty();
    }

    /** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens. */
    static List<String> anchors(String markdown) {
        List<String> out = new ArrayList<>();
        for (String line : markdown.split("\n")) {
            if (line.startsWith("#")) {
                String h = line.replaceFirst("^#+\\s*", "").toLowerCase(java.util.Locale.ROOT);
                out.add(h.replaceAll("[^a-z0-9 _-]", "").replace(' ', '-'));
            }
        }
        return out;
    }

    @Test
    void theReadmeStaysShort() throws IOException {
        assertThat(Files.readAllLines(ROOT.resolve("README.md"))).as("README.md lines").hasSizeLessThanOrEqualTo(260);
    }
}
