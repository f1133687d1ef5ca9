package io.regmem.core;

import static io.regmem.core.NoLeaks.closeClean;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.lang.foreign.ValueLayout;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BrokenBarrierException;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The per-thread magazines and the table the fast path reads them from: a closed pool refuses every
 * thread however full its magazine, threads that share a table slot stay correct, and a free is
 * atomic against a pin on another thread.
 */
@ExtendWith(NoLeaks.class)
class ThreadCacheTest {

    private static void assertEbadf(Runnable call, String op) {
        assertThatThrownBy(call::run)
                .isInstanceOfSatisfying(RdmaException.class, e -> assertThat(e.errno()).isEqualTo(Errno.EBADF))
                .hasMessageContaining(op + " after the pool was closed");
    }

    /**
     * A thread whose magazines hold free buffers (and are in the table) is refused once the pool has
     * closed, though the fast path reads no flag: the close emptied the table. Its refused free
     * changes nothing.
     */
    @ParameterizedTest
    @EnumSource(SafetyMode.class)
    void aClosedPoolRefusesAThreadWhoseMagazineHoldsBuffers(SafetyMode mode) throws Exception {
        BufferPool pool = BufferPool.builder().name("closing").safetyMode(mode).build();
        CountDownLatch warm = new CountDownLatch(1);
        CountDownLatch closed = new CountDownLatch(1);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        Thread worker = new Thread(() -> {
            try {
                List<PooledBuffer> bs = new ArrayList<>();
                for (int i = 0; i < 8; i++) {
                    bs.add(pool.allocate(64));
                    bs.add(pool.allocate(4096));
                }
                PooledBuffer held = bs.removeLast();
                bs.forEach(PooledBuffer::close); // the magazines of two classes hold 15 buffers
                PooledBuffer again = pool.allocate(64); // served from the magazine: it is in the table
                again.close();
                warm.countDown();
                assertThat(closed.await(30, TimeUnit.SECONDS)).isTrue();
                assertEbadf(() -> pool.allocate(64), "allocate");
                assertEbadf(() -> pool.allocate(4096), "allocate");
                assertEbadf(() -> pool.allocate(4L << 20), "allocate");
                int generation = held.generation();
                assertEbadf(held::close, "free");
                held.checkGeneration(generation); // still live: the refused free changed nothing
                assertThat(held.pins()).isZero();
            } catch (Throwable t) {
                failure.set(t);
            }
        });
        worker.start();
        assertThat(warm.await(30, TimeUnit.SECONDS)).isTrue();
        LeakReport report = pool.closeAndReport();
        closed.countDown();
        worker.join();
        assertThat(failure.get()).isNull();
        assertThat(report.buffers()).isEqualTo(1);
        assertThat(report.bytes()).isEqualTo(4096);
    }

