package io.regmem.registration;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.testkit.NoLeaks;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The arrows between the verbs layer, the spi and the providers point one way. The spi imports only
 * value types of the verbs package ({@link #SPI_VALUE_TYPES}), and those import nothing of the spi,
 * so no class-level import circle runs through it. The providers (soft, ucx, shm, and udp, which ucx
 * carries its datagrams with) reach the verbs layer
 * through the spi's contexts and their values only: no provider source calls {@code queuePair()},
 * {@code region()} or {@code cmId()} on anything, nor names the verbs objects' types
 * ({@code QueuePair}, {@code CmId}, {@code CompletionQueue}, {@code MemoryRegion}; their public
 * constants, e.g. {@code CmId.MAX_CONNECT_PRIVATE_DATA}, are values); and a context's attachment is
 * read in one helper per provider ({@code SoftContexts}, {@code UcxContexts}, {@code ShmContexts}). A new upward arrow
 * fails here, naming the file and line.
 */
@ExtendWith(NoLeaks.class)
class ProviderLayeringTest {
    private static final Pattern UPWARD = Pattern.compile("\\.(queuePair|region|cmId)\\(\\)");
    /** What the spi may import from the verbs package: values, not objects with a lifecycle. */
    static final Set<String> SPI_VALUE_TYPES = Set.of("Access", "Opcode", "WcStatus", "DeviceAttributes", "SignatureAttrs",
            "SignatureError", "CacheStats", "AhAttributes", "DatagramDrop", "QpType", "UdParam", "CmOption");
    private static final Pattern VERBS_IMPORT = Pattern.compile("io\\.regmem\\.registration\\.([A-Z]\\w*)");
    private static final Pattern VERBS_TYPE = Pattern.compile("\\b(QueuePair|CmId|CompletionQueue|MemoryRegion)\\b(?!\\.MAX_)");

    @Test
    void providersUseTheContextsValuesNotThePublicObjects() throws IOException {
        Path root = Path.of("src/main/java/io/regmem/registration");
        assertThat(root).as("run from the module's directory").isDirectory();
        List<String> upward = new ArrayList<>();
        int checked = 0;
        for (String provider : new String[] {"soft", "udp", "ucx", "shm"}) { // (udp: datagrams over UDP, ucx's)
            Path dir = provider.equals("soft") || provider.equals("udp") ? root.resolve(provider)
                    : Path.of("../" + provider + "/src/main/java/io/regmem/registration/" + provider);
            assertThat(dir).as("the %s provider's sources", provider).isDirectory();
            try (Stream<Path> files = Files.walk(dir)) {
                for (Path f : files.filter(p -> p.toString().endsWith(".java")).toList()) {
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

    @Test
    void theSpiAndInternalNameOnlyValueTypesOfTheVerbsLayerAndTheyNameNeitherBack() throws IOException {
        Path root = Path.of("src/main/java/io/regmem/registration");
        List<String> upward = new ArrayList<>();
        int checked = 0;
        List<Path> sources = new ArrayList<>();
        for (String pkg : List.of("spi", "internal")) { // the provider ABI, and what the module's packages share
            try (Stream<Path> files = Files.list(root.resolve(pkg))) {
                files.filter(p -> p.toString().endsWith(".java")).forEach(sources::add);
            }
        }
        for (Path f : sources) {
            checked++;
            List<String> lines = Files.readAllLines(f);
            for (int i = 0; i < lines.size(); i++) {
                Matcher m = VERBS_IMPORT.matcher(lines.get(i));
                while (m.find()) {
                    if (!SPI_VALUE_TYPES.contains(m.group(1))) {
                        upward.add(f + ":" + (i + 1) + ": " + m.group());
                    }
                }
            }
        }
        assertThat(checked).as("spi and internal sources found").isGreaterThan(15);
        assertThat(upward).as("spi or internal sources naming a verbs class that is not a value type (in code or Javadoc)").isEmpty();
        for (String value : SPI_VALUE_TYPES) {
            assertThat(Files.readString(root.resolve(value + ".java")))
                    .as("%s is a value type the spi imports: it must not name the spi back", value)
                    .doesNotContain("io.regmem.registration.spi").doesNotContain("io.regmem.registration.internal");
        }
    }

    /** In the ucx provider, only the binding classes ({@code Ucp*}) touch a struct offset of {@code UcpLayout}. */
    @Test
    void onlyUcxsBindingTouchesStructOffsets() throws IOException {
        Path dir = Path.of("../ucx/src/main/java/io/regmem/registration/ucx");
        Pattern use = Pattern.compile("UcpLayout\\.([A-Z][A-Z0-9_]*)");
        Pattern value = Pattern.compile("(UCS_|AM_SEND_FLAG_|AM_RECV_ATTR_FLAG_|MEM_MAP_PROT_).*");
        List<String> offsets = new ArrayList<>();
        int checked = 0;
        try (Stream<Path> files = Files.list(dir)) {
            for (Path f : files.filter(p -> p.getFileName().toString().startsWith("Ucx")).toList()) {
                checked++;
                List<String> lines = Files.readAllLines(f);
                for (int i = 0; i < lines.size(); i++) {
                    Matcher m = use.matcher(lines.get(i));
                    while (m.find()) {
                        if (!value.matcher(m.group(1)).matches()) {
                            offsets.add(f + ":" + (i + 1) + ": " + m.group());
                        }
                    }
                }
            }
        }
        assertThat(checked).as("ucx sources above the binding").isGreaterThan(15);
        assertThat(offsets).as("struct offsets used above the binding (put them in a Ucp* struct class)").isEmpty();
    }
}
