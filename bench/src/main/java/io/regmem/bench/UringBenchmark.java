package io.regmem.bench;

import io.regmem.core.BufferPool;
import io.regmem.core.PooledBuffer;
import io.regmem.registration.uring.IoCompletionHandler;
import io.regmem.registration.uring.IoFile;
import io.regmem.registration.uring.IoRegistration;
import io.regmem.registration.uring.IoRing;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.OpenOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.SplittableRandom;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.AuxCounters;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * Storage I/O at a fixed queue depth on one file, as fio runs it ({@code bench/storage-compare.sh}
 * runs fio on the same file, block size and depth right after): regmem's {@link IoRing} with fixed
 * buffers ({@code READ_FIXED}/{@code WRITE_FIXED}) and without ({@code READ}/{@code WRITE} on the
 * same pooled memory), {@link FileChannel} positional I/O into a direct {@link ByteBuffer} on one
 * thread, and the same on {@code depth} virtual threads.
 *
 * <p>Reported per second: {@code ios} (I/Os completed) and {@code cpuNs} (CPU nanoseconds the whole
 * process used: every JVM thread and io_uring's kernel workers); {@code cpuNs / ios} is the CPU per
 * I/O. The file is {@code $REGMEM_BENCH_FILE} (1 GiB made under the temp directory if unset).
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
public class UringBenchmark extends BenchDefaults {
    static final long FILE_BYTES = 1L << 30;

    /** fixed (READ_FIXED), plain (READ on the same registered memory), channel (one thread), vthreads. */
    @Param({"fixed", "plain", "channel", "vthreads"})
    public String engine;

    /** fio-style job: randread-4k-direct, randread-4k-buffered, seqread-128k-direct, randwrite-4k-direct. */
    @Param({"randread-4k-direct", "randread-4k-buffered", "seqread-128k-direct", "randwrite-4k-direct"})
    public String job;

    /** I/Os in flight (fio's iodepth; the number of virtual threads). */
    @Param({"32"})
    public int depth;

    private Path path;
    private boolean ownFile;
    private int block;
    private boolean write;
    private boolean sequential;
    /** {@code com.sun.nio.file.ExtendedOpenOption.DIRECT}, looked up by name: javac warns about the JDK-internal class. */
    @SuppressWarnings({"unchecked", "rawtypes"})
    private static final OpenOption O_DIRECT = lookUpDirect();

    @SuppressWarnings({"unchecked", "rawtypes"})
    private static OpenOption lookUpDirect() {
        try {
            return (OpenOption) Enum.valueOf((Class) Class.forName("com.sun.nio.file.ExtendedOpenOption"), "DIRECT");
        } catch (ClassNotFoundException e) {
            throw new IllegalStateException("this JDK has no O_DIRECT open option", e);
        }
    }

    private boolean direct;
    private long blocks;
    private long nextSeq;
    private final SplittableRandom rnd = new SplittableRandom(3);

    private IoRing ring;
    private BufferPool pool;
    private IoRegistration reg;
    private IoFile file;
    private PooledBuffer[] buffers;
    private IoCompletionHandler again;
    private int completions;

    private FileChannel channel;
    private ByteBuffer[] direct4;
    private ExecutorService vthreads;
    private Future<?>[] futures;

    /** Counted per second by JMH. */
    @State(Scope.Thread)
    @AuxCounters(AuxCounters.Type.OPERATIONS)
    public static class Counters {
        /** I/Os completed. */
        public long ios;
        /** CPU nanoseconds used by the process. */
        public long cpuNs;
        private long cpu0;

        @Setup(Level.Iteration)
        public void reset() {
            ios = 0;
            cpuNs = 0;
            cpu0 = processCpu();
        }

        void add(long n) {
            ios += n;
        }

        /** The process's CPU over the iteration (JMH reads the counters after this). */
        @TearDown(Level.Iteration)
        public void sample() {
            cpuNs = processCpu() - cpu0;
        }
    }

    private static final com.sun.management.OperatingSystemMXBean OS =
            (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();

    static long processCpu() {
        return OS.getProcessCpuTime();
    }

    @Setup(Level.Trial)
    public void setUp() throws IOException {
        String[] j = job.split("-");
        write = j[0].startsWith("randwrite");
        sequential = j[0].startsWith("seq");
        block = Integer.parseInt(j[1].replace("k", "")) * 1024;
        direct = j[2].equals("direct");
        String env = System.getenv("REGMEM_BENCH_FILE");
        if (env != null) {
            path = Path.of(env);
        } else {
            path = Files.createTempFile("regmem-uring-bench", ".dat");
            ownFile = true;
            try (FileChannel ch = FileChannel.open(path, StandardOpenOption.WRITE)) {
                ByteBuffer b = ByteBuffer.allocateDirect(1 << 20);
                for (long pos = 0; pos < FILE_BYTES; pos += b.capacity()) {
                    b.clear();
                    ch.write(b, pos);
                }
            }
        }
        blocks = Files.size(path) / block;
        if (!direct) {
            warmPageCache(path); // buffered jobs read from the page cache, as fio's with --invalidate=0 after a pre-read
        }
        switch (engine) {
            case "fixed", "plain" -> {
                ring = IoRing.builder().entries(Integer.highestOneBit(depth * 2 - 1))
                        .singleIssuer(!"0".equals(System.getenv("REGMEM_BENCH_SINGLE_ISSUER"))).build();
                pool = BufferPool.builder().name("uring-bench").pageAligned().chunkSize(4 << 20).build();
                reg = ring.register(pool);
                file = direct ? ring.openFile(path, IoFile.Mode.READ, IoFile.Mode.WRITE, IoFile.Mode.DIRECT)
                        : ring.openFile(path, IoFile.Mode.READ, IoFile.Mode.WRITE);
                buffers = new PooledBuffer[depth];
                boolean fixed = engine.equals("fixed");
                again = (slot, res) -> {
                    if (res != block) {
                        throw new IllegalStateException(engine + " " + job + ": I/O returned " + res);
                    }
                    completions++;
                    prepare((int) slot, fixed);
                    if (direct) {
                        ring.submit(); // against the disk: each replacement at once, as fio submits
                    } // against the page cache (CPU-bound): the replacements go out together at the end of await
                };
                for (int i = 0; i < depth; i++) {
                    buffers[i] = pool.allocate(block);
                    prepare(i, fixed);
                }
                ring.submit();
            }
            case "channel", "vthreads" -> {
                OpenOption[] opts = direct
                        ? new OpenOption[] {StandardOpenOption.READ, StandardOpenOption.WRITE, O_DIRECT}
                        : new OpenOption[] {StandardOpenOption.READ, StandardOpenOption.WRITE};
                channel = FileChannel.open(path, opts);
                direct4 = new ByteBuffer[depth];
                for (int i = 0; i < depth; i++) {
                    direct4[i] = ByteBuffer.allocateDirect(block + 4096).alignedSlice(4096).limit(block);
                }
                if (engine.equals("vthreads")) {
                    vthreads = Executors.newVirtualThreadPerTaskExecutor();
                    futures = new Future<?>[depth];
                }
            }
            default -> throw new IllegalArgumentException("engine " + engine);
        }
    }

    private static void warmPageCache(Path p) throws IOException {
        try (FileChannel ch = FileChannel.open(p, StandardOpenOption.READ)) {
            ByteBuffer b = ByteBuffer.allocateDirect(1 << 20);
            for (long pos = 0; ; pos += b.capacity()) {
                b.clear();
                if (ch.read(b, pos) <= 0) {
                    return;
                }
            }
        }
    }

    private long nextOffset() {
        if (sequential) {
            long b = nextSeq++ % blocks;
            return b * block;
        }
        return rnd.nextLong(blocks) * block;
    }

    private void prepare(int slot, boolean fixed) {
        long off = nextOffset();
        PooledBuffer b = buffers[slot];
        if (write) {
            if (fixed) {
                ring.writeFixed(file, b, 0, block, off, slot);
            } else {
                ring.write(file, b, 0, block, off, slot);
            }
        } else if (fixed) {
            ring.readFixed(file, b, 0, block, off, slot);
        } else {
            ring.read(file, b, 0, block, off, slot);
        }
    }

    @TearDown(Level.Trial)
    public void tearDown() throws Exception {
        if (ring != null) {
            while (ring.inFlight() > 0) {
                ring.await(1, (s, r) -> { });
            }
            for (PooledBuffer b : buffers) {
                b.close();
            }
            file.close();
            reg.close();
            ring.close();
            pool.close();
        }
        if (vthreads != null) {
            vthreads.close();
        }
        if (channel != null) {
            channel.close();
        }
        if (ownFile) {
            Files.deleteIfExists(path);
        }
    }

    /**
     * Waits for at least one completion; each is replaced by a new I/O, submitted at once against the
     * disk (O_DIRECT jobs), together at the end of the call against the page cache.
     */
    @Benchmark
    public void io(Counters c) throws Exception {
        switch (engine) {
            case "fixed", "plain" -> {
                completions = 0;
                ring.await(1, again);
                c.add(completions);
            }
            case "channel" -> {
                ByteBuffer b = direct4[0].clear();
                long off = nextOffset();
                int n = write ? channel.write(b, off) : channel.read(b, off);
                if (n != block) {
                    throw new IllegalStateException("channel " + job + ": " + n);
                }
                c.add(1);
            }
            default -> {
                for (int i = 0; i < depth; i++) {
                    ByteBuffer b = direct4[i].clear();
                    long off = nextOffset();
                    futures[i] = vthreads.submit(() -> write ? channel.write(b, off) : channel.read(b, off));
                }
                for (Future<?> f : futures) {
                    f.get();
                }
                c.add(depth);
            }
        }
    }
}
