package io.regmem.registration.uring;

import io.regmem.core.BufferPool;
import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import org.junit.jupiter.api.Assumptions;

/** Helpers for io_uring tests: a ring (skipped without io_uring, failed under CI), pools, pattern files. */
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

    /** The byte the pattern file holds at {@code position}. */
    static byte patternAt(long position) {
        long x = position * 0x9E3779B97F4A7C15L;
        return (byte) (x >>> 56 ^ position);
    }

    /** Writes {@code bytes} of the pattern to {@code file}. */
    static Path patternFile(Path file, long bytes) throws IOException {
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                StandardOpenOption.TRUNCATE_EXISTING)) {
            ByteBuffer b = ByteBuffer.allocate(1 << 16);
            for (long pos = 0; pos < bytes; ) {
                b.clear();
                int n = (int) Math.min(b.capacity(), bytes - pos);
                for (int i = 0; i < n; i++) {
                    b.put(patternAt(pos + i));
                }
                b.flip();
                while (b.hasRemaining()) {
                    pos += ch.write(b, pos);
                }
            }
        }
        return file;
    }
}
