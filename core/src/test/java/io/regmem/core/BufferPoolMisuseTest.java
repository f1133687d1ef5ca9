package io.regmem.core;

import static io.regmem.core.NoLeaks.closeClean;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.assertj.core.api.ThrowableAssert.ThrowingCallable;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Every bad input gets a clear RdmaException, changes nothing and leaks nothing. */
@ExtendWith(NoLeaks.class)
class BufferPoolMisuseTest {

    private static void assertRdma(ThrowingCallable call, Errno errno, String... messageParts) {
        assertThatThrownBy(call)
                .isInstanceOf(RdmaException.class)
                .satisfies(e -> assertThat(((RdmaException) e).errno()).isEqualTo(errno))
                .message().contains(messageParts);
    }

    @ParameterizedTest
    @ValueSource(longs = {0, -1, Long.MIN_VALUE, (1L << 30) + 1, Long.MAX_VALUE})
    void sizeOutOfRangeIsEinvalAndChangesNothing(long size) {
        BufferPool pool = BufferPool.builder().name("sizes").build();
        PoolStats before = pool.stats();
        assertRdma(() -> pool.allocate(size), Errno.EINVAL, "sizes", "size " + size, "maxBufferSize");
        assertThat(pool.stats()).isEqualTo(before);
        closeClean(pool);
    }

    @Test
    void badBuilderSettingsAreEinvalNamingTheSetting() {
        assertRdma(() -> BufferPool.builder().alignment(48).build(), Errno.EINVAL, "alignment 48", "power of two");
        assertRdma(() -> BufferPool.builder().alignment(4).build(), Errno.EINVAL, "alignment 4");
        assertRdma(() -> BufferPool.builder().alignment(1 << 20).build(), Errno.EINVAL, "alignment 1048576");
        assertRdma(() -> BufferPool.builder().chunkSize(5000).build(), Errno.EINVAL, "chunkSize 5000");
        assertRdma(() -> BufferPool.builder().largestClass(3000).build(), Errno.EINVAL, "largestClass 3000");
        assertRdma(() -> BufferPool.builder().largestClass(8L << 20).build(), Errno.EINVAL, "largestClass");
        assertRdma(() -> BufferPool.builder().maxBytes(4096).build(), Errno.EINVAL, "maxBytes 4096");
        assertRdma(() -> BufferPool.builder().slabSize(0).build(), Errno.EINVAL, "slabSize 0");
        assertRdma(() -> BufferPool.builder().threadCacheBytes(-1).build(), Errno.EINVAL, "threadCacheBytes");
        assertRdma(() -> BufferPool.builder().maxBufferSize(0).build(), Errno.EINVAL, "maxBufferSize 0");
        assertThat(BufferPool.openPools()).isEmpty();
    }

    /**
     * A pinned buffer (an I/O engine still uses its memory) cannot be freed in any mode, small or
     * above the largest class: EBUSY, nothing changes, its memory is not handed out again; once
     * unpinned it frees normally.
     */
    @ParameterizedTest
    @org.junit.jupiter.params.provider.EnumSource(SafetyMode.class)
    void aPinnedBufferCannotBeFreedInAnyModeAndIsNotHandedOutAgain(SafetyMode mode) {
        BufferPool pool = BufferPool.builder().name("pinned").safetyMode(mode).build();
        for (long size : new long[] {4096, 8L << 20}) {
            PooledBuffer b = pool.allocate(size);
            int generation = b.generation();
            b.pin();
            PoolStats before = pool.stats();
            assertRdma(b::close, Errno.EBUSY, "pinned", "1 I/O operation(s) still use its memory");
            assertRdma(() -> pool.free(b), Errno.EBUSY, "pinned");
            assertThat(pool.stats()).as("a refused free changes nothing").isEqualTo(before);
            assertThat(b.generation()).isEqualTo(generation);
            b.checkGeneration(generation);
            List<PooledBuffer> others = new ArrayList<>();
            for (int i = 0; i < 64; i++) {
                PooledBuffer o = pool.allocate(size);
                assertThat(o.address()).as("the pinned buffer's memory is not handed out").isNotEqualTo(b.address());
                others.add(o);
                if (size > 4096) {
                    break;
                }
            }
            others.forEach(PooledBuffer::close);
            b.unpin();
            b.close();
        }
        closeClean(pool);
    }

