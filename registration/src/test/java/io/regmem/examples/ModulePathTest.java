package io.regmem.examples;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.testkit.NoLeaks;
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;
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

    @TempDir
    Path dir;

    @Test
    void theTourExampleRunsOnTheModulePath() throws Exception {
        String modulePath = String.join(File.pathSeparator, regmemModulePath());
        Path src = dir.resolve("src");
        Path pkg = Files.createDirectories(src.resolve("io/regmem/examples"));
        Files.writeString(src.resolve("module-info.java"), "module example.app { requires io.regmem.registration; }\n");
        Files.copy(DocsTest.EXAMPLES.resolve("RdmaWriteExample.java"), pkg.resolve("RdmaWriteExample.java"));
        Path out = dir.resolve("out");
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        int rc = javac.run(null, null, null, "-d", out.toString(), "--module-path", modulePath,
                src.resolve("module-info.java").toString(), pkg.resolve("RdmaWriteExample.java").toString());
        assertThat(rc).as("javac of the example module").isZero();

        Path java = Path.of(System.getProperty("java.home"), "bin", "java");
        Process p = new ProcessBuilder(java.toString(),
                "--module-path", out + File.pathSeparator + modulePath,
                "--enable-native-access=io.regmem.core,io.regmem.registration",
                "--sun-misc-unsafe-memory-access=allow",
                "-m", "example.app/io.regmem.examples.RdmaWriteExample")
                .redirectError(dir.resolve("stderr").toFile()).start();
        String stdout = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
        String stderr = Files.readString(dir.resolve("stderr"));
        assertThat(p.exitValue()).as(stderr).isZero();
        assertThat(stdout).isEqualTo("""
                completion: SUCCESS, 64 bytes
                server reads: hello, registered memory
                """);
        assertThat(stderr).as("the JVM's own warnings").isEmpty();
    }

    /**
     * The soft provider's fault injection is reachable from an application module: the exported
     * {@code io.regmem.registration.faults.QpFaults}, through {@code qp.unwrap(QpFaults.class)}.
     */
    @Test
    void faultInjectionIsReachableOnTheModulePath() throws Exception {
        String modulePath = String.join(File.pathSeparator, regmemModulePath());
        Path src = dir.resolve("src");
        Path pkg = Files.createDirectories(src.resolve("faultsapp"));
        Files.writeString(src.resolve("module-info.java"), "module faults.app { requires io.regmem.registration; }\n");
        Files.writeString(pkg.resolve("Main.java"), """
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
                """);
        Path out = dir.resolve("out");
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        int rc = javac.run(null, null, null, "-d", out.toString(), "--module-path", modulePath,
                src.resolve("module-info.java").toString(), pkg.resolve("Main.java").toString());
        assertThat(rc).as("javac of the module").isZero();
        Path java = Path.of(System.getProperty("java.home"), "bin", "java");
        Process p = new ProcessBuilder(java.toString(),
                "--module-path", out + File.pathSeparator + modulePath,
                "--enable-native-access=io.regmem.core,io.regmem.registration",
                "--sun-misc-unsafe-memory-access=allow",
                "-m", "faults.app/faultsapp.Main")
                .redirectError(dir.resolve("stderr").toFile()).start();
        String stdout = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
        String stderr = Files.readString(dir.resolve("stderr"));
        assertThat(p.exitValue()).as(stderr).isZero();
        assertThat(stdout).isEqualTo("faults: true\n");
    }

    /**
     * regmem's two modules and what they require, from this test JVM's class path: the
     * registration module's classes (with its module-info.class), the core jar or classes, Agrona
     * and JCTools.
     */
    static List<String> regmemModulePath() {
        List<String> path = new ArrayList<>();
        path.add(Path.of("target/classes").toAbsolutePath().toString());
        for (String entry : System.getProperty("java.class.path").split(File.pathSeparator)) {
            String name = Path.of(entry).toString();
            if (name.contains("agrona") || name.contains("jctools-core")
                    || name.contains("regmem-core") || name.endsWith("core" + File.separator + "target" + File.separator + "classes")) {
                path.add(entry);
            }
        }
        assertThat(path).as("module path").hasSize(4);
        assertThat(Path.of(path.getFirst(), "module-info.class")).exists();
        return path;
    }
}
