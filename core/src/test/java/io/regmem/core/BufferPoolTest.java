package io.regmem.core;

import static io.regmem.core.NoLeaks.closeClean;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

@ExtendWith(NoLeaks.class)
class BufferPoolTest {

    @Test
    void allocatesEverySizeFromOneByteToBeyondTheLargestClass() {
        BufferPool pool = BufferPool.builder().name("sizes").build();
        List<PooledBuffer> live = new ArrayList<>();
        long[] sizes = {1, 63, 64, 65, 100, 4096, 4097, 65536, 1 << 20, (1 << 20) + 1, 3 << 20};
        for (long size : sizes) {
            PooledBuffer b = pool.allocate(size);
            assertThat(b.length()).isEqualTo(size);
            assertThat(b.capacity()).isGreaterThanOrEqualTo(size).isEqualTo(pool.classSizeFor(size));
            assertThat(b.address() % 64).as("64-byte alignment of %s", b).isZero();
            assertThat(b.segment().byteSize()).isEqualTo(b.capacity());
            // every byte of the capacity is writable and reads back
            b.segment().fill((byte) size);
            assertThat(b.segment().get(ValueLayout.JAVA_BYTE, b.capacity() - 1)).isEqualTo((byte) size);
            live.add(b);
        }
        assertThat(pool.stats().liveBuffers()).isEqualTo(sizes.length);
        assertThat(pool.stats().largeBuffers()).isEqualTo(2);
        live.forEach(PooledBuffer::close);
        assertThat(pool.stats().liveBuffers()).isZero();
        assertThat(pool.stats().inUseBytes()).isZero();
        closeClean(pool);
    }

    @Test
    void freedBufferIsReusedWithoutNewHandleAndWithNewGeneration() {
        BufferPool pool = BufferPool.builder().build();
        PooledBuffer a = pool.allocate(4096);
        int gen = a.generation();
        long address = a.address();
        a.close();
        PooledBuffer b = pool.allocate(4000);
        assertThat(b).isSameAs(a);
        assertThat(b.address()).isEqualTo(address);
        assertThat(b.generation()).isEqualTo(gen + 1);
        assertThat(b.length()).isEqualTo(4000);
        b.close();
        closeClean(pool);
    }

    @Test
    void liveBuffersNeverOverlapAndLieInTheirChunk() {
        BufferPool pool = BufferPool.builder().chunkSize(1 << 20).largestClass(64 << 10).slabSize(32 << 10).build();
        List<PooledBuffer> live = new ArrayList<>();
        for (int i = 0; i < 2000; i++) {
            live.add(pool.allocate(1 + (i * 37L) % 9000));
        }
        live.sort((x, y) -> Long.compare(x.address(), y.address()));
        for (int i = 0; i < live.size(); i++) {
            PooledBuffer b = live.get(i);
            assertThat(b.address()).isGreaterThanOrEqualTo(b.chunk().address());
            assertThat(b.address() + b.capacity()).isLessThanOrEqualTo(b.chunk().address() + b.chunk().size());
            if (i > 0) {
                PooledBuffer prev = live.get(i - 1);
                assertThat(prev.address() + prev.capacity()).as("%s overlaps %s", prev, b).isLessThanOrEqualTo(b.address());
            }
        }
        assertThat(pool.chunks()).hasSizeGreaterThan(1);
        live.forEach(PooledBuffer::close);
        closeClean(pool);
    }

    @Test
    void statsAddUp() {
        BufferPool pool = BufferPool.builder().name("stats").build();
        PooledBuffer a = pool.allocate(64);
        PooledBuffer b = pool.allocate(64);
        PooledBuffer c = pool.allocate(5000);
        PoolStats s = pool.stats();
        assertThat(s.pool()).isEqualTo("stats");
        assertThat(s.liveBuffers()).isEqualTo(3);
        assertThat(s.inUseBytes()).isEqualTo(64 + 64 + pool.classSizeFor(5000));
        assertThat(s.allocations()).isEqualTo(3);
        assertThat(s.frees()).isZero();
        assertThat(s.chunks()).isEqualTo(1);
        assertThat(s.reservedBytes()).isEqualTo(pool.chunkSize());
        assertThat(s.classes()).extracting(PoolStats.ClassStats::size).containsExactly(64L, pool.classSizeFor(5000));
        assertThat(s.classes().get(0).live()).isEqualTo(2);
        a.close();
        b.close();
        PooledBuffer d = pool.allocate(64); // a cache hit
        s = pool.stats();
        assertThat(s.allocations()).isEqualTo(4);
        assertThat(s.frees()).isEqualTo(2);
        assertThat(s.cacheMisses()).isEqualTo(2); // the first 64 B and the first 5000 B carved slabs
        assertThat(s.cacheHitRate()).isEqualTo(0.5);
        c.close();
        d.close();
        closeClean(pool);
        assertThat(pool.stats().reservedBytes()).isZero();
    }

