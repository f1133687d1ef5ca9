package io.regmem.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.testkit.ModulePath;
import io.regmem.registration.testkit.NoLeaks;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;

/**
 * The io.regmem.cli module on the module path: {@code regmem demo} (RPC, allocator, RDMA loopback
 * and storage parts, small counts) runs from the module's main class ({@code -m io.regmem.cli/...}) with native access granted to
 * regmem's modules by name, picocli reading its commands through the module's {@code opens}.
 */
@ExtendWith(NoLeaks.class)
class CliModulePathTest {

    @TempDir
    Path dir;

    @Test
    void theDemoRunsOnTheModulePath() throws Exception {
        List<String> path = ModulePath.of(List.of("core", "registration", "uring", "cli"),
                List.of("agrona", "jctools-core", "picocli", "HdrHistogram"));
        List<String> args = new ArrayList<>(List.of("--enable-native-access=io.regmem.core,io.regmem.registration,io.regmem.uring",
                "--sun-misc-unsafe-memory-access=allow"));
        String out = ModulePath.exec(dir, path, "io.regmem.cli", "io.regmem.cli.RegmemCommand", args,
                List.of("demo", "--requests", "1000", "--rdma-requests", "100", "--rpc-calls", "500", "--rpc-warmup", "0",
                        "--storage-mib", "8", "--storage-calls", "100", "--storage-block", "16384"));
        assertThat(out).contains("PASS: every byte checked, nothing leaked");
    }

    /**
     * {@code regmem demo --provider ucx} on the module path: the ucx provider found through
     * io.regmem.ucx's service (service binding: no {@code --add-modules}), and the RPC server it starts as a child JVM
     * started on the same module path.
     */
    @Test
    void theUcxDemoAndItsChildServerRunOnTheModulePath() throws Exception {
        try (RdmaDevice probe = RdmaDevice.open("ucx")) {
            assertThat(probe.name()).startsWith("ucx");
        } catch (RdmaException e) {
            Assumptions.assumeFalse(e.errno() == Errno.ENODEV && !"true".equals(System.getenv("CI")), "UCX is not installed");
            throw e;
        }
        List<String> path = ModulePath.of(List.of("core", "registration", "uring", "shm", "ucx", "cli"),
                List.of("agrona", "jctools-core", "picocli", "HdrHistogram"));
        List<String> args = List.of("--enable-native-access=io.regmem.core,io.regmem.registration,io.regmem.uring,io.regmem.shm,io.regmem.ucx",
                "--sun-misc-unsafe-memory-access=allow");
        String out = ModulePath.exec(dir, path, "io.regmem.cli", "io.regmem.cli.RegmemCommand", args,
                List.of("demo", "--provider", "ucx", "--requests", "100", "--rdma-requests", "100", "--rpc-calls", "500",
                        "--rpc-warmup", "0", "--storage-mib", "0", "--quiet-progress"));
        assertThat(out).contains("started the RPC server as a child process", "Replies checked byte by byte: 0 wrong",
                "PASS: every byte checked, nothing leaked");
    }
}
