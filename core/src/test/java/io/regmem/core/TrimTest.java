package io.regmem.core;

import static io.regmem.core.NoLeaks.closeClean;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.logging.Handler;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * {@link BufferPool#trim} and the decay: which chunks go back (all slots idle, nothing live or
 * cached), in which order (listeners, holds, then the memory), what stays (live buffers' chunks, the
 * floor), that the range is reused for the next chunk, and that stale views never fault.
 */
@ExtendWith(NoLeaks.class)
class TrimTest {
    static final long CHUNK = 1L << 20;
    static final long BUF = 64L << 10; // 16 buffers per chunk, one slab per chunk

    static BufferPoolBuilder small(String name) {
        return BufferPool.builder().name(name).chunkSize(CHUNK).slabSize(CHUNK).threadCacheBytes(2 * BUF).noDecay();
    }

    static List<PooledBuffer> fill(BufferPool pool, int chunks) {
        List<PooledBuffer> out = new ArrayList<>();
        for (int i = 0; i < chunks * (CHUNK / BUF); i++) {
            PooledBuffer b = pool.allocate(BUF);
            b.segment().fill((byte) 0x5A); // dirty every page, so that residency tells
            out.add(b);
        }
        return out;
    }

    @Test
    void aTrimGivesBackEveryIdleChunkAndItsMemory() throws Throwable {
        BufferPool pool = small("trim-all").build();
        List<PooledBuffer> bufs = fill(pool, 4);
        List<Chunk> chunks = pool.chunks();
        assertThat(chunks).hasSize(4);
        for (Chunk c : chunks) {
            assertThat(Resident.pages(c.address(), c.size())).isEqualTo(c.size() / Native.PAGE_SIZE);
        }
        bufs.forEach(PooledBuffer::close);
        assertThat(pool.stats().reservedBytes()).as("freeing alone gives nothing back").isEqualTo(4 * CHUNK);

        assertThat(pool.trim()).isEqualTo(4 * CHUNK);

        PoolStats s = pool.stats();
        assertThat(s.reservedBytes()).isZero();
        assertThat(s.chunks()).isZero();
        assertThat(s.givenBackChunks()).isEqualTo(4);
        assertThat(s.givenBackBytes()).isEqualTo(4 * CHUNK);
        assertThat(s.cachedBytes()).as("the caller's cache and the stash were drained").isZero();
        assertThat(pool.chunks()).isEmpty();
        for (Chunk c : chunks) {
            assertThat(Resident.pages(c.address(), c.size())).as("decommitted: %s", c).isZero();
        }
        assertThat(pool.trim()).as("nothing left to give").isZero();
        closeClean(pool);
    }

    @Test
    void theNextChunkReusesTheLowestRangeKeptAndItsMemoryIsZeros() {
        BufferPool pool = small("trim-reuse").build();
        List<PooledBuffer> bufs = fill(pool, 3);
        long lowest = pool.chunks().stream().mapToLong(Chunk::address).min().orElseThrow();
        List<Chunk> before = pool.chunks();
        bufs.forEach(PooledBuffer::close);
        pool.trim();

        PooledBuffer b = pool.allocate(BUF);
        Chunk now = b.chunk();
        assertThat(now.address()).as("the lowest range kept, not a new mapping").isEqualTo(lowest);
        assertThat(before).as("a new Chunk object over the range").doesNotContain(now);
        assertThat(b.segment().mismatch(MemorySegment.ofArray(new byte[(int) BUF]))).as("zeros again").isEqualTo(-1);
        assertThat(pool.stats().reservedBytes()).isEqualTo(CHUNK);
        b.close();
        closeClean(pool);
    }