    @Test
    void pageAlignedPoolGivesPageAlignedBuffers() {
        BufferPool pool = BufferPool.builder().pageAligned().build();
        long page = ChunkSource.mmap().pageSize();
        PooledBuffer small = pool.allocate(1);
        PooledBuffer mid = pool.allocate(page + 1);
        assertThat(small.address() % page).isZero();
        assertThat(small.capacity()).isEqualTo(page);
        assertThat(mid.address() % page).isZero();
        small.close();
        mid.close();
        closeClean(pool);
    }

    @Test
    void viewsShareTheSameBytesWithoutCopying() {
        BufferPool pool = BufferPool.builder().build();
        PooledBuffer b = pool.allocate(256);
        b.segment().set(ValueLayout.JAVA_LONG_UNALIGNED, 8, 0x1122334455667788L);

        ByteBuffer bb = b.asByteBuffer();
        assertThat(bb.isDirect()).isTrue();
        assertThat(bb.capacity()).isEqualTo((int) b.capacity());
        assertThat(bb.order(java.nio.ByteOrder.nativeOrder()).getLong(8)).isEqualTo(0x1122334455667788L);
        assertThat(b.asByteBuffer()).isSameAs(bb);

        UnsafeBuffer ub = b.asDirectBuffer();
        assertThat(ub.addressOffset()).isEqualTo(b.address());
        assertThat(ub.getLong(8)).isEqualTo(0x1122334455667788L);
        ub.putInt(0, 42);
        assertThat(b.segment().get(ValueLayout.JAVA_INT_UNALIGNED, 0)).isEqualTo(42);
        assertThat(b.asDirectBuffer()).isSameAs(ub);

        net.openhft.chronicle.bytes.BytesStore<?, ?> store = b.asBytesStore();
        assertThat(store.addressForRead(0)).isEqualTo(b.address());
        assertThat(store.readLong(8)).isEqualTo(0x1122334455667788L);
        store.writeInt(16, 7);
        assertThat(b.segment().get(ValueLayout.JAVA_INT_UNALIGNED, 16)).isEqualTo(7);
        assertThat(b.chunk().hasUncheckedViews()).isTrue();

        b.close();
        closeClean(pool);
    }

    @Test
    void uncheckedAddressMarksTheChunkAndAddressDoesNot() {
        BufferPool pool = BufferPool.builder().build();
        PooledBuffer b = pool.allocate(64);
        assertThat(b.address()).isPositive();
        assertThat(b.chunk().hasUncheckedViews()).isFalse();
        assertThat(b.uncheckedAddress()).isEqualTo(b.address());
        assertThat(b.chunk().hasUncheckedViews()).isTrue();
        b.close();
        assertThatThrownBy(b::uncheckedAddress).isInstanceOf(RdmaException.class)
                .extracting(e -> ((RdmaException) e).errno()).isEqualTo(Errno.EBADF);
        closeClean(pool);
    }

    @Test
    void anAttachmentStaysWithTheHandleAcrossAllocations() {
        BufferPool pool = BufferPool.builder().build();
        PooledBuffer b = pool.allocate(64);
        assertThat(b.attachment()).isNull();
        Object wrapper = new Object();
        b.attachment(wrapper);
        b.close();
        assertThatThrownBy(b::attachment).isInstanceOf(RdmaException.class);
        PooledBuffer again = pool.allocate(64);
        assertThat(again).isSameAs(b); // the thread's cache hands the handle back
        assertThat(again.attachment()).isSameAs(wrapper);
        again.attachment(null);
        assertThat(again.attachment()).isNull();
        again.close();
        closeClean(pool);
    }

