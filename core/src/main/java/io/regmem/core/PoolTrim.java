package io.regmem.core;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.ReentrantLock;

/**
 * How a pool gives idle size-class chunks back while it runs: {@link BufferPool#trim(long)} on
 * the caller's thread, and the decay, a round every quarter of the idle time on the JVM's one
 * {@code regmem-decay} daemon thread (made when the first pool with a decay needs it, gone a few
 * seconds after the last such pool closed). Neither touches the allocate or free fast path: they
 * read counters the fast path keeps anyway, and take the classes' locks only for chunks that look
 * idle.
 *
 * <p>A round: the caches of threads that died are reclaimed; a class nobody allocated from for the
 * idle time has its stash made idle (its handles dropped: the next allocations make new ones); then
 * every chunk whose slots are all idle and none of whose slots was bound for the idle time goes
 * back, highest address first, as long as the pool keeps at least {@code keepBytes} reserved. An
 * explicit trim also drains the calling thread's cache and every stash, and ignores the idle time.
 * Rounds and trims of a pool run one at a time ({@link #lock}); the pool's close takes the same lock.
 */
final class PoolTrim {
    private static final System.Logger LOG = System.getLogger(BufferPool.class.getName());
    private static final AtomicInteger THREADS = new AtomicInteger();
    /** The JVM's decay thread, shared by every pool; made on first use. */
    private static volatile ScheduledThreadPoolExecutor executor;

    private final BufferPool pool;
    private final SizeClass[] classes;
    private final ThreadCaches caches;
    private final Chunks chunks;
    /** The decay's idle time, or 0 when the pool has none. */
    private final long idleNanos;
    private final long keepBytes;
    final ReentrantLock lock = new ReentrantLock();
    /** Per class: the allocations the last round saw, and since when (nanoTime) they have not changed. */
    private final long[] allocationsSeen;
    private final long[] quietSince;
    private ScheduledFuture<?> rounds;

    PoolTrim(BufferPool pool, SizeClass[] classes, ThreadCaches caches, Chunks chunks, Duration idle, long keepBytes) {
        this.pool = pool;
        this.classes = classes;
        this.caches = caches;
        this.chunks = chunks;
        this.idleNanos = idle == null ? 0 : idle.toNanos();
        this.keepBytes = keepBytes;
        this.allocationsSeen = new long[classes.length];
        this.quietSince = new long[classes.length];
    }

    /** Schedules the decay's rounds, if the pool has a decay and its source can give memory back. */
    void start() {
        if (idleNanos <= 0 || !chunks.canTrim()) {
            return;
        }
        long period = Math.max(TimeUnit.MILLISECONDS.toNanos(10), idleNanos / 4);
        rounds = executor().scheduleWithFixedDelay(this::round, period, period, TimeUnit.NANOSECONDS);
    }

    private static ScheduledThreadPoolExecutor executor() {
        ScheduledThreadPoolExecutor e = executor;
        if (e == null) {
            synchronized (PoolTrim.class) {
                e = executor;
                if (e == null) {
                    e = new ScheduledThreadPoolExecutor(1, r -> {
                        Thread t = new Thread(r, "regmem-decay-" + THREADS.incrementAndGet());
                        t.setDaemon(true);
                        return t;
                    });
                    e.setRemoveOnCancelPolicy(true);
                    e.setKeepAliveTime(5, TimeUnit.SECONDS);
                    e.allowCoreThreadTimeOut(true);
                    executor = e;
                }
            }
        }
        return e;
    }

    /** Ends the rounds (the pool closed). The caller holds {@link #lock}, so no round is under way. */
    void stop() {
        if (rounds != null) {
            rounds.cancel(false);
        }
    }

    /** An explicit trim: see {@link BufferPool#trim(long)}. Returns the bytes given back. */
    long trim(long keep) {
        lock.lock();
        try {
            if (pool.isClosed()) {
                throw new RdmaException(Errno.EBADF, pool.name() + ": trim after the pool was closed");
            }
            if (!chunks.canTrim()) {
                return 0;
            }
            caches.reclaimDead();
            caches.releaseCurrent();
            for (SizeClass sc : classes) {
                sc.drainStash();
            }
            return giveBack(chunks.candidates(System.nanoTime(), 0), keep);
        } finally {
            lock.unlock();
        }
    }

    /** One round of the decay; runs on the decay thread. */
    private void round() {
        lock.lock();
        try {
            if (pool.isClosed()) {
                return;
            }
            long now = System.nanoTime();
            caches.reclaimDead();
            long[] allocations = new long[classes.length];
            caches.sumCounts(allocations, new long[classes.length]);
            for (int i = 0; i < classes.length; i++) {
                if (allocations[i] != allocationsSeen[i] || quietSince[i] == 0) {
                    allocationsSeen[i] = allocations[i];
                    quietSince[i] = now;
                } else if (now - quietSince[i] >= idleNanos && !classes[i].stash.isEmpty()) {
                    classes[i].drainStash();
                }
            }
            giveBack(chunks.candidates(now, idleNanos), keepBytes);
        } catch (RuntimeException | Error e) {
            LOG.log(System.Logger.Level.WARNING, pool.name() + ": the decay could not give memory back", e);
        } finally {
            lock.unlock();
        }
    }

    private long giveBack(List<Chunk> candidates, long keep) {
        long left = chunks.reserved();
        long given = 0;
        for (Chunk c : candidates) {
            if (left - c.size() < keep) {
                break;
            }
            if (chunks.trim(c, classes)) {
                left -= c.size();
                given += c.size();
            }
        }
        return given;
    }
}