    @Test
    void aLiveBufferKeepsItsChunkAndStillWorks() {
        BufferPool pool = small("trim-live").build();
        List<PooledBuffer> bufs = fill(pool, 3);
        PooledBuffer kept = bufs.remove(20); // in the second chunk
        kept.segment().set(ValueLayout.JAVA_LONG, 0, 42L);
        bufs.forEach(PooledBuffer::close);

        assertThat(pool.trim()).isEqualTo(2 * CHUNK);
        assertThat(pool.chunks()).containsExactly(kept.chunk());
        assertThat(kept.segment().get(ValueLayout.JAVA_LONG, 0)).isEqualTo(42L);
        assertThat(kept.segment().get(ValueLayout.JAVA_BYTE, BUF - 1)).isEqualTo((byte) 0x5A);
        kept.close();
        assertThat(pool.trim()).isEqualTo(CHUNK);
        closeClean(pool);
    }

    @Test
    void aTrimKeepsTheFloorAndGivesBackTheHighestChunksFirst() {
        BufferPool pool = small("trim-floor").build();
        List<PooledBuffer> bufs = fill(pool, 4);
        List<Long> addresses = pool.chunks().stream().map(Chunk::address).sorted().toList();
        bufs.forEach(PooledBuffer::close);

        assertThat(pool.trim(2 * CHUNK)).isEqualTo(2 * CHUNK);
        assertThat(pool.stats().reservedBytes()).isEqualTo(2 * CHUNK);
        assertThat(pool.chunks().stream().map(Chunk::address).sorted().toList()).isEqualTo(addresses.subList(0, 2));
        closeClean(pool);
    }

    @Test
    void bindingTakesTheLowestSlabFirstSoThatTheHighestChunksEmpty() {
        BufferPool pool = small("trim-order").threadCacheBytes(0).build();
        List<PooledBuffer> bufs = fill(pool, 4);
        bufs.forEach(PooledBuffer::close);
        pool.trim(); // every slot idle, no handle left in a stash
        List<PooledBuffer> again = fill(pool, 4); // reuses the four ranges
        again.sort(Comparator.comparingLong(PooledBuffer::address));
        // free every other buffer, highest first (so the highest slabs get idle slots first), then
        // allocate half a chunk's worth: it must come from the lowest chunk all the same
        for (int i = again.size() - 2; i >= 0; i -= 2) {
            again.get(i).close();
        }
        pool.trim(); // gives nothing: every chunk has live buffers; drains the stash into idle slots
        long lowestChunk = again.get(0).chunk().address();
        List<PooledBuffer> refill = new ArrayList<>();
        for (int i = 0; i < CHUNK / BUF / 2; i++) {
            refill.add(pool.allocate(BUF));
        }
        assertThat(refill).allSatisfy(b -> assertThat(b.chunk().address()).isEqualTo(lowestChunk));
        refill.forEach(PooledBuffer::close);
        for (int i = 1; i < again.size(); i += 2) {
            again.get(i).close();
        }
        closeClean(pool);
    }

    @Test
    void listenersLetGoFirstAndTheMemoryWaitsForTheirHolds() throws Throwable {
        BufferPool pool = small("trim-order-listeners").build();
        List<String> log = new CopyOnWriteArrayList<>();
        List<Runnable> holds = new ArrayList<>();
        pool.addChunkListener(new ChunkListener() {
            @Override
            public void chunkAdded(Chunk chunk) {
                log.add("added");
            }

            @Override
            public void chunkRemoved(Chunk chunk) {
                try {
                    log.add("removed, resident " + Resident.pages(chunk.address(), chunk.size()));
                } catch (Throwable t) {
                    throw new AssertionError(t);
                }
                holds.add(chunk.holdRelease()); // as an io_uring registration with I/O in flight does
            }
        });
        List<PooledBuffer> bufs = fill(pool, 1);
        Chunk c = pool.chunks().get(0);
        bufs.forEach(PooledBuffer::close);

        assertThat(pool.trim()).isEqualTo(CHUNK);
        long pages = CHUNK / Native.PAGE_SIZE;
        assertThat(log).containsExactly("added", "removed, resident " + pages);
        assertThat(holds).hasSize(1).doesNotContainNull();
        assertThat(Resident.pages(c.address(), c.size())).as("held: the memory stays").isEqualTo(pages);
        assertThat(pool.stats().reservedBytes()).as("counted until the hold ends").isEqualTo(CHUNK);
        assertThat(pool.chunks()).as("but no longer the pool's").isEmpty();

        holds.get(0).run();
        assertThat(Resident.pages(c.address(), c.size())).isZero();
        assertThat(pool.stats().reservedBytes()).isZero();
        closeClean(pool);
    }

