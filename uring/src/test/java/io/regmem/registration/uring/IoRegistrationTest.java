package io.regmem.registration.uring;

import static io.regmem.registration.uring.IoRingTest.expect;
import static io.regmem.registration.testkit.PatternFiles.patternAt;
import static io.regmem.registration.testkit.PatternFiles.patternFile;
import static io.regmem.registration.uring.UringFixture.ring;
import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.BufferPool;
import io.regmem.core.Chunk;
import io.regmem.core.ChunkSource;
import io.regmem.core.Errno;
import io.regmem.core.LeakReport;
import io.regmem.core.PooledBuffer;
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;

/**
 * A pool registered with an {@link IoRing}: chunks take slots at birth, leave with their tag
 * completion awaited, and a pool closing with I/O in flight loses nothing and gives no memory back
 * while the kernel may still write into it.
 */
@ExtendWith(NoLeaks.class)
class IoRegistrationTest {
    private static final int BLOCK = 128 << 10;

    @TempDir
    Path dir;

    private final Map<Long, Integer> results = new HashMap<>();
    private final IoCompletionHandler record = (ud, res) -> results.put(ud, res);

    /**
     * A source that, when a chunk comes back, checks what the reads in flight should have put there:
     * the memory must already hold every block (the kernel finished before the memory went back).
     */
    static final class WitnessSource implements ChunkSource {
        final ChunkSource inner = ChunkSource.mmap();
        final List<String> problems = new CopyOnWriteArrayList<>();
        final AtomicInteger released = new AtomicInteger();
        final AtomicInteger allocated = new AtomicInteger();
        final Map<Long, Long> expectAt = new java.util.concurrent.ConcurrentHashMap<>(); // address -> file offset
        /** Address -> whether its block was in memory when its chunk went back. */
        final Map<Long, Boolean> landed = new java.util.concurrent.ConcurrentHashMap<>();
        volatile Thread releasedOn;

        @Override
        public Chunk allocate(long size, long alignment) {
            Chunk c = inner.allocate(size, alignment);
            allocated.incrementAndGet();
            return new Chunk(this, c.address(), c.size(), c);
        }

        @Override
        public void release(Chunk chunk) {
            MemorySegment m = MemorySegment.ofAddress(chunk.address()).reinterpret(chunk.size());
            for (Map.Entry<Long, Long> e : expectAt.entrySet()) {
                long off = e.getKey() - chunk.address();
                if (off >= 0 && off < chunk.size()) {
                    boolean whole = true;
                    for (int k = 0; k < BLOCK; k += 4093) {
                        if (m.get(ValueLayout.JAVA_BYTE, off + k) != patternAt(e.getValue() + k)) {
                            whole = false;
                            break;
                        }
                    }
                    landed.put(e.getKey(), whole);
                }
            }
            releasedOn = Thread.currentThread();
            released.incrementAndGet();
            inner.release((Chunk) chunk.sourceToken());
        }

        /**
         * Every read that completed whole ({@code results}: user data -> result, {@code addressOf}:
         * user data -> buffer address) had its block in memory when the chunk went back; reads the
         * retirement cancelled ({@code -ECANCELED}) are not checked. Adds what is wrong to problems.
         */
        void checkLanded(Map<Long, Integer> results, Map<Long, Long> addressOf) {
            results.forEach((ud, res) -> {
                if (res == BLOCK && !Boolean.TRUE.equals(landed.get(addressOf.get(ud)))) {
                    problems.add("read " + ud + " completed, but its block was not in memory when its chunk went back");
                } else if (res != BLOCK && res != -125) {
                    problems.add("read " + ud + " ended with " + res);
                }
            });
        }

        @Override
        public long pageSize() {
            return inner.pageSize();
        }

        @Override
        public String name() {
            return "witness";
        }
    }

    private static BufferPool pool(String name, ChunkSource source) {
        return BufferPool.builder().name(name).chunkSource(source).pageAligned().chunkSize(4 << 20).largestClass(BLOCK)
                .threadCacheBytes(0).build();
    }

