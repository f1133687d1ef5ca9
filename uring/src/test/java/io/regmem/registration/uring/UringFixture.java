package io.regmem.registration.uring;

import io.regmem.core.BufferPool;
import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import org.junit.jupiter.api.Assumptions;

/** Helpers for io_uring tests: a ring (skipped without io_uring, failed under CI) and pools; pattern files are testkit.PatternFiles. */
final class UringFixture {
    private UringFixture() {
    }

    /** A ring of {@code entries} on this thread; aborts the test where io_uring is unavailable (fails under CI). */
    static IoRing ring(int entries) {
        try {
            return IoRing.open(entries);
        } catch (RdmaException e) {
            if ((e.errno() == Errno.ENOSYS || e.errno() == Errno.EPERM) && !"true".equals(System.getenv("CI"))) {
                Assumptions.abort(e.getMessage());
            }
            throw e;
        }
    }

    /** A page-aligned pool of 1 MiB chunks (size classes up to 256 KiB). */
    static BufferPool pool(String name) {
        return BufferPool.builder().name(name).pageAligned().chunkSize(1 << 20).largestClass(256 << 10).build();
    }
}
