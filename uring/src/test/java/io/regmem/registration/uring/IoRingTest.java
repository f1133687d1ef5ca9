package io.regmem.registration.uring;

import static io.regmem.registration.testkit.PatternFiles.patternAt;
import static io.regmem.registration.testkit.PatternFiles.patternFile;
import static io.regmem.registration.uring.UringFixture.pool;
import static io.regmem.registration.uring.UringFixture.ring;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.regmem.core.BufferPool;
import io.regmem.core.Errno;
import io.regmem.core.PooledBuffer;
import io.regmem.core.RdmaException;
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;

/** {@link IoRing}: setup, fixed and plain I/O byte-exact, batching, files, and every refusal before submission. */
@ExtendWith(NoLeaks.class)
class IoRingTest {
    @TempDir
    Path dir;

    private final Map<Long, Integer> results = new HashMap<>();
    private final IoCompletionHandler record = (ud, res) -> results.put(ud, res);

    @Test
    void setsUpWithTheFlagsTheKernelOffersAndClosesClean() {
        try (IoRing ring = ring(64)) {
            assertThat(ring.capacity()).isEqualTo(64);
            assertThat(ring.setupFlags()).contains("SUBMIT_ALL");
            assertThat(ring.owner()).isSameAs(Thread.currentThread());
            assertThat(IoRing.openRings()).hasSize(1);
            assertThat(ring.poll(record)).isZero();
        }
        assertThat(IoRing.openRings()).isEmpty();
    }

    @Test
    void writeFixedThenReadFixedIsByteExactBufferedAndDirect() throws Exception {
        for (boolean direct : new boolean[] {false, true}) {
            Path file = dir.resolve("rw-" + direct);
            try (IoRing ring = ring(32); BufferPool pool = pool("rw" + direct); IoRegistration reg = ring.register(pool)) {
                IoFile f = direct // the O_DIRECT file also registered in the fixed-file table
                        ? ring.openFile(file, IoFile.Mode.READ, IoFile.Mode.WRITE, IoFile.Mode.CREATE, IoFile.Mode.DIRECT,
                                IoFile.Mode.REGISTERED)
                        : ring.openFile(file, IoFile.Mode.READ, IoFile.Mode.WRITE, IoFile.Mode.CREATE);
                assertThat(f.index()).isEqualTo(direct ? 0 : -1);
                PooledBuffer out = pool.allocate(64 << 10);
                PooledBuffer in = pool.allocate(64 << 10);
                assertThat(reg.bufferIndex(out.chunk())).isGreaterThanOrEqualTo(0);
                for (int i = 0; i < 64 << 10; i++) {
                    out.segment().set(ValueLayout.JAVA_BYTE, i, patternAt(4096L + i));
                }
                ring.writeFixed(f, out, 0, 64 << 10, 4096, 1);
                ring.fsync(f, true, 2);
                assertThat(ring.prepared()).isEqualTo(2);
                ring.submit();
                assertThat(ring.await(2, record)).isEqualTo(2);
                assertThat(results).containsEntry(1L, 64 << 10).containsEntry(2L, 0);
                ring.readFixed(f, in, 0, 32 << 10, 4096, 3);
                ring.read(f, in, 32 << 10, 32 << 10, 4096 + (32 << 10), 4);
                assertThat(ring.await(2, record)).isEqualTo(2);
                assertThat(results).containsEntry(3L, 32 << 10).containsEntry(4L, 32 << 10);
                assertThat(in.segment().mismatch(out.segment())).isEqualTo(-1);
                assertThat(Files.size(file)).isEqualTo(4096 + (64 << 10));
                f.close();
                assertThat(f.isClosed()).isTrue();
                out.close();
                in.close();
            }
        }
    }

