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
 * io.regmem.netty on the module path beside Netty's own modules: the Netty guide's example,
 * compiled into an application module that requires io.regmem.netty and io.netty.transport.
 */
@ExtendWith(NoLeaks.class)
class NettyModulePathTest {

    @TempDir
    Path dir;

    @Test
    void theNettyExampleRunsOnTheModulePath() throws Exception {
        List<String> path = ModulePath.of(List.of("core", "registration", "netty"),
                List.of("agrona", "jctools-core", "netty-buffer-4", "netty-common-4", "netty-transport-4", "netty-resolver-4"));
        String example = Files.readString(Path.of("src/test/java/io/regmem/examples/NettyExample.java"));
        String out = ModulePath.run(dir, path, Map.of(
                        "module-info.java", "module netty.app { requires io.regmem.netty; requires io.netty.transport; requires io.netty.common; }\n",
                        "io/regmem/examples/NettyExample.java", example),
                "netty.app", "io.regmem.examples.NettyExample",
                List.of("--enable-native-access=io.regmem.core,io.regmem.registration", "--sun-misc-unsafe-memory-access=allow"));
        assertThat(out).isEqualTo("lkey true\nreceived hello\n");
    }
}
