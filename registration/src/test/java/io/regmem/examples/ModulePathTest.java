package io.regmem.examples;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.testkit.ModulePath;
import io.regmem.registration.testkit.NoLeaks;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;

/**
 * regmem as JPMS modules: the tour example is compiled into a module of its own that
 * {@code requires io.regmem.registration}, and run in a child JVM on the module path with native
 * access granted to regmem's two modules by name (not ALL-UNNAMED). The soft provider is found
 * through the module's {@code provides}. The JVM must print nothing on stderr: no warning about
 * native access or anything else.
 */
@ExtendWith(NoLeaks.class)
class ModulePathTest {
    /** Native access for regmem's two modules, by name; JCTools and Agrona use sun.misc.Unsafe. */
    private static final List<String> JVM_ARGS = List.of("--enable-native-access=io.regmem.core,io.regmem.registration",
            "--sun-misc-unsafe-memory-access=allow");

    @TempDir
    Path dir;

    @Test
    void theTourExampleRunsOnTheModulePath() throws Exception {
        String out = ModulePath.run(dir, regmemModulePath(), Map.of(
                        "module-info.java", "module example.app { requires io.regmem.registration; }\n",
                        "io/regmem/examples/RdmaWriteExample.java", Files.readString(DocsTest.EXAMPLES.resolve("RdmaWriteExample.java"))),
                "example.app", "io.regmem.examples.RdmaWriteExample", JVM_ARGS);
        assertThat(out).isEqualTo("""
                completion: SUCCESS, 64 bytes
                server reads: hello, registered memory
                """);
    }

    /**
     * The soft provider's fault injection is reachable from an application module: the exported
     * {@code io.regmem.registration.faults.QpFaults}, through {@code qp.unwrap(QpFaults.class)}.
     */
    @Test
    void faultInjectionIsReachableOnTheModulePath() throws Exception {
        String out = ModulePath.run(dir, regmemModulePath(), Map.of(
                        "module-info.java", "module faults.app { requires io.regmem.registration; }\n",
                        "faultsapp/Main.java", MAIN),
                "faults.app", "faultsapp.Main", JVM_ARGS);
        assertThat(out).isEqualTo("faults: true\n");
    }

    private static final String MAIN = """
                package faultsapp;

                import io.regmem.registration.CmId;
                import io.regmem.registration.CompletionQueue;
                import io.regmem.registration.ProtectionDomain;
                import io.regmem.registration.QpInitAttributes;
                import io.regmem.registration.QueuePair;
                import io.regmem.registration.RdmaDevice;
                import io.regmem.registration.faults.QpFaults;

                public class Main {
                    public static void main(String[] args) {
                        try (RdmaDevice d = RdmaDevice.open("soft")) {
                            ProtectionDomain pd = d.allocPd();
                            CompletionQueue cq = d.createCq(16);
                            CmId id = d.createCmId();
                            QueuePair qp = id.createQp(pd, QpInitAttributes.of(cq));
                            QpFaults faults = qp.unwrap(QpFaults.class);
                            System.out.println("faults: " + (faults != null));
                            id.destroyQp();
                            id.close();
                            cq.close();
                            pd.close();
                        }
                    }
                }
                """;

    /**
     * regmem's two modules and what they require, from this test JVM's class path: the
     * registration module's classes (with its module-info.class), the core jar or classes, Agrona
     * and JCTools.
     */
    static List<String> regmemModulePath() {
        List<String> path = ModulePath.of(List.of("registration", "core"), List.of("agrona", "jctools-core"));
        assertThat(path).as("module path").hasSize(4);
        assertThat(Path.of(path.getFirst(), "module-info.class")).exists();
        return path;
    }
}