    @Test
    void chunksTakeSlotsAtBirthAndGiveThemBackWhenTheRegistrationCloses() {
        try (IoRing ring = ring(8); BufferPool pool = pool("slots", ChunkSource.mmap())) {
            PooledBuffer early = pool.allocate(4096); // a chunk before the registration
            IoRegistration reg = ring.register(pool);
            assertThat(reg.chunks()).isEqualTo(1);
            assertThat(ring.fixedBuffersInUse()).isEqualTo(1);
            PooledBuffer large = pool.allocate(8 << 20); // a dedicated chunk, after
            assertThat(reg.chunks()).isEqualTo(2);
            assertThat(reg.bufferIndex(large.chunk())).isNotEqualTo(reg.bufferIndex(early.chunk()));
            large.close(); // its chunk leaves: slot cleared; the slot is free again once its tag completion is reaped
            assertThat(reg.chunks()).isEqualTo(1);
            for (int i = 0; i < 1000 && ring.fixedBuffersInUse() > 1; i++) {
                ring.poll(record);
            }
            assertThat(ring.fixedBuffersInUse()).isEqualTo(1);
            expect(Errno.EBUSY, "already registered", () -> ring.register(pool));
            reg.close();
            reg.close();
            for (int i = 0; i < 1000 && ring.fixedBuffersInUse() > 0; i++) {
                ring.poll(record);
            }
            assertThat(ring.fixedBuffersInUse()).isZero();
            assertThat(early.chunk().ioAttachment()).isNull();
            IoFile any = fileFor(ring);
            expect(Errno.EFAULT, "not in a chunk registered", () -> ring.readFixed(any, early, 0, 4096, 0, 1));
            any.close();
            early.close();
        }
    }

    /**
     * Another thread allocates and frees large buffers (a chunk each) many times over the table's size
     * while the owner makes no call on the ring: every allocation succeeds, no slot is taken, and each
     * chunk's memory goes back at once. A chunk born there and handed to the owner is registered when
     * the owner uses it.
     */
    @Test
    void anotherThreadsChunksNeverWaitForABusyOwner() throws Exception {
        Path file = patternFile(dir.resolve("busy"), 1L << 20);
        WitnessSource source = new WitnessSource();
        try (IoRing ring = IoRing.builder().entries(8).fixedBuffers(4).build(); BufferPool pool = pool("busy-owner", source)) {
            IoRegistration reg = ring.register(pool);
            PooledBuffer own = pool.allocate(4096); // the owner's class chunk: slot 1 of 4
            assertThat(ring.fixedBuffersInUse()).isEqualTo(1);
            AtomicReference<Throwable> failure = new AtomicReference<>();
            AtomicReference<PooledBuffer> handed = new AtomicReference<>();
            Thread other = Thread.ofPlatform().name("allocator").start(() -> {
                try {
                    for (int i = 0; i < 200; i++) { // 50 times the table, the owner asleep meanwhile
                        PooledBuffer big = pool.allocate(1L << 20 + (i % 3));
                        big.segment().set(ValueLayout.JAVA_LONG, 0, i);
                        big.close();
                    }
                    handed.set(pool.allocate(2L << 20));
                } catch (Throwable e) {
                    failure.set(e);
                }
            });
            other.join(60_000);
            assertThat(failure.get()).isNull();
            assertThat(ring.fixedBuffersInUse()).as("no slot taken for the owner").isEqualTo(1);
            assertThat(source.released.get()).as("each freed chunk went back at once").isEqualTo(200);
            assertThat(pool.stats().reservedBytes()).isEqualTo((4L << 20) + (2L << 20));

            PooledBuffer big = handed.get();
            assertThat(reg.bufferIndex(big.chunk())).as("not registered until the owner's call").isNegative();
            IoFile f = ring.openFile(file, IoFile.Mode.READ);
            ring.readFixed(f, big, 0, 4096, 8192, 7); // registers it now
            assertThat(reg.bufferIndex(big.chunk())).isNotNegative();
            assertThat(ring.fixedBuffersInUse()).isEqualTo(2);
            ring.await(1, record);
            assertThat(results.get(7L)).isEqualTo(4096);
            assertThat(big.segment().get(ValueLayout.JAVA_BYTE, 100)).isEqualTo(patternAt(8192 + 100));
            big.close();
            for (int i = 0; i < 1000 && ring.fixedBuffersInUse() > 1; i++) {
                ring.poll(record);
            }
            assertThat(ring.fixedBuffersInUse()).isEqualTo(1);
            f.close();
            own.close();
            reg.close();
        }
    }

    /** The owner's own chunks reuse a retired chunk's slot as soon as no operation names it, before its tag arrives. */
    @Test
    void theOwnerReusesARetiredSlotWithoutWaitingForItsTag() {
        try (IoRing ring = IoRing.builder().entries(8).fixedBuffers(2).build(); BufferPool pool = pool("reuse", ChunkSource.mmap())) {
            IoRegistration reg = ring.register(pool);
            for (int i = 0; i < 50; i++) { // 25 times the table, no poll in between
                PooledBuffer big = pool.allocate(8L << 20);
                assertThat(reg.bufferIndex(big.chunk())).isNotNegative();
                big.close();
            }
            assertThat(ring.fixedBuffersInUse()).isZero();
            reg.close();
        }
    }

