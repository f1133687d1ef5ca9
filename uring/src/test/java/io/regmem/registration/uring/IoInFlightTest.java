package io.regmem.registration.uring;

import static io.regmem.registration.uring.IoRingTest.expect;
import static io.regmem.registration.uring.UringFixture.ring;
import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.BufferPool;
import io.regmem.core.ChunkSource;
import io.regmem.core.Errno;
import io.regmem.core.LeakReport;
import io.regmem.core.PooledBuffer;
import io.regmem.core.SafetyMode;
import io.regmem.registration.testkit.NoLeaks;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * I/O that stays in the kernel (a FIFO nobody writes, a pipe nobody drains): the buffer it uses is
 * pinned from prepare to completion, so {@code close()} of it is {@link Errno#EBUSY} and changes
 * nothing (the memory is never handed to a new owner while the kernel may write or read it), in
 * every safety mode, for READ_FIXED, READ, WRITE_FIXED and WRITE; {@link IoRing#cancel} ends such an
 * I/O; and a pool closed on another thread while one is in flight never makes the owner's poll
 * wait: the ring cancels the I/O and finishes the chunk's retirement from the completion.
 */
@ExtendWith(NoLeaks.class)
class IoInFlightTest {
    @TempDir
    Path dir;

    private final Map<Long, Integer> results = new HashMap<>();
    private final IoCompletionHandler record = (ud, res) -> results.put(ud, res);

    private Path fifo(String name) throws Exception {
        Path p = dir.resolve(name);
        Process mk = new ProcessBuilder("mkfifo", p.toString()).inheritIO().start();
        assertThat(mk.waitFor()).isZero();
        return p;
    }

    private static BufferPool pool(String name, SafetyMode mode) {
        return BufferPool.builder().name(name).safetyMode(mode).pageAligned().chunkSize(1 << 20).largestClass(256 << 10).build();
    }

    private void awaitResult(IoRing ring, long ud) {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (!results.containsKey(ud)) {
            ring.poll(record);
            assertThat(System.nanoTime()).as("completion %d within 10 s", ud).isLessThan(deadline);
            Thread.onSpinWait();
        }
    }

    @ParameterizedTest(name = "{0} in {1}")
    @CsvSource({"readFixed, CHECKED", "read, CHECKED", "readFixed, FAST", "read, PARANOID"})
    void aBufferAReadStillUsesCannotBeClosedUntilItsCompletion(String op, SafetyMode mode) throws Exception {
        Path fifo = fifo("in");
        try (IoRing ring = ring(8); BufferPool pool = pool("read-in-flight", mode); IoRegistration reg = ring.register(pool)) {
            IoFile f = ring.openFile(fifo, IoFile.Mode.READ, IoFile.Mode.WRITE); // O_RDWR: opening a FIFO does not wait
            PooledBuffer x = pool.allocate(4096);
            int generation = x.generation();
            if (op.equals("readFixed")) {
                ring.readFixed(f, x, 0, 4096, 0, 1);
            } else {
                ring.read(f, x, 0, 4096, 0, 1);
            }
            ring.submit();
            for (int i = 0; i < 100; i++) {
                ring.poll(record);
            }
            assertThat(results).as("the read waits for data").isEmpty();
            assertThat(x.pins()).isEqualTo(1);
            expect(Errno.EBUSY, "still use its memory", x::close);
            expect(Errno.EBUSY, "still use its memory", () -> pool.free(x));
            assertThat(x.generation()).as("a refused close changes nothing").isEqualTo(generation);
            x.checkGeneration(generation);
            PooledBuffer next = pool.allocate(4096);
            assertThat(next.address()).as("the next owner does not get the memory the kernel writes").isNotEqualTo(x.address());
            try (OutputStream w = Files.newOutputStream(fifo)) {
                w.write(new byte[] {1, 2, 3, 4, 5, 6, 7, 8});
            }
            awaitResult(ring, 1);
            assertThat(results.get(1L)).isEqualTo(8);
            assertThat(x.segment().get(ValueLayout.JAVA_BYTE, 7)).isEqualTo((byte) 8);
            assertThat(next.segment().get(ValueLayout.JAVA_BYTE, 7)).isZero();
            assertThat(x.pins()).isZero();
            x.close(); // after the completion: fine
            next.close();
            f.close();
        }
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource({"writeFixed", "write"})
    void aBufferAWriteStillReadsCannotBeClosedUntilItsCompletion(String op) throws Exception {
        Path fifo = fifo("out");
        try (IoRing ring = ring(8); BufferPool pool = pool("write-in-flight", SafetyMode.CHECKED);
                IoRegistration reg = ring.register(pool)) {
            IoFile f = ring.openFile(fifo, IoFile.Mode.READ, IoFile.Mode.WRITE);
            PooledBuffer fill = pool.allocate(65536);
            PooledBuffer x = pool.allocate(4096);
            x.segment().fill((byte) 0x42);
            ring.write(f, fill, 0, 65536, 0, 1); // fills the pipe (64 KiB)
            ring.await(1, record);
            assertThat(results.get(1L)).isEqualTo(65536);
            if (op.equals("writeFixed")) {
                ring.writeFixed(f, x, 0, 4096, 0, 2);
            } else {
                ring.write(f, x, 0, 4096, 0, 2);
            }
            ring.submit();
            for (int i = 0; i < 100; i++) {
                ring.poll(record);
            }
            assertThat(results).as("the write waits for room in the pipe").doesNotContainKey(2L);
            expect(Errno.EBUSY, "still use its memory", x::close);
            AtomicReference<byte[]> drained = new AtomicReference<>();
            Thread reader = Thread.ofPlatform().start(() -> { // drain: the write goes on (the owner keeps polling)
                try (InputStream r = Files.newInputStream(fifo)) {
                    drained.set(r.readNBytes(65536 + 4096));
                } catch (java.io.IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            });
            awaitResult(ring, 2);
            reader.join(10_000);
            assertThat(drained.get()).hasSize(65536 + 4096).endsWith((byte) 0x42);
            assertThat(results.get(2L)).isEqualTo(4096);
            x.close();
            fill.close();
            f.close();
        }
    }

    @Test
    void cancelEndsAnIoThatWouldNeverCompleteAndThenItsBufferCloses() throws Exception {
        Path fifo = fifo("never");
        try (IoRing ring = ring(8); BufferPool pool = pool("cancelled", SafetyMode.CHECKED); IoRegistration reg = ring.register(pool)) {
            IoFile f = ring.openFile(fifo, IoFile.Mode.READ, IoFile.Mode.WRITE);
            PooledBuffer x = pool.allocate(4096);
            ring.readFixed(f, x, 0, 4096, 0, 7);
            ring.submit();
            assertThat(ring.cancel(99)).as("no such operation").isZero();
            assertThat(ring.cancel(7)).isEqualTo(1);
            awaitResult(ring, 7);
            assertThat(results.get(7L)).as("-ECANCELED").isEqualTo(-125);
            x.close();
            f.close();
        }
    }

    /**
     * The pool closes on another thread while a read that would never complete is in flight: the
     * owner's next poll returns at once (it never waits on I/O), the ring cancels the read, the
     * completion is delivered, and only then does the chunk's memory go back.
     */
    @Test
    void aPoolClosedElsewhereWithAReadInFlightNeverMakesPollWait() throws Exception {
        Path fifo = fifo("stuck");
        IoRegistrationTest.WitnessSource source = new IoRegistrationTest.WitnessSource();
        try (IoRing ring = ring(8)) {
            BufferPool pool = BufferPool.builder().name("closed-elsewhere").chunkSource(source).pageAligned()
                    .chunkSize(1 << 20).largestClass(256 << 10).build();
            ring.register(pool);
            IoFile f = ring.openFile(fifo, IoFile.Mode.READ, IoFile.Mode.WRITE);
            PooledBuffer x = pool.allocate(4096);
            ring.readFixed(f, x, 0, 4096, 0, 3);
            ring.submit();
            AtomicReference<LeakReport> report = new AtomicReference<>();
            Thread closer = Thread.ofPlatform().start(() -> report.set(pool.closeAndReport()));
            closer.join();
            assertThat(report.get().buffers()).as("the pinned buffer is reported").isEqualTo(1);
            assertThat(source.released.get()).as("no memory goes back while the kernel may write it").isZero();
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (!results.containsKey(3L)) {
                ring.poll(record); // returns at once each time (a poll that waited on the read would hang here)
                assertThat(System.nanoTime()).as("the cancelled read delivered within 10 s").isLessThan(deadline);
            }
            assertThat(results.get(3L)).as("the read was cancelled").isEqualTo(-125);
            assertThat(source.released.get()).as("the chunk went back after the completion").isEqualTo(1);
            assertThat(ring.fixedBuffersInUse()).isZero();
            f.close();
        }
    }

    @Test
    void pinsCountAndAreRefusedOnFreedBuffers() {
        try (BufferPool pool = BufferPool.builder().name("pins").chunkSource(ChunkSource.mmap()).build()) {
            PooledBuffer b = pool.allocate(64);
            b.pin();
            b.pin();
            assertThat(b.pins()).isEqualTo(2);
            b.unpin();
            expect(Errno.EBUSY, "1 I/O operation(s) still use", b::close);
            b.unpin();
            expect(Errno.EINVAL, "not pinned", b::unpin);
            b.close();
            expect(Errno.EBADF, "pin of a freed", b::pin);
            expect(Errno.EINVAL, "double free", b::close);
        }
    }
}