    /**
     * Threads allocate, write and free as fast as they can while another thread closes the pool, with
     * nothing ordering them: every operation either works or fails cleanly (EBADF from the pool, or
     * IllegalStateException from a segment whose scope the close ended), and every thread sees the
     * close within a bounded time, though its fast path reads no flag.
     */
    @ParameterizedTest
    @EnumSource(SafetyMode.class)
    void threadsRacingACloseFailCleanlyAndStop(SafetyMode mode) throws Exception {
        BufferPool pool = BufferPool.builder().name("racing-close").safetyMode(mode).build();
        int threads = 3;
        CountDownLatch running = new CountDownLatch(threads);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            long size = 64L << (4 * t); // 64 B, 1 KiB, 16 KiB
            Thread w = new Thread(() -> {
                boolean counted = false;
                try {
                    for (long i = 0; i < 1_000_000_000L; i++) {
                        PooledBuffer b = pool.allocate(size);
                        b.segment().set(ValueLayout.JAVA_LONG, 0, i);
                        b.close();
                        if (!counted && i > 10_000) {
                            running.countDown();
                            counted = true;
                        }
                    }
                    failure.compareAndSet(null, new AssertionError("a billion operations and no sign of the close"));
                } catch (RdmaException e) {
                    if (e.errno() != Errno.EBADF) {
                        failure.compareAndSet(null, e);
                    }
                } catch (IllegalStateException e) {
                    // the close ended the segment's scope between the allocate and the write
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                } finally {
                    if (!counted) {
                        running.countDown();
                    }
                }
            });
            w.setDaemon(true); // a worker that never sees the close must not outlive the test
            workers.add(w);
            w.start();
        }
        assertThat(running.await(30, TimeUnit.SECONDS)).isTrue();
        for (int tries = 0; ; tries++) {
            try {
                pool.closeAndReport();
                break;
            } catch (RdmaException e) {
                assertThat(e.errno()).isEqualTo(Errno.EBUSY); // a worker was inside a segment access
                assertThat(tries).isLessThan(1_000);
            }
        }
        for (Thread w : workers) {
            w.join(TimeUnit.SECONDS.toMillis(30));
            assertThat(w.isAlive()).as("a worker still allocating 30 s after the close").isFalse();
        }
        assertThat(failure.get()).isNull();
        assertThat(pool.isClosed()).isTrue();
    }

    /**
     * Two live threads whose ids share a slot of the table take turns in it: each finds the other's
     * magazine, falls back to its own and publishes it. Nothing is handed out twice (each thread marks
     * the buffers it holds and checks the mark before it frees), and the counts add up.
     */
    @Test
    void threadsSharingATableSlotStayCorrect() throws Exception {
        BufferPool pool = BufferPool.builder().name("shared-slot").build();
        int rounds = 20_000;
        AtomicReference<Throwable> failure = new AtomicReference<>();
        CyclicBarrier start = new CyclicBarrier(2);
        Runnable work = () -> {
            try {
                start.await();
                long mark = Thread.currentThread().threadId();
                ArrayDeque<PooledBuffer> held = new ArrayDeque<>();
                for (int i = 0; i < rounds; i++) {
                    PooledBuffer b = pool.allocate(64 + (i & 1) * 4000);
                    b.segment().set(ValueLayout.JAVA_LONG, 0, mark);
                    held.add(b);
                    if (held.size() > 3) {
                        PooledBuffer old = held.removeFirst();
                        assertThat(old.segment().get(ValueLayout.JAVA_LONG, 0)).as("owned by one thread").isEqualTo(mark);
                        old.close();
                    }
                }
                held.forEach(PooledBuffer::close);
            } catch (Throwable t) {
                failure.compareAndSet(null, t);
            }
        };
        Thread a = new Thread(work);
        Thread b = twinOf(a, work);
        assertThat(ThreadCaches.index(0, a.threadId())).isEqualTo(ThreadCaches.index(0, b.threadId()));
        a.start();
        b.start();
        a.join();
        b.join();
        assertThat(failure.get()).isNull();
        PoolStats stats = pool.stats();
        assertThat(stats.allocations()).isEqualTo(2L * rounds);
        assertThat(stats.frees()).isEqualTo(2L * rounds);
        assertThat(stats.liveBuffers()).isZero();
        closeClean(pool);
    }

    /** A platform thread (not started) whose id falls in the same table slot as {@code a}'s. */
    private static Thread twinOf(Thread a, Runnable work) {
        for (int i = 0; i < 4 * ThreadCaches.SLOTS; i++) {
            Thread t = new Thread(work);
            if (ThreadCaches.index(0, t.threadId()) == ThreadCaches.index(0, a.threadId())) {
                return t;
            }
        }
        throw new AssertionError("no thread id in the slot of " + a.threadId());
    }

    /**
     * One thread pins and unpins a buffer as fast as it can while another tries to free it: a free
     * succeeds only between two pins, and a pin that succeeded is never lost to a free (the pinner
     * sees its pin counted, and its unpin accepted, every time), until the free has happened and
     * every later pin is refused (EBADF). Each round starts with one pin the freeing thread is shown
     * (its free must be refused with EBUSY and leave the pin counted), so every round has at least
     * one pin and one refused free however the two threads are scheduled; then the race.
     */
    @ParameterizedTest
    @EnumSource(value = SafetyMode.class, names = {"CHECKED", "PARANOID"})
    void aFreeNeverTakesABufferAPinOnAnotherThreadHolds(SafetyMode mode) throws Exception {
        BufferPool pool = BufferPool.builder().name("pin-race").safetyMode(mode).build();
        int rounds = 2_000;
        CyclicBarrier go = new CyclicBarrier(2);
        CyclicBarrier held = new CyclicBarrier(2);
        CyclicBarrier release = new CyclicBarrier(2);
        CyclicBarrier done = new CyclicBarrier(2);
        AtomicReference<PooledBuffer> target = new AtomicReference<>();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        Thread pinner = new Thread(() -> {
            try {
                for (int round = 0; round < rounds; round++) {
                    go.await();
                    PooledBuffer b = target.get();
                    b.pin();
                    held.await();
                    release.await();
                    b.unpin();
                    while (true) {
                        try {
                            b.pin();
                        } catch (RdmaException e) {
                            assertThat(e.errno()).isEqualTo(Errno.EBADF); // freed: the round is over
                            break;
                        }
                        assertThat(b.pins()).as("round %d: a pin held", round).isPositive();
                        b.unpin(); // EINVAL here would mean a free took the buffer while pinned
                    }
                    done.await();
                }
            } catch (Throwable t) {
                failure.compareAndSet(null, t);
                go.reset();
                held.reset();
                release.reset();
                done.reset();
            }
        });
        pinner.start();
        try {
            for (int round = 0; round < rounds; round++) {
                PooledBuffer b = pool.allocate(256);
                target.set(b);
                go.await(10, TimeUnit.SECONDS);
                held.await(10, TimeUnit.SECONDS);
                assertThatThrownBy(b::close).as("round %d: a free while pinned", round)
                        .isInstanceOf(RdmaException.class)
                        .extracting(e -> ((RdmaException) e).errno()).isEqualTo(Errno.EBUSY);
                assertThat(b.pins()).as("round %d: the refused free left the pin", round).isEqualTo(1);
                release.await(10, TimeUnit.SECONDS);
                while (true) {
                    try {
                        b.close();
                        break;
                    } catch (RdmaException e) {
                        assertThat(e.errno()).isEqualTo(Errno.EBUSY);
                    }
                }
                done.await(10, TimeUnit.SECONDS);
            }
        } catch (BrokenBarrierException e) {
            // the pinner failed and broke the barriers: its failure is the report
        } finally {
            if (failure.get() == null && pinner.isAlive()) {
                pinner.interrupt();
            }
            pinner.join();
        }
        assertThat(failure.get()).isNull();
        assertThat(pool.stats().liveBuffers()).isZero();
        closeClean(pool);
    }
}