    @Test
    void pinAndUnpinRefuseWhatTheyCannotDo() {
        BufferPool pool = BufferPool.builder().name("pins").build();
        PooledBuffer b = pool.allocate(64);
        assertRdma(b::unpin, Errno.EINVAL, "not pinned");
        b.pin();
        b.pin();
        assertThat(b.pins()).isEqualTo(2);
        assertThat(b.toString()).contains("pinned");
        b.unpin();
        b.unpin();
        assertThat(b.pins()).isZero();
        b.close();
        assertRdma(b::pin, Errno.EBADF, "pin of a freed");
        assertThat(b.pins()).isZero();
        closeClean(pool);
    }

    @Test
    void doubleFreeIsDetectedAndThePoolIsUnharmed() {
        BufferPool pool = BufferPool.builder().name("df").build();
        PooledBuffer a = pool.allocate(64);
        a.close();
        PoolStats before = pool.stats();
        assertRdma(a::close, Errno.EINVAL, "df", "double free");
        assertThat(pool.stats()).isEqualTo(before);
        // The buffer went back once: two allocations get two different slots.
        PooledBuffer x = pool.allocate(64);
        PooledBuffer y = pool.allocate(64);
        assertThat(x.address()).isNotEqualTo(y.address());
        x.close();
        y.close();
        closeClean(pool);
    }

    @Test
    void doubleFreeOfALargeBufferIsDetectedEvenInFastMode() {
        BufferPool pool = BufferPool.builder().safetyMode(SafetyMode.FAST).build();
        PooledBuffer big = pool.allocate(3L << 20);
        big.close();
        assertRdma(big::close, Errno.EINVAL, "double free");
        assertThat(pool.stats().reservedBytes()).isZero();
        closeClean(pool);
    }

    @Test
    void freeOfAForeignBufferIsEinval() {
        BufferPool mine = BufferPool.builder().name("mine").build();
        BufferPool theirs = BufferPool.builder().name("theirs").build();
        PooledBuffer b = theirs.allocate(64);
        assertRdma(() -> mine.free(b), Errno.EINVAL, "mine", "belongs to pool theirs");
        assertThat(b.segment().byteSize()).isEqualTo(64); // still live
        b.close();
        closeClean(mine);
        closeClean(theirs);
    }

    @Test
    void staleHandleIsCaughtByItsGeneration() {
        BufferPool pool = BufferPool.builder().build();
        PooledBuffer b = pool.allocate(64);
        int oldGeneration = b.generation();
        b.close();
        PooledBuffer reused = pool.allocate(64);
        assertThat(reused).isSameAs(b);
        assertRdma(() -> b.checkGeneration(oldGeneration), Errno.EBADF, "stale", "generation " + oldGeneration,
                "now belongs to generation " + reused.generation());
        assertRdma(() -> b.close(oldGeneration), Errno.EBADF, "stale");
        assertThat(reused.segment().byteSize()).isEqualTo(64); // the new owner is unharmed
        reused.close(reused.generation());
        closeClean(pool);
    }

    @Test
    void useAfterFreeIsCaught() {
        BufferPool pool = BufferPool.builder().build();
        PooledBuffer b = pool.allocate(64);
        b.close();
        assertRdma(b::segment, Errno.EBADF, "used after free");
        assertRdma(b::address, Errno.EBADF, "used after free");
        assertRdma(b::asByteBuffer, Errno.EBADF, "used after free");
        assertRdma(b::asDirectBuffer, Errno.EBADF, "used after free");
        closeClean(pool);
    }

    @Test
    void closeWithBuffersOutWarnsOnceNamingThePool() {
        Logger logger = Logger.getLogger(BufferPool.class.getName());
        List<LogRecord> records = new ArrayList<>();
        Handler capture = new Handler() {
            @Override
            public void publish(LogRecord r) {
                records.add(r);
            }

            @Override
            public void flush() {
            }

            @Override
            public void close() {
            }
        };
        boolean parents = logger.getUseParentHandlers();
        logger.addHandler(capture);
        logger.setUseParentHandlers(false); // captured and asserted here, not printed
        try {
            BufferPool pool = BufferPool.builder().name("leaky").build();
            pool.allocate(64);
            pool.close();
            pool.close(); // already closed: nothing more to say
            assertThat(records).singleElement().satisfies(r -> {
                assertThat(r.getLevel()).isEqualTo(Level.WARNING);
                assertThat(r.getMessage()).contains("leaky", "1 buffer(s), 64 bytes still allocated at close");
            });
        } finally {
            logger.removeHandler(capture);
            logger.setUseParentHandlers(parents);
        }
    }