    @Test
    void plainWriteAndReadUseTheSameMemoryWithoutTheIndex() throws Exception {
        Path file = patternFile(dir.resolve("p"), 1 << 20);
        try (IoRing ring = ring(8); BufferPool pool = pool("plain"); IoRegistration _ = ring.register(pool)) {
            IoFile f = ring.openFile(file, IoFile.Mode.READ, IoFile.Mode.WRITE);
            PooledBuffer b = pool.allocate(8192);
            ring.read(f, b, 0, 8192, 8192, 7);
            ring.await(1, record);
            assertThat(results).containsEntry(7L, 8192);
            for (int i = 0; i < 8192; i++) {
                assertThat(b.segment().get(ValueLayout.JAVA_BYTE, i)).isEqualTo(patternAt(8192L + i));
            }
            ring.write(f, b, 0, 100, 0, 8);
            ring.await(1, record);
            assertThat(results).containsEntry(8L, 100);
            f.close();
            b.close();
        }
    }

    @Test
    void batchesManyOperationsIntoOneSubmit() throws Exception {
        Path file = patternFile(dir.resolve("batch"), 4 << 20);
        try (IoRing ring = ring(64); BufferPool pool = pool("batch"); IoRegistration _ = ring.register(pool)) {
            IoFile f = ring.openFile(file, IoFile.Mode.READ, IoFile.Mode.DIRECT);
            List<PooledBuffer> bufs = new ArrayList<>();
            for (int i = 0; i < 64; i++) {
                PooledBuffer b = pool.allocate(4096);
                bufs.add(b);
                ring.readFixed(f, b, 0, 4096, (long) ((i * 37) % 1024) * 4096, i);
            }
            assertThat(ring.prepared()).isEqualTo(64);
            assertThat(ring.submit()).isEqualTo(64);
            assertThat(ring.submitted()).isEqualTo(64);
            int got = 0;
            while (got < 64) {
                got += ring.await(1, record);
            }
            for (int i = 0; i < 64; i++) {
                assertThat(results).containsEntry((long) i, 4096);
                long at = (long) ((i * 37) % 1024) * 4096;
                PooledBuffer b = bufs.get(i);
                for (int k = 0; k < 4096; k += 511) {
                    assertThat(b.segment().get(ValueLayout.JAVA_BYTE, k)).isEqualTo(patternAt(at + k));
                }
            }
            assertThat(ring.inFlight()).isZero();
            bufs.forEach(PooledBuffer::close);
            f.close();
        }
    }

    @Test
    void aFailedIoIsACompletionWithTheKernelsErrno() throws Exception {
        try (IoRing ring = ring(8); BufferPool pool = pool("fail"); IoRegistration _ = ring.register(pool)) {
            IoFile d = ring.openFile(dir, IoFile.Mode.READ); // a directory: read(2) says EISDIR
            PooledBuffer b = pool.allocate(4096);
            ring.readFixed(d, b, 0, 4096, 0, 99);
            ring.await(1, record);
            assertThat(results).containsEntry(99L, -21);
            assertThat(IoRing.errno(-21)).isEqualTo(Errno.EIO); // not named by regmem: EIO, the raw value stays in the result
            assertThat(IoRing.errno(-14)).isEqualTo(Errno.EFAULT);
            assertThat(IoRing.errno(0)).isNull();
            d.close();
            b.close();
        }
    }

