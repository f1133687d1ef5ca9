package io.regmem.registration.uring;

import static io.regmem.registration.testkit.PatternFiles.patternAt;
import static io.regmem.registration.testkit.PatternFiles.patternFile;
import static io.regmem.registration.uring.UringFixture.ring;
import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.BufferPool;
import io.regmem.core.Chunk;
import io.regmem.core.ChunkSource;
import io.regmem.core.PooledBuffer;
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;

/**
 * A pool registered with an {@link IoRing} gives chunks back while reads are in flight: a trim
 * takes only chunks whose every slot is idle (a buffer a read uses is pinned, so its chunk stays),
 * and a trimmed chunk's memory waits for the ring to retire its fixed-buffer slot (on the ring's
 * owner, its tag completion reaped) before it is decommitted. A witness source checks, when each
 * chunk's memory goes, that no read still owed it a block.
 */
@ExtendWith(NoLeaks.class)
class IoRegistrationTrimTest {
    private static final int BLOCK = 128 << 10;
    private static final long CHUNK = 4L << 20;

    @TempDir
    Path dir;

    /** mmap memory that records each decommit (and on which thread), and checks the blocks owed to it landed before. */
    static final class DecommitWitness implements ChunkSource {
        final ChunkSource inner = ChunkSource.mmap();
        final AtomicInteger decommits = new AtomicInteger();
        final List<String> problems = new CopyOnWriteArrayList<>();
        /** Buffer address -> file offset, for reads issued into it. */
        final Map<Long, Long> expectAt = new ConcurrentHashMap<>();
        volatile Thread decommittedOn;

        @Override
        public Chunk allocate(long size, long alignment) {
            Chunk c = inner.allocate(size, alignment);
            return new Chunk(this, c.address(), c.size(), c);
        }

        @Override
        public void release(Chunk chunk) {
            inner.release((Chunk) chunk.sourceToken());
        }

        @Override
        public boolean canDecommit() {
            return true;
        }

        @Override
        public void decommit(Chunk chunk) {
            MemorySegment m = MemorySegment.ofAddress(chunk.address()).reinterpret(chunk.size());
            expectAt.forEach((address, at) -> {
                long off = address - chunk.address();
                if (off >= 0 && off < chunk.size()) {
                    for (int k = 0; k < BLOCK; k += 4093) {
                        if (m.get(ValueLayout.JAVA_BYTE, off + k) != patternAt(at + k)) {
                            problems.add("a read into 0x" + Long.toHexString(address) + " had not landed when " + chunk
                                    + " was decommitted");
                            return;
                        }
                    }
                }
            });
            decommittedOn = Thread.currentThread();
            decommits.incrementAndGet();
            inner.decommit((Chunk) chunk.sourceToken());
        }

        @Override
        public long pageSize() {
            return inner.pageSize();
        }

        @Override
        public String name() {
            return "decommit-witness";
        }
    }

    @Test
    void aTrimTakesOnlyIdleChunksAndTheirMemoryWaitsForTheRing() throws Exception {
        Path file = patternFile(dir.resolve("trim"), 8L << 20);
        DecommitWitness source = new DecommitWitness();
        Map<Long, Integer> results = new HashMap<>();
        try (IoRing ring = ring(64);
             BufferPool pool = BufferPool.builder().name("uring-trim").chunkSource(source).pageAligned().chunkSize(CHUNK)
                     .largestClass(BLOCK).threadCacheBytes(0).noDecay().build()) {
            IoRegistration reg = ring.register(pool);
            IoFile f = ring.openFile(file, IoFile.Mode.READ, IoFile.Mode.DIRECT);
            List<PooledBuffer> all = new ArrayList<>();
            for (int i = 0; i < 2 * CHUNK / BLOCK; i++) {
                all.add(pool.allocate(BLOCK));
            }
            Chunk busy = all.get(0).chunk();
            List<PooledBuffer> reading = all.stream().filter(b -> b.chunk() == busy).toList();
            all.stream().filter(b -> b.chunk() != busy).forEach(PooledBuffer::close); // the other chunk: idle
            for (int i = 0; i < reading.size(); i++) {
                long at = (long) i * BLOCK;
                source.expectAt.put(reading.get(i).address(), at);
                ring.readFixed(f, reading.get(i), 0, BLOCK, at, i); // pins the buffer until its completion
            }
            ring.submit();

            // the decay's case: a trim on another thread than the ring's owner
            long[] given = new long[1];
            Thread.ofPlatform().name("trimmer").start(() -> given[0] = pool.trim()).join();
            assertThat(given[0]).as("only the idle chunk").isEqualTo(CHUNK);
            assertThat(pool.chunks()).containsExactly(busy);
            assertThat(source.decommits.get()).as("its slot is the owner's to retire first").isZero();

            int got = 0;
            while (got < reading.size()) {
                got += ring.await(1, (ud, res) -> results.put(ud, res));
            }
            for (int i = 0; i < 1000 && source.decommits.get() == 0; i++) {
                ring.poll((ud, res) -> results.put(ud, res));
            }
            assertThat(source.decommits.get()).isEqualTo(1);
            assertThat(source.decommittedOn).as("retired by the owner's calls").isSameAs(Thread.currentThread());
            assertThat(results.values()).hasSize(reading.size()).allMatch(r -> r == BLOCK);
            assertThat(pool.stats().reservedBytes()).isEqualTo(CHUNK);

            reading.forEach(PooledBuffer::close);
            assertThat(pool.trim()).isEqualTo(CHUNK); // on the owner: retired now
            for (int i = 0; i < 1000 && source.decommits.get() < 2; i++) {
                ring.poll((ud, res) -> results.put(ud, res));
            }
            assertThat(source.decommits.get()).isEqualTo(2);
            assertThat(source.problems).isEmpty();
            assertThat(pool.stats().reservedBytes()).isZero();

            // a range kept is registered with the ring again when the pool takes it back
            source.expectAt.clear();
            PooledBuffer again = pool.allocate(BLOCK);
            ring.readFixed(f, again, 0, BLOCK, 5L * BLOCK, 99);
            ring.submit();
            int[] res = {0};
            while (ring.await(1, (ud, r) -> res[0] = r) == 0) {
                Thread.onSpinWait();
            }
            assertThat(res[0]).isEqualTo(BLOCK);
            assertThat(again.segment().get(ValueLayout.JAVA_BYTE, 17)).isEqualTo(patternAt(5L * BLOCK + 17));
            assertThat(reg.chunks()).isEqualTo(1);
            again.close();
            f.close();
        }
    }
}
