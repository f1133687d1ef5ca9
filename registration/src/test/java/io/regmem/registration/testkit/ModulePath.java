package io.regmem.registration.testkit;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;

/**
 * Runs a small application module against regmem's modules on the module path, in a child JVM:
 * the module smoke tests of every regmem module use it. The module path is taken from this test
 * JVM's class path (each entry whose file name names one of the wanted artifacts, or a module's
 * {@code target/classes}), so it is exactly what the build just made.
 */
public final class ModulePath {
    private ModulePath() {
    }

    /**
     * The module path of the named regmem modules (directories such as {@code "core"},
     * {@code "registration"}, {@code "ucx"}, {@code "uring"}, {@code "cli"}) and the libraries named by
     * {@code libraries} (substrings of their jar names, e.g. {@code "agrona"}); every one must be found.
     */
    public static List<String> of(List<String> modules, List<String> libraries) {
        List<String> path = new ArrayList<>();
        List<String> missing = new ArrayList<>();
        String sep = File.separator;
        List<String> entries = new ArrayList<>(List.of(System.getProperty("java.class.path").split(File.pathSeparator)));
        entries.add(Path.of("target/classes").toAbsolutePath().toString()); // this module's own classes
        for (String m : modules) {
            String found = null;
            for (String e : entries) {
                String name = Path.of(e).getFileName().toString();
                boolean jar = name.startsWith("regmem-" + m + "-") && name.endsWith(".jar") && !name.endsWith("-tests.jar");
                boolean classes = e.endsWith(sep + m + sep + "target" + sep + "classes");
                if (jar || classes) {
                    found = e;
                    break;
                }
            }
            if (found == null) {
                missing.add(m);
            } else if (!path.contains(found)) {
                path.add(found);
            }
        }
        for (String lib : libraries) {
            String found = null;
            for (String e : entries) {
                if (Path.of(e).getFileName().toString().startsWith(lib) && e.endsWith(".jar")) {
                    found = e;
                    break;
                }
            }
            if (found == null) {
                missing.add(lib);
            } else {
                path.add(found);
            }
        }
        assertThat(missing).as("modules and libraries not found on the class path %s", entries).isEmpty();
        return path;
    }

    /**
     * Compiles {@code sources} (path under the source root to text, with a {@code module-info.java})
     * against {@code modulePath} into {@code dir}, runs {@code mainClass} of module {@code module} with
     * {@code jvmArgs} in a child JVM, and returns what it printed. It must exit with 0 within 60 s
     * and print nothing on standard error (no warning about native access or anything else).
     */
    public static String run(Path dir, List<String> modulePath, Map<String, String> sources, String module, String mainClass,
                             List<String> jvmArgs) throws IOException, InterruptedException {
        Path src = dir.resolve("src");
        List<String> javacArgs = new ArrayList<>(List.of("-d", dir.resolve("out").toString(), "--module-path",
                String.join(File.pathSeparator, modulePath)));
        for (Map.Entry<String, String> e : sources.entrySet()) {
            Path f = src.resolve(e.getKey());
            Files.createDirectories(f.getParent());
            Files.writeString(f, e.getValue());
            javacArgs.add(f.toString());
        }
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        ByteArrayOutputStream diagnostics = new ByteArrayOutputStream();
        int rc = javac.run(null, diagnostics, diagnostics, javacArgs.toArray(String[]::new));
        assertThat(rc).as("javac of module %s: %s", module, diagnostics.toString(StandardCharsets.UTF_8)).isZero();
        List<String> withApp = new ArrayList<>(List.of(dir.resolve("out").toString()));
        withApp.addAll(modulePath);
        return exec(dir, withApp, module, mainClass, jvmArgs, List.of());
    }

    /**
     * Runs {@code mainClass} of {@code module} (already on {@code modulePath}) with {@code jvmArgs} and
     * {@code args} in a child JVM; the same checks as {@link #run}.
     */
    public static String exec(Path dir, List<String> modulePath, String module, String mainClass, List<String> jvmArgs,
                              List<String> args) throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--module-path", String.join(File.pathSeparator, modulePath)));
        cmd.addAll(jvmArgs);
        cmd.addAll(List.of("-m", module + "/" + mainClass));
        cmd.addAll(args);
        Path stderr = dir.resolve("stderr");
        Process p = new ProcessBuilder(cmd).redirectError(stderr.toFile()).start();
        String stdout = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        boolean exited = p.waitFor(60, TimeUnit.SECONDS);
        if (!exited) {
            p.destroyForcibly().waitFor();
        }
        String err = Files.readString(stderr);
        assertThat(exited).as("the module's JVM exits within 60 s; stderr: %s", err).isTrue();
        assertThat(p.exitValue()).as("exit status; stderr: %s; stdout: %s", err, stdout).isZero();
        assertThat(err).as("the JVM's standard error (warnings)").isEmpty();
        return stdout;
    }
}
