package io.regmem.core;

import static io.regmem.core.NoLeaks.closeClean;
import static io.regmem.core.OwnershipMarks.check;
import static io.regmem.core.OwnershipMarks.release;
import static io.regmem.core.OwnershipMarks.write;
import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.jctools.queues.MpscArrayQueue;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Trims racing everything else: worker threads allocate, mark, pin, check and free buffers of
 * several classes (a quarter of the frees on another thread), and every so often free all they hold
 * and give their caches back at once (a barrier whose action trims the then idle pool), so that
 * chunks do go idle; one thread trims in a loop and the decay runs every few milliseconds. Each buffer carries an ownership mark at its first and last 8 bytes:
 * a mark that changed while held (a chunk decommitted or reused under a live buffer) or an address
 * the claim map says is owned already (a slot bound twice) fails the test; so does a trim that
 * never gave anything back.
 */
@ExtendWith(NoLeaks.class)
class TrimStressTest {
    private static final int THREADS = 3;
    private static final int OPS = 40_000;

    @ParameterizedTest
    @EnumSource(value = SafetyMode.class, names = {"FAST", "CHECKED"})
    void trimsNeverTouchALiveBufferNorHandOneOutTwice(SafetyMode mode) throws Exception {
        BufferPool pool = BufferPool.builder().name("trim-stress-" + mode).safetyMode(mode).chunkSize(256 << 10).largestClass(16 << 10)
                .slabSize(16 << 10).threadCacheBytes(8 << 10).decay(Duration.ofMillis(10), 0).build();
        ConcurrentHashMap<Long, Long> claims = new ConcurrentHashMap<>();
        @SuppressWarnings({"unchecked", "rawtypes"})
        MpscArrayQueue<PooledBuffer>[] inboxes = new MpscArrayQueue[THREADS];
        for (int i = 0; i < THREADS; i++) {
            inboxes[i] = new MpscArrayQueue<>(1 << 16);
        }
        AtomicReference<Throwable> failure = new AtomicReference<>();
        AtomicBoolean working = new AtomicBoolean(true);
        long[] quietTrims = new long[1];
        CyclicBarrier quiet = new CyclicBarrier(THREADS, () -> quietTrims[0] += pool.trim());
        CountDownLatch done = new CountDownLatch(THREADS);
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < THREADS; t++) {
            int me = t;
            threads.add(new Thread(() -> {
                boolean counted = false;
                try {
                    SplittableRandom rnd = new SplittableRandom(me * 104729L);
                    List<PooledBuffer> held = new ArrayList<>();
                    List<Long> marks = new ArrayList<>();
                    for (int op = 0; op < OPS; op++) {
                        if (op % 1500 == 1499) { // all go, on every worker at once: every chunk goes idle
                            for (int i = 0; i < held.size(); i++) {
                                release(claims, held.get(i), marks.get(i));
                            }
                            held.clear();
                            marks.clear();
                            quiet.await(1, TimeUnit.MINUTES); // nobody sends from here to the next await
                            for (PooledBuffer in; (in = inboxes[me].poll()) != null; ) {
                                release(claims, in, claims.get(in.address()));
                            }
                            pool.releaseThreadCache();
                            quiet.await(1, TimeUnit.MINUTES); // the barrier's action trims an idle pool
                        }
                        int choice = rnd.nextInt(10);
                        if (choice < 5 || held.isEmpty()) {
                            long size = switch (rnd.nextInt(4)) {
                                case 0 -> 64;
                                case 1 -> 700;
                                case 2 -> 4096;
                                default -> 16 + rnd.nextInt(16_000);
                            };
                            PooledBuffer b = pool.allocate(size);
                            long mark = ((long) me << 48) | op;
                            Long previous = claims.putIfAbsent(b.address(), mark);
                            if (previous != null) {
                                throw new AssertionError("buffer at 0x" + Long.toHexString(b.address())
                                        + " handed out while owned by mark " + Long.toHexString(previous));
                            }
                            write(b, mark);
                            if (rnd.nextInt(8) == 0) { // an I/O in flight: the free is refused, the chunk stays
                                b.pin();
                                try {
                                    b.close();
                                    throw new AssertionError("a pinned buffer was freed");
                                } catch (RdmaException busy) {
                                    assertThat(busy.errno()).isEqualTo(Errno.EBUSY);
                                }
                                b.unpin();
                            }
                            held.add(b);
                            marks.add(mark);
                        } else {
                            int i = rnd.nextInt(held.size());
                            PooledBuffer b = held.remove(i);
                            long mark = marks.remove(i);
                            check(b, mark);
                            if (choice < 8) {
                                release(claims, b, mark);
                            } else {
                                inboxes[(me + 1) % THREADS].offer(b); // freed there
                            }
                        }
                        PooledBuffer in;
                        while ((in = inboxes[me].poll()) != null) {
                            release(claims, in, claims.get(in.address()));
                        }
                    }
                    for (int i = 0; i < held.size(); i++) {
                        release(claims, held.get(i), marks.get(i));
                    }
                    done.countDown();
                    counted = true;
                    if (!done.await(2, TimeUnit.MINUTES)) {
                        throw new AssertionError("other stress threads did not finish");
                    }
                    PooledBuffer in;
                    while ((in = inboxes[me].poll()) != null) {
                        release(claims, in, claims.get(in.address()));
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                    quiet.reset(); // the others stop waiting for this one
                } finally {
                    if (!counted) {
                        done.countDown();
                    }
                }
            }, "trim-stress-" + t));
        }
        long[] trimmed = new long[1];
        Thread trimmer = new Thread(() -> {
            try {
                while (working.get()) {
                    trimmed[0] += pool.trim();
                    Thread.yield();
                }
            } catch (Throwable e) {
                failure.compareAndSet(null, e);
            }
        }, "trimmer");
        trimmer.start();
        threads.forEach(Thread::start);
        for (Thread t : threads) {
            t.join();
        }
        working.set(false);
        trimmer.join();
        try {
            if (failure.get() != null) {
                throw new AssertionError(failure.get());
            }
            assertThat(claims).isEmpty();
            assertThat(pool.stats().givenBackChunks()).as("chunks given back (racing trims %d bytes, quiet points %d)",
                    trimmed[0], quietTrims[0]).isPositive();
            assertThat(pool.stats().liveBuffers()).isZero();
            pool.trim(); // the workers are gone: their caches are reclaimed, every chunk is idle
            assertThat(pool.stats().reservedBytes()).isZero();
        } finally {
            closeClean(pool);
        }
    }
}