    @Test
    void badInputIsRefusedBeforeAnythingIsPrepared() throws Exception {
        Path file = patternFile(dir.resolve("bad"), 1 << 20);
        try (IoRing ring = ring(4); BufferPool pool = pool("bad"); BufferPool other = pool("unregistered");
                IoRegistration _ = ring.register(pool)) {
            IoFile f = ring.openFile(file, IoFile.Mode.READ, IoFile.Mode.DIRECT);
            IoFile ro = ring.openFile(file, IoFile.Mode.READ);
            PooledBuffer b = pool.allocate(8192);
            PooledBuffer stranger = other.allocate(4096);
            expect(Errno.EFAULT, "not in a chunk registered", () -> ring.readFixed(f, stranger, 0, 4096, 0, 1));
            expect(Errno.EFAULT, "outside the buffer", () -> ring.readFixed(f, b, 4096, 8192, 0, 1));
            expect(Errno.EFAULT, "outside the buffer", () -> ring.readFixed(f, b, -1, 512, 0, 1));
            expect(Errno.EINVAL, "must be aligned", () -> ring.readFixed(f, b, 1, 4096, 0, 1));
            expect(Errno.EINVAL, "must be aligned", () -> ring.readFixed(f, b, 0, 4095, 0, 1));
            expect(Errno.EINVAL, "must be aligned", () -> ring.readFixed(f, b, 0, 4096, 100, 1));
            expect(Errno.EINVAL, "negative", () -> ring.read(ro, b, 0, 10, -5, 1));
            expect(Errno.EBADF, "not open for writing", () -> ring.writeFixed(ro, b, 0, 10, 0, 1));
            expect(Errno.EINVAL, "null", () -> ring.readFixed(null, b, 0, 10, 0, 1));
            expect(Errno.EINVAL, "null", () -> ring.readFixed(ro, null, 0, 10, 0, 1));
            expect(Errno.EINVAL, "not positive", () -> ring.read(ro, b, 0, 0, 0, 1));
            expect(Errno.EINVAL, "not positive", () -> ring.read(ro, b, 0, -4, 0, 1));
            expect(Errno.EINVAL, "must not be null", () -> ring.openFile(null, IoFile.Mode.READ));
            expect(Errno.EINVAL, "must not be null", () -> ring.openFile(file, (IoFile.Mode) null));
            expect(Errno.EINVAL, "pool is null", () -> ring.register(null));
            assertThat(ring.prepared()).isZero();
            assertThat(ring.inFlight()).isZero();
            // a full queue
            for (int i = 0; i < 4; i++) {
                ring.read(ro, b, 0, 10, 0, i);
            }
            expect(Errno.EBUSY, "queue is full", () -> ring.read(ro, b, 0, 10, 0, 9));
            expect(Errno.EBUSY, "queue is full", () -> ring.fsync(ro, false, 9));
            assertThat(ring.prepared()).isEqualTo(4);
            ring.await(4, record);
            assertThat(results).hasSize(4);
            // a closed file
            ro.close();
            ro.close(); // twice: nothing
            expect(Errno.EBADF, "is closed", () -> ring.read(ro, b, 0, 10, 0, 1));
            // a freed buffer
            b.close();
            expect(Errno.EBADF, "", () -> ring.readFixed(f, b, 0, 4096, 0, 1));
            // another thread
            PooledBuffer c = pool.allocate(4096);
            AtomicReference<Throwable> seen = new AtomicReference<>();
            Thread t = Thread.ofPlatform().name("intruder").start(() -> {
                try {
                    ring.readFixed(f, c, 0, 4096, 0, 1);
                } catch (Throwable e) {
                    seen.set(e);
                }
            });
            t.join();
            assertThat(seen.get()).isInstanceOf(RdmaException.class).hasMessageContaining("intruder").hasMessageContaining("owner");
            assertThat(((RdmaException) seen.get()).errno()).isEqualTo(Errno.EPERM);
            assertThat(ring.prepared()).isZero();
            c.close();
            stranger.close();
            f.close();
        }
    }

    @Test
    void aClosedRingRefusesEverythingAndClosingTwiceDoesNothing() throws Exception {
        Path file = patternFile(dir.resolve("closed"), 8192);
        BufferPool pool = pool("closedring");
        IoRing ring = ring(4);
        ring.register(pool);
        IoFile f = ring.openFile(file, IoFile.Mode.READ);
        PooledBuffer b = pool.allocate(4096);
        ring.close();
        ring.close();
        assertThat(f.isClosed()).isTrue();
        expect(Errno.EBADF, "closed", () -> ring.readFixed(f, b, 0, 4096, 0, 1));
        expect(Errno.EBADF, "closed", ring::submit);
        expect(Errno.EBADF, "closed", () -> ring.poll(record));
        expect(Errno.EBADF, "closed", () -> ring.openFile(file, IoFile.Mode.READ));
        assertThat(b.chunk().ioAttachment()).isNull();
        b.close();
        pool.close();
    }