    @Test
    void aHoldEndingAfterTheCloseReleasesTheChunkThen() {
        BufferPool pool = small("trim-hold-close").build();
        List<Runnable> holds = new ArrayList<>();
        pool.addChunkListener(new ChunkListener() {
            @Override
            public void chunkAdded(Chunk chunk) {
            }

            @Override
            public void chunkRemoved(Chunk chunk) {
                holds.add(chunk.holdRelease());
            }
        });
        fill(pool, 1).forEach(PooledBuffer::close);
        pool.trim();
        closeClean(pool);
        holds.get(0).run(); // unmapped now: nothing kept after the close
        assertThat(pool.stats().reservedBytes()).isZero();
    }

    @Test
    void aListenerThatThrowsFailsTheTrimAndTheChunkKeepsItsPages() throws Throwable {
        BufferPool pool = small("trim-listener-throws").build();
        java.util.concurrent.atomic.AtomicBoolean failOnce = new java.util.concurrent.atomic.AtomicBoolean(true);
        pool.addChunkListener(new ChunkListener() {
            @Override
            public void chunkAdded(Chunk chunk) {
            }

            @Override
            public void chunkRemoved(Chunk chunk) {
                if (failOnce.getAndSet(false)) {
                    throw new RdmaException(Errno.EIO, "deregistration failed");
                }
            }
        });
        fill(pool, 1).forEach(PooledBuffer::close);
        Chunk c = pool.chunks().get(0);
        assertThatThrownBy(pool::trim).isInstanceOf(RdmaException.class).hasMessageContaining("deregistration failed");
        assertThat(Resident.pages(c.address(), c.size())).as("not decommitted").isEqualTo(CHUNK / Native.PAGE_SIZE);
        assertThat(pool.chunks()).isEmpty();
        PooledBuffer b = pool.allocate(BUF); // its range is used again, registered anew
        assertThat(b.chunk().address()).isEqualTo(c.address());
        b.close();
        closeClean(pool);
    }

    @Test
    void aListenerThatAlwaysThrowsBlocksNeitherACloseNorAFree() throws Throwable {
        BufferPool pool = small("listener-always-throws").build();
        pool.addChunkListener(new ChunkListener() {
            @Override
            public void chunkAdded(Chunk chunk) {
            }

            @Override
            public void chunkRemoved(Chunk chunk) {
                throw new RdmaException(Errno.EIO, "deregistration failed");
            }
        });
        // The pool says so in its log, each time: kept here (and checked), not printed into the build's output.
        Logger log = Logger.getLogger("io.regmem.core.BufferPool");
        List<String> said = new CopyOnWriteArrayList<>();
        Handler keep = new Handler() {
            @Override
            public void publish(LogRecord r) {
                said.add(r.getLevel() + " " + r.getMessage());
            }

            @Override
            public void flush() {
            }

            @Override
            public void close() {
            }
        };
        boolean parents = log.getUseParentHandlers();
        log.addHandler(keep);
        log.setUseParentHandlers(false);
        try {
            PooledBuffer big = pool.allocate(4 * CHUNK); // a dedicated chunk
            Chunk bigChunk = big.chunk();
            big.segment().fill((byte) 1);
            big.close(); // completes; the chunk's memory is kept, not unmapped under the listener
            assertThat(Resident.pages(bigChunk.address(), Native.PAGE_SIZE)).isEqualTo(1);
            fill(pool, 1).forEach(PooledBuffer::close);
            closeClean(pool); // completes: the pool is closed, not left half open
            assertThat(pool.isClosed()).isTrue();
        } finally {
            log.setUseParentHandlers(parents);
            log.removeHandler(keep);
        }
        assertThat(said).isNotEmpty().allMatch(l -> l.startsWith("WARNING") && l.contains("failed to let go"));
    }

