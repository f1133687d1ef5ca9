package io.regmem.core;

import static io.regmem.core.NoLeaks.closeClean;
import static io.regmem.core.OwnershipMarks.check;
import static io.regmem.core.OwnershipMarks.release;
import static io.regmem.core.OwnershipMarks.write;
import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.jctools.queues.MpscArrayQueue;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Threads allocate, mark, check and free buffers, half of them on another thread. Each buffer
 * gets an ownership mark (owner id and sequence) at its first and last 8 bytes; a mark that changed
 * while held, or an address that the claim map says is already owned, is a buffer handed out twice.
 */
@ExtendWith(NoLeaks.class)
class BufferPoolStressTest {
    private static final int THREADS = 4;
    private static final int OPS = 60_000;

    @ParameterizedTest
    @EnumSource(value = SafetyMode.class, names = {"FAST", "CHECKED"})
    void noBufferIsHandedOutTwice(SafetyMode mode) throws Exception {
        stress(mode, false);
    }

    /**
     * The same with every thread's id in one slot of the pool's magazine table: each allocate and
     * free finds another thread's magazine there and takes the slow path that publishes its own.
     */
    @ParameterizedTest
    @EnumSource(value = SafetyMode.class, names = {"FAST", "CHECKED"})
    void noBufferIsHandedOutTwiceWhenEveryThreadSharesOneTableSlot(SafetyMode mode) throws Exception {
        stress(mode, true);
    }

    private static void stress(SafetyMode mode, boolean oneSlot) throws Exception {
        BufferPool pool = BufferPool.builder().safetyMode(mode).chunkSize(1 << 20).slabSize(16 << 10)
                .threadCacheBytes(16 << 10).build();
        ConcurrentHashMap<Long, Long> claims = new ConcurrentHashMap<>();
        @SuppressWarnings({"unchecked", "rawtypes"})
        MpscArrayQueue<PooledBuffer>[] inboxes = new MpscArrayQueue[THREADS];
        for (int i = 0; i < THREADS; i++) {
            inboxes[i] = new MpscArrayQueue<>(1 << 16);
        }
        AtomicReference<Throwable> failure = new AtomicReference<>();
        CountDownLatch start = new CountDownLatch(THREADS);
        CountDownLatch done = new CountDownLatch(THREADS);
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < THREADS; t++) {
            int me = t;
            Runnable work = () -> {
                boolean counted = false;
                try {
                    SplittableRandom rnd = new SplittableRandom(me * 7919L);
                    List<PooledBuffer> held = new ArrayList<>();
                    List<Long> marks = new ArrayList<>();
                    start.countDown();
                    start.await();
                    for (int op = 0; op < OPS; op++) {
                        int choice = rnd.nextInt(10);
                        if (choice < 5 || held.isEmpty()) {
                            long size = rnd.nextInt(500) == 0 ? (1 << 20) + rnd.nextInt(1 << 20) // a dedicated chunk
                                    : rnd.nextInt(4) == 0 ? 1 + rnd.nextInt(70_000) : 16 + rnd.nextInt(2000);
                            PooledBuffer b = pool.allocate(size);
                            long mark = ((long) me << 48) | op;
                            Long previous = claims.putIfAbsent(b.address(), mark);
                            if (previous != null) {
                                throw new AssertionError("buffer at 0x" + Long.toHexString(b.address())
                                        + " handed out while owned by mark " + Long.toHexString(previous));
                            }
                            write(b, mark);
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
                                // cross-thread free: the mark travels with the buffer
                                write(b, mark);
                                inboxes[(me + 1) % THREADS].offer(b);
                            }
                        }
                        PooledBuffer in;
                        while ((in = inboxes[me].poll()) != null) {
                            release(claims, in, claims.get(in.address()));
                        }
                    }
                    for (int i = 0; i < held.size(); i++) {
                        check(held.get(i), marks.get(i));
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
                } finally {
                    if (!counted) {
                        done.countDown();
                    }
                }
            };
            Thread thread = new Thread(work, "stress-" + t);
            for (int tries = 0; oneSlot && !threads.isEmpty()
                    && ThreadCaches.index(0, thread.threadId()) != ThreadCaches.index(0, threads.getFirst().threadId()); tries++) {
                assertThat(tries).as("a thread id in the first thread's table slot").isLessThan(64 * ThreadCaches.SLOTS);
                thread = new Thread(work, "stress-" + t); // ids grow: about one in SLOTS lands in the slot
            }
            threads.add(thread);
        }
        threads.forEach(Thread::start);
        for (Thread t : threads) {
            t.join();
        }
        if (failure.get() != null) {
            pool.closeAndReport();
            throw new AssertionError(failure.get());
        }
        assertThat(claims).isEmpty();
        PoolStats s = pool.stats();
        assertThat(s.liveBuffers()).isZero();
        assertThat(s.allocations()).isEqualTo(s.frees()).isGreaterThan(THREADS * OPS / 3);
        closeClean(pool);
    }
}
