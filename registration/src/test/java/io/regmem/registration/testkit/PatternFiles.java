package io.regmem.registration.testkit;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/** Files of a known byte pattern, for the storage tests: every byte says where it is. */
public final class PatternFiles {
    private PatternFiles() {
    }

    /** The byte a pattern file holds at {@code position}. */
    public static byte patternAt(long position) {
        long x = position * 0x9E3779B97F4A7C15L;
        return (byte) (x >>> 56 ^ position);
    }

    /** Writes {@code bytes} of the pattern to {@code file}. */
    public static Path patternFile(Path file, long bytes) throws IOException {
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
