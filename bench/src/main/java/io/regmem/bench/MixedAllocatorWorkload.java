package io.regmem.bench;

import io.netty.buffer.AdaptiveByteBufAllocator;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.ByteBufAllocatorMetric;
import io.netty.buffer.PooledByteBufAllocator;
import io.regmem.core.BufferPool;
import io.regmem.core.PooledBuffer;
import io.regmem.core.SafetyMode;
import java.lang.foreign.ValueLayout;
import java.util.ArrayDeque;
import java.util.SplittableRandom;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import org.HdrHistogram.Histogram;
import org.jctools.queues.SpscArrayQueue;

/**
 * A mixed-size, two-thread allocator workload, regmem (CHECKED, with its default decay and with
 * none) beside Netty 4.2's adaptive and
 * pooled direct allocators, in rounds so that each sees the same minutes of the machine. Each of two
 * threads draws sizes from a distribution, allocates (timed one by one into an HdrHistogram), writes
 * a long, keeps a window of the last {@value #WINDOW} buffers and frees the oldest when the window is
 * full; a quarter of those frees are handed to the other thread (through a bounded queue of
 * {@value #INBOX}), which frees them there. Reported per allocator: allocations per second (both
 * threads), the p50 / p99 / p99.9 / max allocate latency, and the chunk memory it holds with
 * every buffer freed, at once and after an idle second (regmem: reserved bytes, on its default
 * decay, which gives back chunks unused for 500 ms; Netty: its metric's used direct memory, which
 * falls as its chunks empty).
 *
 * <p>Distributions: {@code storage} (4 KiB 60%, 8-64 KiB 30%, 128 KiB-1 MiB 10%) and {@code rpc}
 * (64-512 B 70%, 1-4 KiB 25%, 8-16 KiB 5%). Usage: {@code MixedAllocatorWorkload [seconds] [rounds]}.
 */
public final class MixedAllocatorWorkload {
    private static final int WINDOW = 256;
    private static final int THREADS = 2;
    /** Buffers waiting for the other thread to free them, at most (a full hand-off frees locally). */
    private static final int INBOX = 256;

    private MixedAllocatorWorkload() {
    }

    /** The allocator under test, with one operation set. */
    public interface Subject {
        String name();

        Object allocate(int size);

        void free(Object buffer);

        long heldBytes();

        void close();
    }

    public static final class Regmem implements Subject {
        public final BufferPool pool;
        private final boolean decay;

        /** On the default decay. */
        public Regmem() {
            this(true);
        }

        /** With the default decay, or with none (the memory stays: the decay's cost shows as the difference). */
        public Regmem(boolean decay) {
            this.decay = decay;
            var b = BufferPool.builder().name("mixed").safetyMode(SafetyMode.CHECKED).maxBytes(16L << 30);
            this.pool = (decay ? b : b.noDecay()).build();
        }

        @Override
        public String name() {
            return decay ? "regmem CHECKED" : "regmem CHECKED, no decay";
        }

        @Override
        public Object allocate(int size) {
            PooledBuffer b = pool.allocate(size);
            b.segment().set(ValueLayout.JAVA_LONG, 0, size);
            return b;
        }

        @Override
        public void free(Object buffer) {
            ((PooledBuffer) buffer).close();
        }

        @Override
        public long heldBytes() {
            return pool.stats().reservedBytes();
        }

        @Override
        public void close() {
            pool.close();
        }
    }

    static final class Netty implements Subject {
        final boolean adaptive;
        final ByteBufAllocator alloc;
        final ByteBufAllocatorMetric metric;

        Netty(boolean adaptive) {
            this.adaptive = adaptive;
            if (adaptive) {
                AdaptiveByteBufAllocator a = new AdaptiveByteBufAllocator(true, true);
                alloc = a;
                metric = a.metric();
            } else {
                PooledByteBufAllocator p = new PooledByteBufAllocator(true);
                alloc = p;
                metric = p.metric();
            }
        }

        @Override
        public String name() {
            return adaptive ? "Netty adaptive" : "Netty pooled";
        }

        @Override
        public Object allocate(int size) {
            ByteBuf b = alloc.directBuffer(size);
            b.setLong(0, size);
            return b;
        }

        @Override
        public void free(Object buffer) {
            ((ByteBuf) buffer).release();
        }

        @Override
        public long heldBytes() {
            return metric.usedDirectMemory();
        }

        @Override
        public void close() {
        }
    }