    @Test
    void staleViewsOfATrimmedChunkReadZerosAndNeverFault() {
        BufferPool pool = small("trim-stale").build();
        List<PooledBuffer> bufs = fill(pool, 2);
        MemorySegment checked = bufs.get(0).segment();
        UnsafeBuffer unchecked = bufs.get(17).asDirectBuffer();
        bufs.forEach(PooledBuffer::close);
        pool.trim();
        assertThat(checked.get(ValueLayout.JAVA_LONG, 0)).as("a segment kept past its free").isZero();
        assertThat(unchecked.getLong(0)).as("an Agrona view kept past its free").isZero();
        closeClean(pool);
        assertThat(unchecked.getLong(8)).as("the chunk with an unchecked view was retired, not unmapped").isZero();
    }

    @Test
    void badInputAndAClosedPoolAreRefusedAndChangeNothing() {
        BufferPool pool = small("trim-bad").build();
        fill(pool, 1).forEach(PooledBuffer::close);
        assertThatThrownBy(() -> pool.trim(-1)).isInstanceOf(RdmaException.class)
                .satisfies(e -> assertThat(((RdmaException) e).errno()).isEqualTo(Errno.EINVAL))
                .hasMessageContaining("trim-bad").hasMessageContaining("keepBytes");
        assertThat(pool.stats().reservedBytes()).isEqualTo(CHUNK);
        closeClean(pool);
        assertThatThrownBy(pool::trim).isInstanceOf(RdmaException.class)
                .satisfies(e -> assertThat(((RdmaException) e).errno()).isEqualTo(Errno.EBADF));
        assertThatThrownBy(() -> BufferPool.builder().decay(Duration.ofMillis(1), 0)).isInstanceOf(RdmaException.class)
                .hasMessageContaining("decay idle time");
        assertThatThrownBy(() -> BufferPool.builder().decay(Duration.ofSeconds(1), -1)).isInstanceOf(RdmaException.class)
                .hasMessageContaining("keepBytes");
    }

    @Test
    void trimsAndDecayRacingTheCloseEndRefusedAndLeaveNothing() throws Exception {
        for (int round = 0; round < 20; round++) {
            BufferPool pool = small("trim-close-" + round).decay(Duration.ofMillis(10), 0).build();
            List<PooledBuffer> bufs = fill(pool, 4);
            java.util.concurrent.atomic.AtomicReference<Throwable> odd = new java.util.concurrent.atomic.AtomicReference<>();
            Thread trimmer = Thread.ofPlatform().start(() -> {
                try {
                    while (true) {
                        pool.trim();
                    }
                } catch (RdmaException e) {
                    if (e.errno() != Errno.EBADF) {
                        odd.set(e);
                    }
                } catch (Throwable t) {
                    odd.set(t);
                }
            });
            bufs.forEach(PooledBuffer::close); // chunks go idle while the trimmer runs
            closeClean(pool);
            trimmer.join();
            assertThat(odd.get()).as("a trim racing the close fails only with EBADF").isNull();
            assertThat(pool.stats().reservedBytes()).as("everything went back").isZero();
        }
    }