    @Test
    void byteBufferIsResetForEachNewOwner() {
        BufferPool pool = BufferPool.builder().build();
        PooledBuffer b = pool.allocate(128);
        ByteBuffer bb = b.asByteBuffer();
        bb.position(10).limit(20);
        b.close();
        PooledBuffer again = pool.allocate(128);
        assertThat(again).isSameAs(b);
        assertThat(again.asByteBuffer().position()).isZero();
        assertThat(again.asByteBuffer().limit()).isEqualTo((int) again.capacity());
        again.close();
        closeClean(pool);
    }

    @Test
    void uncheckedViewKeptPastCloseReadsZerosInsteadOfCrashing() {
        BufferPool pool = BufferPool.builder().build();
        PooledBuffer b = pool.allocate(64);
        UnsafeBuffer stale = b.asDirectBuffer();
        stale.putLong(0, -1L);
        MemorySegment segment = b.segment();
        b.close();
        closeClean(pool);
        // The checked view refuses; the unchecked one reads the retired (fresh, zero) mapping.
        assertThatThrownBy(() -> segment.get(ValueLayout.JAVA_LONG, 0)).isInstanceOf(IllegalStateException.class);
        assertThat(stale.getLong(0)).isZero();
    }

    @Test
    void largeBufferIsUnmappedWhenFreedAndItsViewsDie() {
        BufferPool pool = BufferPool.builder().build();
        PooledBuffer big = pool.allocate(5L << 20);
        MemorySegment seg = big.segment();
        ByteBuffer bb = big.asByteBuffer();
        seg.set(ValueLayout.JAVA_BYTE, (5L << 20) - 1, (byte) 9);
        long reservedBefore = pool.stats().reservedBytes();
        big.close();
        assertThat(pool.stats().reservedBytes()).isEqualTo(reservedBefore - big.capacity());
        assertThatThrownBy(() -> seg.get(ValueLayout.JAVA_BYTE, 0)).isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> bb.get(0)).isInstanceOf(IllegalStateException.class);
        closeClean(pool);
    }

    @Test
    void deadThreadsCachesAreReclaimed() throws Exception {
        BufferPool pool = BufferPool.builder().slabSize(4096).build();
        Thread t = new Thread(() -> {
            List<PooledBuffer> held = new ArrayList<>();
            for (int i = 0; i < 64; i++) {
                held.add(pool.allocate(1024));
            }
            held.forEach(PooledBuffer::close); // all land in this thread's cache
        });
        t.start();
        t.join();
        long slots = pool.stats().classes().getFirst().slots();
        Set<Long> seen = new HashSet<>();
        List<PooledBuffer> mine = new ArrayList<>();
        for (int i = 0; i < 64; i++) {
            PooledBuffer b = pool.allocate(1024);
            mine.add(b);
            seen.add(b.address());
        }
        assertThat(seen).hasSize(64);
        assertThat(pool.stats().classes().getFirst().slots()).as("no new slab carved").isEqualTo(slots);
        mine.forEach(PooledBuffer::close);
        PoolStats s = pool.stats();
        assertThat(s.allocations()).isEqualTo(128);
        assertThat(s.frees()).isEqualTo(128);
        closeClean(pool);
    }

    @Test
    void crossThreadFreeGoesBackAndAddsUp() throws Exception {
        BufferPool pool = BufferPool.builder().build();
        List<PooledBuffer> made = new ArrayList<>();
        for (int i = 0; i < 1000; i++) {
            made.add(pool.allocate(512));
        }
        Thread t = new Thread(() -> made.forEach(PooledBuffer::close));
        t.start();
        t.join();
        assertThat(pool.stats().liveBuffers()).isZero();
        closeClean(pool);
    }

    @Test
    void releaseThreadCacheHandsCachedBuffersToOtherThreads() throws Exception {
        BufferPool pool = BufferPool.builder().slabSize(64 << 10).build();
        List<PooledBuffer> made = new ArrayList<>();
        for (int i = 0; i < 64; i++) {
            made.add(pool.allocate(1024));
        }
        made.forEach(PooledBuffer::close); // all in this (live) thread's cache
        pool.releaseThreadCache();
        long slots = pool.stats().classes().getFirst().slots();
        Thread other = new Thread(() -> {
            List<PooledBuffer> got = new ArrayList<>();
            for (int i = 0; i < 64; i++) {
                got.add(pool.allocate(1024));
            }
            got.forEach(PooledBuffer::close);
        });
        other.start();
        other.join();
        assertThat(pool.stats().classes().getFirst().slots()).as("served from released buffers").isEqualTo(slots);
        closeClean(pool);
    }

    @Test
    void virtualThreadsBypassCachesAndStillCount() throws Exception {
        BufferPool pool = BufferPool.builder().build();
        Thread vt = Thread.ofVirtual().start(() -> {
            PooledBuffer b = pool.allocate(100);
            b.segment().fill((byte) 1);
            b.close();
        });
        vt.join();
        PoolStats s = pool.stats();
        assertThat(s.allocations()).isEqualTo(1);
        assertThat(s.frees()).isEqualTo(1);
        closeClean(pool);
    }

    @Test
    void disabledThreadCacheStillWorks() {
        BufferPool pool = BufferPool.builder().threadCacheBytes(0).build();
        PooledBuffer first = pool.allocate(64);
        first.close();
        long slots = pool.stats().classes().getFirst().slots();
        for (int i = 0; i < 10_000; i++) {
            pool.allocate(64).close(); // straight to and from the shared free list
        }
        PoolStats s = pool.stats();
        assertThat(s.classes().getFirst().slots()).as("freed buffers are reused, no new slab").isEqualTo(slots);
        assertThat(s.allocations()).isEqualTo(10_001);
        assertThat(s.frees()).isEqualTo(10_001);
        assertThat(s.cacheHitRate()).isEqualTo(1.0 - 1.0 / 10_001);
        closeClean(pool);
    }

    @Test
    void otherChunkSourcesWork() {
        for (ChunkSource source : List.of(ChunkSource.arena(), ChunkSource.mmapHugePages())) {
            BufferPool pool = BufferPool.builder().chunkSource(source).build();
            PooledBuffer b = pool.allocate(1000);
            b.segment().fill((byte) 3);
            PooledBuffer big = pool.allocate(2L << 20);
            big.segment().fill((byte) 4);
            assertThat(b.chunk().source()).isSameAs(source);
            b.close();
            big.close();
            closeClean(pool);
        }
    }

    @Test
    void hugetlbWorksOrFailsClearly() {
        BufferPool pool = BufferPool.builder().chunkSource(ChunkSource.hugetlb()).chunkSize(2L << 20).build();
        try {
            PooledBuffer b = pool.allocate(64);
            assertThat(b.chunk().address() % (2L << 20)).isZero();
            b.close();
        } catch (RdmaException e) {
            // No huge pages reserved on this machine: a clear ENOMEM, nothing reserved.
            assertThat(e.errno()).isEqualTo(Errno.ENOMEM);
            assertThat(e.getMessage()).contains("hugetlb").contains("mmap");
            assertThat(pool.stats().reservedBytes()).isZero();
        }
        closeClean(pool);
    }

    @Test
    void paranoidModePoisonsFreedMemoryAndReportsLeakSites() {
        BufferPool pool = BufferPool.builder().safetyMode(SafetyMode.PARANOID).name("paranoid").build();
        PooledBuffer b = pool.allocate(64);
        b.segment().fill((byte) 0);
        MemorySegment raw = MemorySegment.ofAddress(b.address()).reinterpret(64);
        b.close();
        for (int i = 0; i < 64; i++) {
            assertThat(raw.get(ValueLayout.JAVA_BYTE, i)).isEqualTo(BufferPool.POISON);
        }
        PooledBuffer leaked = pool.allocate(300);
        LeakReport report = pool.closeAndReport();
        assertThat(report.buffers()).isEqualTo(1);
        assertThat(report.bytes()).isEqualTo(leaked.capacity());
        assertThat(report.leaks()).hasSize(1);
        assertThat(report.leaks().getFirst().site()).isNotNull();
        assertThat(report.describe()).contains("paranoid").contains("paranoidModePoisonsFreedMemoryAndReportsLeakSites");
        assertThat(pool.closeAndReport()).isSameAs(report);
    }

    @Test
    void closeReportsExactlyTheBuffersStillOut() {
        BufferPool pool = BufferPool.builder().build();
        PooledBuffer a = pool.allocate(64);
        PooledBuffer b = pool.allocate(2L << 20);
        pool.allocate(64).close();
        LeakReport report = pool.closeAndReport();
        assertThat(report.buffers()).isEqualTo(2);
        assertThat(report.bytes()).isEqualTo(a.capacity() + b.capacity());
        assertThat(report.leaks()).extracting(LeakReport.Leak::site).containsOnlyNulls();
        assertThat(pool.isClosed()).isTrue();
        assertThat(BufferPool.openPools()).doesNotContain(pool.name());
    }
}