    @Test
    void openFileErrorsNameTheFileAndTheErrno() {
        try (IoRing ring = ring(4)) {
            expect(Errno.ENOENT, "missing", () -> ring.openFile(dir.resolve("missing"), IoFile.Mode.READ));
            expect(Errno.EINVAL, "neither READ nor WRITE", () -> ring.openFile(dir.resolve("x"), IoFile.Mode.CREATE));
            assertThat(ring.openFiles()).isZero();
        }
    }

    @Test
    void registeredFilesTakeSlotsAndGiveThemBack() throws Exception {
        Path file = patternFile(dir.resolve("reg"), 8192);
        try (IoRing ring = IoRing.builder().entries(4).fixedFiles(2).build()) {
            IoFile a = ring.openFile(file, IoFile.Mode.READ, IoFile.Mode.REGISTERED);
            IoFile b = ring.openFile(file, IoFile.Mode.READ, IoFile.Mode.REGISTERED);
            assertThat(a.index()).isNotEqualTo(b.index());
            expect(Errno.ENOMEM, "fixed-file slots are taken", () -> ring.openFile(file, IoFile.Mode.READ, IoFile.Mode.REGISTERED));
            IoFile plain = ring.openFile(file, IoFile.Mode.READ); // no slot needed
            assertThat(plain.index()).isEqualTo(-1);
            assertThat(ring.openFiles()).isEqualTo(3);
            a.close();
            IoFile c = ring.openFile(file, IoFile.Mode.READ, IoFile.Mode.REGISTERED);
            assertThat(c.index()).isEqualTo(a.index());
            b.close();
            c.close();
            plain.close();
            assertThat(ring.openFiles()).isZero();
        }
    }

    @Test
    void builderRefusesImpossibleSizes() {
        expect(Errno.EINVAL, "power of two", () -> IoRing.builder().entries(3));
        expect(Errno.EINVAL, "power of two", () -> IoRing.builder().entries(65536));
        expect(Errno.EINVAL, "16384", () -> IoRing.builder().fixedBuffers(16385));
        expect(Errno.EINVAL, "65536", () -> IoRing.builder().fixedFiles(0));
    }

    @Test
    void memlockAndUnavailableMessagesSayWhatToDo() {
        RdmaException m = RingMemory.memlock("registering a chunk", 4 << 20);
        assertThat(m.errno()).isEqualTo(Errno.ENOMEM);
        assertThat(m.getMessage()).contains("RLIMIT_MEMLOCK").contains("4194304 bytes").contains("ulimit -l")
                .contains("CAP_IPC_LOCK");
        assertThat(RingMemory.setupFailure(38, 8).errno()).isEqualTo(Errno.ENOSYS);
        assertThat(RingMemory.setupFailure(38, 8).getMessage()).contains("io_uring is not available").contains("seccomp");
        assertThat(RingMemory.setupFailure(1, 8).errno()).isEqualTo(Errno.EPERM);
        assertThat(RingMemory.setupFailure(1, 8).getMessage()).contains("io_uring_disabled");
    }

    @Test
    void nopsCompleteWithZeroAndCountAsOperations() {
        try (IoRing ring = ring(8)) {
            for (int i = 0; i < 8; i++) {
                ring.nop(100 + i);
            }
            expect(Errno.EBUSY, "queue is full", () -> ring.nop(9));
            assertThat(ring.await(8, record)).isEqualTo(8);
            for (int i = 0; i < 8; i++) {
                assertThat(results).containsEntry(100L + i, 0);
            }
            assertThat(ring.submitted()).isEqualTo(8);
            assertThat(ring.completed()).isEqualTo(8);
        }
    }

