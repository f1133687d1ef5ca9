package io.regmem.core;

import static org.assertj.core.api.Assertions.assertThat;

import java.lang.foreign.ValueLayout;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** README's usage example, kept compiling and true. */
@ExtendWith(NoLeaks.class)
class ReadmeExampleTest {

    @Test
    void theReadmeExampleWorks() {
        long bytes;
        PoolStats stats;
        try (BufferPool pool = BufferPool.builder()
                .name("orders")
                .maxBytes(1L << 30)
                .safetyMode(SafetyMode.CHECKED)
                .build()) {

            PooledBuffer header = pool.allocate(64);
            PooledBuffer page = pool.allocate(4096);
            header.segment().set(ValueLayout.JAVA_LONG, 0, 42L);
            UnsafeBuffer agrona = page.asDirectBuffer();
            agrona.putLong(0, 7L);

            ScatterList sg = new ScatterList();
            sg.add(header, 0, 64).add(page, 0, 4096);
            bytes = sg.totalLength();

            header.close();
            page.close();
            stats = pool.stats();
        }
        assertThat(bytes).isEqualTo(4160);
        assertThat(stats.liveBuffers()).isZero();
        assertThat(stats.allocations()).isEqualTo(2);
    }
}