    @Test
    void useAfterThePoolClosedIsCaught() {
        BufferPool pool = BufferPool.builder().name("gone").build();
        PooledBuffer b = pool.allocate(64);
        var segment = b.segment();
        var bb = b.asByteBuffer();
        LeakReport report = pool.closeAndReport();
        assertThat(report.buffers()).isEqualTo(1);
        assertRdma(() -> pool.allocate(64), Errno.EBADF, "gone", "allocate after the pool was closed");
        assertRdma(b::close, Errno.EBADF, "gone", "free after the pool was closed");
        assertThatThrownBy(() -> segment.get(ValueLayout.JAVA_BYTE, 0)).isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> bb.put(0, (byte) 1)).isInstanceOf(IllegalStateException.class);
        pool.close(); // idempotent
    }

    @Test
    void maxBytesIsEnforcedWithAClearReportAndNothingLeaks() {
        long chunk = 1L << 20;
        BufferPool pool = BufferPool.builder().name("small").chunkSize(chunk).largestClass(chunk)
                .slabSize(chunk).maxBytes(2 * chunk).build();
        List<PooledBuffer> held = new ArrayList<>();
        held.add(pool.allocate(chunk));
        held.add(pool.allocate(chunk));
        PoolStats before = pool.stats();
        assertThatThrownBy(() -> pool.allocate(chunk))
                .isInstanceOfSatisfying(PoolExhaustedException.class, e -> {
                    assertThat(e.errno()).isEqualTo(Errno.ENOMEM);
                    assertThat(e.limit()).isEqualTo(2 * chunk);
                    assertThat(e.reserved()).isEqualTo(2 * chunk);
                    assertThat(e.requested()).isEqualTo(chunk);
                    assertThat(e.getMessage()).contains("small", "maxBytes limit 2097152",
                            "2097152 bytes reserved", "(2097152 in live buffers)");
                })
                .isInstanceOf(RdmaException.class);
        assertThatThrownBy(() -> pool.allocate(5L << 20)).isInstanceOf(PoolExhaustedException.class);
        PoolStats after = pool.stats();
        assertThat(after.exhausted()).as("the refusals are counted").isEqualTo(before.exhausted() + 2);
        assertThat(after).as("and nothing else changed").usingRecursiveComparison().ignoringFields("exhausted")
                .isEqualTo(before);
        held.removeFirst().close();
        PooledBuffer again = pool.allocate(chunk); // the freed one is reused
        again.close();
        held.forEach(PooledBuffer::close);
        closeClean(pool);
    }

    @Test
    void concurrentDoubleFreeHasExactlyOneWinner() throws Exception {
        BufferPool pool = BufferPool.builder().build();
        for (int round = 0; round < 200; round++) {
            PooledBuffer b = pool.allocate(64);
            int[] failures = new int[2];
            java.util.concurrent.CyclicBarrier barrier = new java.util.concurrent.CyclicBarrier(2);
            Thread[] ts = new Thread[2];
            for (int i = 0; i < 2; i++) {
                int me = i;
                ts[i] = new Thread(() -> {
                    try {
                        barrier.await();
                        b.close();
                    } catch (RdmaException e) {
                        failures[me]++;
                    } catch (Exception e) {
                        throw new AssertionError(e);
                    }
                });
                ts[i].start();
            }
            for (Thread t : ts) {
                t.join();
            }
            assertThat(failures[0] + failures[1]).as("round %d", round).isEqualTo(1);
        }
        assertThat(pool.stats().liveBuffers()).isZero();
        Set<Long> seen = new HashSet<>();
        List<PooledBuffer> all = new ArrayList<>();
        for (int i = 0; i < 300; i++) {
            PooledBuffer b = pool.allocate(64);
            assertThat(seen.add(b.address())).as("handed out twice").isTrue();
            all.add(b);
        }
        all.forEach(PooledBuffer::close);
        closeClean(pool);
    }
}
