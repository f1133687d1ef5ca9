package io.regmem.examples;

// example: storage
import io.regmem.core.BufferPool;
import io.regmem.core.PooledBuffer;
import io.regmem.registration.uring.IoFile;
import io.regmem.registration.uring.IoRing;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;

/** Writes two blocks with WRITE_FIXED, syncs, reads them back with READ_FIXED, checks them. */
public final class StorageExample {
    public static void main(String[] args) throws Exception {
        Path path = Files.createTempFile("regmem-example", ".dat");
        try (IoRing ring = IoRing.builder().entries(64).build();           // this thread owns the ring
             BufferPool pool = BufferPool.builder().name("blocks").pageAligned().build()) {
            ring.register(pool);                                            // every chunk: a fixed buffer
            IoFile file = ring.openFile(path, IoFile.Mode.READ, IoFile.Mode.WRITE, IoFile.Mode.DIRECT);
            PooledBuffer out = pool.allocate(8192);
            PooledBuffer in = pool.allocate(8192);
            for (int i = 0; i < 8192; i += 8) {
                out.segment().set(ValueLayout.JAVA_LONG, i, i * 31L);
            }
            ring.writeFixed(file, out, 0, 4096, 0, 1);                      // prepare two writes ...
            ring.writeFixed(file, out, 4096, 4096, 4096, 2);
            ring.fsync(file, true, 3);
            ring.submit();                                                  // ... and submit them at once
            int[] done = {0};
            while (done[0] < 3) {
                ring.await(1, (userData, result) -> {                       // a negative result is -errno
                    if (result < 0) {
                        throw new IllegalStateException("op " + userData + ": " + IoRing.errno(result));
                    }
                    done[0]++;
                });
            }
            ring.readFixed(file, in, 0, 8192, 0, 4);
            ring.await(1, (userData, result) -> System.out.println("read " + result + " bytes"));
            System.out.println("equal: " + (in.segment().mismatch(out.segment()) == -1));
            in.close();
            out.close();
            file.close();
        } finally {
            Files.deleteIfExists(path);
        }
    }
}
// end example