    @Test
    void aPoolWithoutChunksIsRefusedASecondRingAndNothingChanges() {
        try (IoRing ring = ring(8); IoRing other = ring(8); BufferPool pool = pool("empty", ChunkSource.mmap())) {
            assertThat(pool.chunks()).isEmpty();
            IoRegistration reg = ring.register(pool);
            expect(Errno.EBUSY, "already registered with an io_uring ring", () -> ring.register(pool));
            expect(Errno.EBUSY, "one at a time", () -> other.register(pool));
            PooledBuffer b = pool.allocate(4096); // the chunk is the first registration's
            assertThat(reg.chunks()).isEqualTo(1);
            assertThat(reg.bufferIndex(b.chunk())).isNotNegative();
            assertThat(other.fixedBuffersInUse()).isZero();
            reg.close();
            IoRegistration again = other.register(pool);
            assertThat(again.bufferIndex(b.chunk())).isNotNegative();
            again.close();
            b.close();
        }
    }

    private IoFile fileFor(IoRing ring) {
        try {
            return ring.openFile(patternFile(dir.resolve("any"), 8192), IoFile.Mode.READ);
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    @Test
    void chunksOverTheKernelsLimitsAreRefusedAndNothingStays() {
        try (IoRing ring = IoRing.builder().entries(4).fixedBuffers(2).build();
                BufferPool pool = pool("limits", ChunkSource.mmap())) {
            IoRegistration reg = ring.register(pool);
            PooledBuffer a = pool.allocate(4 << 20); // dedicated: slot 2 of 2
            PooledBuffer b = pool.allocate(4096);    // first class chunk
            assertThat(ring.fixedBuffersInUse()).isEqualTo(2);
            expect(Errno.ENOMEM, "fixed-buffer slots are taken", () -> pool.allocate(8 << 20));
            assertThat(ring.fixedBuffersInUse()).isEqualTo(2);
            a.close();
            b.close();
            reg.close();
        }
        try (IoRing ring = ring(4); BufferPool big = BufferPool.builder().name("big").chunkSize(4 << 20)
                .maxBufferSize(2L << 30).build()) {
            ring.register(big);
            expect(Errno.EINVAL, "1 GiB", () -> big.allocate((1L << 30) + 4096));
            assertThat(ring.fixedBuffersInUse()).isZero();
        }
    }

    @Test
    void thePoolClosingOnTheOwnerWithReadsInFlightLosesNothing() throws Exception {
        Path file = patternFile(dir.resolve("inflight"), 32L << 20);
        WitnessSource source = new WitnessSource();
        try (IoRing ring = ring(64)) {
            BufferPool pool = pool("closing", source);
            ring.register(pool);
            IoFile f = ring.openFile(file, IoFile.Mode.READ, IoFile.Mode.DIRECT);
            Map<Long, Long> addressOf = new HashMap<>();
            for (int i = 0; i < 64; i++) {
                PooledBuffer b = pool.allocate(BLOCK);
                long at = (long) ((i * 97) % 256) * BLOCK;
                source.expectAt.put(b.address(), at);
                addressOf.put((long) i, b.address());
                ring.readFixed(f, b, 0, BLOCK, at, i);
            }
            ring.submit();
            // buffers still out (pinned by their reads): reported; the chunks wait for the kernel, and the
            // close never waits: the reads still waiting are cancelled, the rest complete
            assertThat(pool.closeAndReport().buffers()).isEqualTo(64);
            int got = 0;
            while (got < 64) {
                got += ring.await(1, record);
            }
            for (int i = 0; i < 1000 && ring.fixedBuffersInUse() > 0; i++) {
                ring.poll(record);
            }
            assertThat(source.released.get()).as("every chunk back once the kernel let go").isEqualTo(source.allocated.get());
            assertThat(results).hasSize(64);
            source.checkLanded(results, addressOf);
            assertThat(source.problems).isEmpty();
            assertThat(ring.fixedBuffersInUse()).isZero();
            f.close();
        }
    }

    @Test
    void thePoolClosingOnAnotherThreadWaitsForTheOwnerToRetireItsChunks() throws Exception {
        Path file = patternFile(dir.resolve("other"), 16L << 20);
        WitnessSource source = new WitnessSource();
        try (IoRing ring = ring(32)) {
            BufferPool pool = pool("closing-elsewhere", source);
            ring.register(pool);
            IoFile f = ring.openFile(file, IoFile.Mode.READ, IoFile.Mode.DIRECT);
            Map<Long, Long> addressOf = new HashMap<>();
            for (int i = 0; i < 32; i++) {
                PooledBuffer b = pool.allocate(BLOCK);
                long at = (long) i * BLOCK;
                source.expectAt.put(b.address(), at);
                addressOf.put((long) i, b.address());
                ring.readFixed(f, b, 0, BLOCK, at, i);
            }
            ring.submit();
            var report = new AtomicReference<LeakReport>();
            Thread closer = Thread.ofPlatform().name("closer").start(() -> report.set(pool.closeAndReport()));
            closer.join();
            assertThat(report.get().buffers()).as("the buffers still out are reported").isEqualTo(32);
            assertThat(source.released.get()).as("nothing goes back before the owner retires it").isZero();
            int got = 0;
            while (got < 32) {
                got += ring.await(1, record);
            }
            for (int i = 0; i < 1000 && source.released.get() == 0; i++) {
                ring.poll(record); // the owner's calls retire the chunks, from the completions and the tag
            }
            assertThat(source.released.get()).isEqualTo(1);
            assertThat(source.releasedOn).isSameAs(Thread.currentThread());
            assertThat(results).hasSize(32);
            source.checkLanded(results, addressOf);
            assertThat(source.problems).isEmpty();
            assertThat(ring.fixedBuffersInUse()).isZero();
            f.close();
        }
    }

    @Test
    void chunksBornOnAnotherThreadAreRegisteredWhenTheOwnerNeedsThem() throws Exception {
        Path file = patternFile(dir.resolve("born"), 1 << 20);
        try (IoRing ring = ring(8); BufferPool pool = pool("born-elsewhere", ChunkSource.mmap());
                IoRegistration reg = ring.register(pool)) {
            IoFile f = ring.openFile(file, IoFile.Mode.READ);
            PooledBuffer[] made = new PooledBuffer[1];
            Thread t = Thread.ofPlatform().start(() -> made[0] = pool.allocate(8 << 20)); // a dedicated chunk, elsewhere
            t.join();
            assertThat(reg.chunks()).isEqualTo(1);
            ring.readFixed(f, made[0], 4096, 4096, 0, 5);
            ring.await(1, record);
            assertThat(results).containsEntry(5L, 4096);
            assertThat(made[0].segment().get(ValueLayout.JAVA_BYTE, 4096 + 17)).isEqualTo(patternAt(17));
            made[0].close();
            f.close();
        }
    }

    @Test
    void aRingWhoseOwnerEndedClosesFromAnyThreadAndLetsThePoolGo() throws Exception {
        BufferPool pool = pool("orphan", ChunkSource.mmap());
        IoRing[] made = new IoRing[1];
        Thread owner = Thread.ofPlatform().name("short-lived").start(() -> {
            made[0] = ring(8);
            made[0].register(pool);
            pool.allocate(4096).close();
        });
        owner.join();
        IoRing ring = made[0];
        assertThat(ring.fixedBuffersInUse()).isEqualTo(1);
        ring.close();
        assertThat(IoRing.openRings()).isEmpty();
        try (IoRing again = ring(8)) {
            IoRegistration reg = again.register(pool); // the old attachment is gone
            assertThat(reg.chunks()).isEqualTo(1);
            reg.close();
        }
        pool.close();
    }

    @Test
    void closingWhileTheOwnerLivesIsRefusedElsewhere() throws Exception {
        try (IoRing ring = ring(8)) {
            Throwable[] seen = new Throwable[1];
            Thread t = Thread.ofPlatform().start(() -> {
                try {
                    ring.close();
                } catch (Throwable e) {
                    seen[0] = e;
                }
            });
            t.join();
            assertThat(seen[0]).hasMessageContaining("close on the owner");
            assertThat(ring.isClosed()).isFalse();
        }
    }

    @Test
    void theRingClosingWithReadsInFlightWaitsAndFreesEverything() throws Exception {
        Path file = patternFile(dir.resolve("ringclose"), 8L << 20);
        WitnessSource source = new WitnessSource();
        BufferPool pool = pool("ring-closing", source);
        IoRing ring = ring(64);
        ring.register(pool);
        IoFile f = ring.openFile(file, IoFile.Mode.READ, IoFile.Mode.DIRECT);
        List<PooledBuffer> bufs = new ArrayList<>();
        for (int i = 0; i < 32; i++) {
            PooledBuffer b = pool.allocate(BLOCK);
            bufs.add(b);
            ring.readFixed(f, b, 0, BLOCK, (long) (i % 64) * BLOCK, i);
        }
        ring.submit();
        ring.readFixed(f, bufs.get(0), 0, BLOCK, 0, 100); // prepared, never submitted: dropped
        ring.close();
        assertThat(ring.inFlight()).isZero();
        assertThat(ring.fixedBuffersInUse()).isZero();
        bufs.forEach(PooledBuffer::close);
        pool.close();
        assertThat(source.released.get()).isEqualTo(1);
    }
}
