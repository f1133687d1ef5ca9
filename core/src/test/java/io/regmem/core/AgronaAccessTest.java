package io.regmem.core;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * asDirectBuffer() in a JVM that does not export jdk.internal.misc to Agrona: one clear
 * RdmaException naming the flag, instead of an IllegalAccessError from inside Agrona at the first
 * access; the pool stays usable. (This test JVM has the flag, as users of the view need; the case
 * without it runs in a child JVM.)
 */
@ExtendWith(NoLeaks.class)
class AgronaAccessTest {

    /** The child: allocates, asks for the view, prints what happened, frees, closes. */
    public static void main(String[] args) {
        try (BufferPool pool = BufferPool.builder().name("no-export").build()) {
            PooledBuffer b = pool.allocate(64);
            try {
                b.asDirectBuffer();
                System.out.println("made");
            } catch (RdmaException e) {
                System.out.println(e.errno() + " " + e.getMessage());
            }
            b.segment().set(java.lang.foreign.ValueLayout.JAVA_LONG, 0, 7L); // the buffer still works
            b.close();
            System.out.println("closed clean: " + pool.closeAndReport().clean());
        }
    }

    @Test
    void withoutTheExportTheViewIsRefusedNamingTheFlag() throws Exception {
        Path java = Path.of(System.getProperty("java.home"), "bin", "java");
        Process p = new ProcessBuilder(java.toString(), "--enable-native-access=ALL-UNNAMED",
                "--sun-misc-unsafe-memory-access=allow", "-cp", System.getProperty("java.class.path"),
                AgronaAccessTest.class.getName()).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
        assertThat(p.exitValue()).as(out).isZero();
        assertThat(out).startsWith("EOPNOTSUPP ")
                .contains("asDirectBuffer needs the JVM flag --add-exports java.base/jdk.internal.misc=ALL-UNNAMED")
                .contains("closed clean: true")
                .doesNotContain("made");
    }

    @Test
    void withTheExportTheViewWorks() {
        assertThat(AgronaAccess.USABLE).as("this test JVM runs with the export").isTrue();
        try (BufferPool pool = BufferPool.builder().name("with-export").build()) {
            PooledBuffer b = pool.allocate(64);
            b.asDirectBuffer().putLong(0, 42L);
            assertThat(b.segment().get(java.lang.foreign.ValueLayout.JAVA_LONG, 0)).isEqualTo(42L);
            b.close();
        }
    }
}