    static int draw(SplittableRandom rnd, boolean storage) {
        int p = rnd.nextInt(100);
        if (storage) {
            return p < 60 ? 4096 : p < 90 ? 8192 << rnd.nextInt(4) : (128 << 10) << rnd.nextInt(4);
        }
        return p < 70 ? 64 << rnd.nextInt(4) : p < 95 ? 1024 << rnd.nextInt(3) : 8192 << rnd.nextInt(2);
    }

    /** One allocator, one distribution, {@code seconds} long: the result line. */
    public static String run(Subject s, boolean storage, double seconds) throws InterruptedException {
        @SuppressWarnings({"unchecked", "rawtypes"})
        SpscArrayQueue<Object>[] inbox = new SpscArrayQueue[THREADS];
        for (int i = 0; i < THREADS; i++) {
            inbox[i] = new SpscArrayQueue<>(INBOX); // bounded: a descheduled thread cannot pile up buffers
        }
        Histogram[] hist = new Histogram[THREADS];
        long[] ops = new long[THREADS];
        AtomicBoolean stop = new AtomicBoolean();
        CountDownLatch done = new CountDownLatch(THREADS);
        Thread[] threads = new Thread[THREADS];
        long warmupNanos = (long) (Math.min(2, seconds / 4) * 1e9);
        for (int t = 0; t < THREADS; t++) {
            int me = t;
            hist[t] = new Histogram(3_600_000_000_000L, 3);
            threads[t] = Thread.ofPlatform().name("mixed-" + t).start(() -> {
                SplittableRandom rnd = new SplittableRandom(42 + me);
                ArrayDeque<Object> window = new ArrayDeque<>(WINDOW);
                long start = System.nanoTime();
                long n = 0;
                boolean measuring = false;
                while (!stop.get()) {
                    int size = draw(rnd, storage);
                    long t0 = System.nanoTime();
                    Object b = s.allocate(size);
                    long t1 = System.nanoTime();
                    if (!measuring && t1 - start > warmupNanos) {
                        measuring = true;
                        hist[me].reset();
                        n = 0;
                    }
                    hist[me].recordValue(t1 - t0);
                    n++;
                    window.addLast(b);
                    if (window.size() == WINDOW) {
                        Object old = window.pollFirst();
                        if (rnd.nextInt(4) == 0 && inbox[1 - me].offer(old)) {
                            // freed by the other thread
                        } else {
                            s.free(old);
                        }
                    }
                    Object in;
                    while ((in = inbox[me].poll()) != null) {
                        s.free(in);
                    }
                }
                ops[me] = n;
                for (Object b : window) {
                    s.free(b);
                }
                done.countDown();
                try {
                    done.await();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                Object in;
                while ((in = inbox[me].poll()) != null) {
                    s.free(in);
                }
            });
        }
        Thread.sleep((long) (seconds * 1000));
        stop.set(true);
        for (Thread th : threads) {
            th.join();
        }
        Histogram all = hist[0].copy();
        all.add(hist[1]);
        double measured = seconds - warmupNanos / 1e9;
        long heldAtEnd = s.heldBytes();
        Thread.sleep(1000); // idle: the allocator may give memory back meanwhile
        return String.format("| %s | %s | %.2f M/s | %.0f / %.0f / %.0f / %,d ns | %.1f MiB | %.1f MiB |",
                storage ? "storage" : "rpc", s.name(), (ops[0] + ops[1]) / measured / 1e6,
                (double) all.getValueAtPercentile(50), (double) all.getValueAtPercentile(99),
                (double) all.getValueAtPercentile(99.9), all.getMaxValue(), heldAtEnd / 1048576.0,
                s.heldBytes() / 1048576.0);
    }

    /**
     * Runs the rounds and prints a Markdown table.
     *
     * @param args seconds per run (default 10), rounds (default 1)
     */
    public static void main(String[] args) throws InterruptedException {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 10;
        int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 1;
        System.out.println("| workload | allocator | allocations/s | allocate p50 / p99 / p99.9 / max | held at the end "
                + "| held after 1 s idle |");
        System.out.println("|---|---|---:|---:|---:|---:|");
        for (int r = 0; r < rounds; r++) {
            for (boolean storage : new boolean[] {false, true}) {
                for (int k = 0; k < 4; k++) {
                    Subject s = k == 0 ? new Regmem() : k == 1 ? new Regmem(false) : new Netty(k == 2);
                    try {
                        System.out.println(run(s, storage, seconds));
                    } finally {
                        s.close();
                    }
                }
            }
        }
    }
}