    @Test
    void aHandlerThatResubmitsAtOnceDoesNotKeepAPollOrAwaitFromReturning() throws Exception {
        Path file = patternFile(dir.resolve("cached"), 1 << 20); // in the page cache: reads complete inline
        try (IoRing ring = ring(8); BufferPool pool = pool("resubmit"); IoRegistration _ = ring.register(pool)) {
            IoFile f = ring.openFile(file, IoFile.Mode.READ);
            PooledBuffer[] b = new PooledBuffer[8];
            int[] inCall = {0};
            long[] total = {0};
            IoCompletionHandler again = (slot, res) -> {
                assertThat(res).isEqualTo(4096);
                if (++inCall[0] > 1000) {
                    throw new IllegalStateException("one call delivered more than 1000 completions");
                }
                total[0]++;
                ring.read(f, b[(int) slot], 0, 4096, (total[0] % 256) * 4096, slot);
                ring.submit(); // completes at once, in this very system call
            };
            for (int i = 0; i < 8; i++) {
                b[i] = pool.allocate(4096);
                ring.read(f, b[i], 0, 4096, 0, i);
            }
            ring.submit();
            for (int call = 0; call < 200; call++) {
                inCall[0] = 0;
                if (call % 2 == 0) {
                    ring.await(1, again);
                } else {
                    ring.poll(again);
                }
            }
            assertThat(total[0]).isGreaterThanOrEqualTo(100);
            while (ring.inFlight() > 0) {
                ring.await(1, (s, r) -> { });
            }
            for (PooledBuffer x : b) {
                x.close();
            }
            f.close();
        }
    }

    @Test
    void aHandlerClosingTheRingEndsTheCallCleanly() throws Exception {
        Path file = patternFile(dir.resolve("closing"), 1 << 20);
        BufferPool pool = pool("close-in-handler");
        IoRing ring = ring(8);
        ring.register(pool);
        IoFile f = ring.openFile(file, IoFile.Mode.READ);
        PooledBuffer[] b = new PooledBuffer[8];
        for (int i = 0; i < 8; i++) {
            b[i] = pool.allocate(4096);
            ring.read(f, b[i], 0, 4096, (long) i * 4096, i);
        }
        ring.submit();
        int[] seen = {0};
        int delivered = ring.await(8, (ud, res) -> {
            seen[0]++;
            ring.close(); // from inside the ring's own reap: the rest is dropped, nothing touches its memory
        });
        assertThat(delivered).isEqualTo(1);
        assertThat(seen[0]).isEqualTo(1);
        assertThat(ring.isClosed()).isTrue();
        expect(Errno.EBADF, "closed", () -> ring.poll((u, r) -> { }));
        expect(Errno.EINVAL, "handler is null", () -> {
            try (IoRing other = ring(2)) {
                other.poll(null);
            }
        });
        for (PooledBuffer x : b) {
            x.close();
        }
        pool.close();
    }

    @Test
    void theReadmeSnippetReadsABlock() throws Exception {
        Path path = patternFile(dir.resolve("blocks.dat"), 1 << 20); // README: Path.of("blocks.dat")
        long[] got = new long[1];
        try (IoRing ring = IoRing.builder().entries(64).build();         // owned by this thread
             BufferPool pool = BufferPool.builder().name("blocks").pageAligned().build()) {
            ring.register(pool);                                          // each chunk a fixed buffer, at birth
            IoFile file = ring.openFile(path, IoFile.Mode.READ, IoFile.Mode.DIRECT);
            PooledBuffer block = pool.allocate(65536);
            ring.readFixed(file, block, 0, 65536, 0, 1);                  // prepared ...
            ring.await(1, (userData, result) -> got[0] = result);         // ... submitted, reaped: bytes or -errno
            assertThat(block.segment().get(ValueLayout.JAVA_BYTE, 777)).isEqualTo(patternAt(777));
            block.close();
            file.close();
        }
        assertThat(got[0]).isEqualTo(65536);
    }

    static void expect(Errno errno, String text, Runnable call) {
        assertThatThrownBy(call::run).isInstanceOf(RdmaException.class).hasMessageContaining(text)
                .satisfies(e -> assertThat(((RdmaException) e).errno()).isEqualTo(errno));
    }
}