    /**
     * Huge-page sources, pre-touched: a trim gives their pages back and the range comes back as huge
     * pages again. hugetlb runs only where huge pages are reserved ({@code /proc/sys/vm/nr_hugepages}).
     */
    @Test
    void hugePageSourcesGiveBackAndTakeBackToo() throws Throwable {
        List<ChunkSource> sources = new ArrayList<>(List.of(ChunkSource.mmapHugePages()));
        if (freeHugePages() >= 4) {
            sources.add(ChunkSource.hugetlb());
        }
        for (ChunkSource source : sources) {
            BufferPool pool = BufferPool.builder().name("trim-" + source.name()).chunkSource(source).chunkSize(2L << 20)
                    .preTouch(true).noDecay().build();
            long before = freeHugePages();
            PooledBuffer b = pool.allocate(BUF);
            Chunk c = b.chunk();
            b.segment().fill((byte) 7);
            b.close();
            assertThat(pool.trim()).isEqualTo(2L << 20);
            assertThat(Resident.pages(c.address(), c.size())).as("%s: decommitted", source).isZero();
            assertThat(freeHugePages()).as("%s: huge pages back in the pool", source).isEqualTo(before);
            PooledBuffer again = pool.allocate(BUF);
            assertThat(again.chunk().address()).isEqualTo(c.address());
            assertThat(Resident.pages(c.address(), c.size())).as("%s: touched again", source)
                    .isEqualTo(c.size() / Native.PAGE_SIZE);
            assertThat(again.segment().get(ValueLayout.JAVA_BYTE, 0)).isZero();
            again.close();
            closeClean(pool);
        }
    }

    /** HugePages_Free from /proc/meminfo (0 where none are reserved). */
    static long freeHugePages() throws java.io.IOException {
        for (String line : java.nio.file.Files.readAllLines(java.nio.file.Path.of("/proc/meminfo"))) {
            if (line.startsWith("HugePages_Free:")) {
                return Long.parseLong(line.replaceAll("[^0-9]", ""));
            }
        }
        return 0;
    }

    @Test
    void aSourceThatCannotDecommitKeepsItsChunks() {
        BufferPool pool = small("trim-arena").chunkSource(ChunkSource.arena()).build();
        fill(pool, 2).forEach(PooledBuffer::close);
        assertThat(pool.trim()).isZero();
        assertThat(pool.stats().reservedBytes()).isEqualTo(2 * CHUNK);
        closeClean(pool);
    }

    @Test
    void theDecayGivesBackChunksNobodyUsedAndKeepsItsFloor() throws Exception {
        BufferPool pool = small("decay").decay(Duration.ofMillis(20), CHUNK).build();
        List<PooledBuffer> bufs = fill(pool, 4);
        bufs.forEach(PooledBuffer::close);
        pool.releaseThreadCache();
        waitFor(() -> pool.stats().reservedBytes() == CHUNK, pool);
        assertThat(pool.stats().givenBackChunks()).isEqualTo(3);
        Thread.sleep(100); // several more rounds: the floor holds
        assertThat(pool.stats().reservedBytes()).isEqualTo(CHUNK);
        closeClean(pool);
    }

    @Test
    void theDecayGivesBackAPeakWhileTheClassKeepsAllocating() throws Exception {
        BufferPool pool = small("decay-busy").decay(Duration.ofMillis(20), 0).build();
        List<PooledBuffer> peak = fill(pool, 4);
        peak.forEach(PooledBuffer::close);
        pool.releaseThreadCache(); // else the last buffers freed, cached here, would keep the highest chunk
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        // a steady load of two buffers at a time: it lives in the lowest chunk; the rest goes back
        while (pool.stats().reservedBytes() > CHUNK && System.nanoTime() < deadline) {
            PooledBuffer a = pool.allocate(BUF);
            PooledBuffer b = pool.allocate(BUF);
            a.close();
            b.close();
            Thread.sleep(1);
        }
        assertThat(pool.stats().reservedBytes()).isEqualTo(CHUNK);
        closeClean(pool);
    }

    /** Waits (bounded) for the decay thread to reach a state; fails with the pool's stats if it does not. */
    static void waitFor(java.util.function.BooleanSupplier done, BufferPool pool) throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        while (!done.getAsBoolean()) {
            assertThat(System.nanoTime()).as("the decay did not get there: %s", pool.stats()).isLessThan(deadline);
            Thread.sleep(5);
        }
    }
}
