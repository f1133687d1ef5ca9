package io.regmem.bench;

import io.netty.buffer.AdaptiveByteBufAllocator;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.ByteBufAllocatorMetric;
import io.netty.buffer.PooledByteBufAllocator;
import io.regmem.core.BufferPool;
import io.regmem.core.PooledBuffer;
import io.regmem.core.SafetyMode;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * A peak, then nothing: each allocator, in a JVM of its own, allocates {@code peak} bytes in 64 KiB
 * buffers (writing every page, so the memory is resident), frees them all, and stays idle for a
 * second. Reported at each step: the process's resident memory ({@code VmRSS}) and what the
 * allocator says it holds (regmem: {@code reservedBytes}, on its default decay; Netty: its metric's
 * used direct memory). Also the cost of one allocation and its first write in a fresh pool (a first
 * carve: mmap and a page fault) and, for regmem, the same right after the idle second (its chunks
 * given back: the range reused, a page fault). Rounds interleave the allocators.
 *
 * <p>Usage: {@code PeakTrimBenchmark [peakGiB] [rounds]} (default 4 and 3); a child runs with
 * {@code --child NAME peakBytes} and prints one result line.
 */
public final class PeakTrimBenchmark {
    static final int BUF = 64 << 10;
    static final String[] SUBJECTS = {"regmem", "netty-adaptive", "netty-pooled"};

    private PeakTrimBenchmark() {
    }

    /** VmRSS of this process, in bytes. */
    static long rss() throws IOException {
        for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
            if (line.startsWith("VmRSS:")) {
                return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
            }
        }
        throw new IOException("no VmRSS");
    }

    interface Subject {
        Object allocate();

        void touch(Object b);

        void free(Object b);

        long held();

        void close();
    }

    static Subject subject(String name) {
        return switch (name) {
            case "regmem" -> new Subject() {
                final BufferPool pool = BufferPool.builder().name("peak").safetyMode(SafetyMode.CHECKED).build();

                @Override
                public Object allocate() {
                    return pool.allocate(BUF);
                }

                @Override
                public void touch(Object b) {
                    MemorySegment s = ((PooledBuffer) b).segment();
                    for (long off = 0; off < BUF; off += 4096) {
                        s.set(ValueLayout.JAVA_BYTE, off, (byte) 1);
                    }
                }

                @Override
                public void free(Object b) {
                    ((PooledBuffer) b).close();
                }

                @Override
                public long held() {
                    return pool.stats().reservedBytes();
                }

                @Override
                public void close() {
                    pool.close();
                }
            };
            case "netty-adaptive", "netty-pooled" -> {
                ByteBufAllocator alloc;
                ByteBufAllocatorMetric metric;
                if (name.equals("netty-adaptive")) {
                    AdaptiveByteBufAllocator a = new AdaptiveByteBufAllocator(true, true);
                    alloc = a;
                    metric = a.metric();
                } else {
                    PooledByteBufAllocator p = new PooledByteBufAllocator(true);
                    alloc = p;
                    metric = p.metric();
                }
                yield new Subject() {
                    @Override
                    public Object allocate() {
                        return alloc.directBuffer(BUF, BUF);
                    }

                    @Override
                    public void touch(Object b) {
                        ByteBuf buf = (ByteBuf) b;
                        for (int off = 0; off < BUF; off += 4096) {
                            buf.setByte(off, 1);
                        }
                    }

                    @Override
                    public void free(Object b) {
                        ((ByteBuf) b).release();
                    }

                    @Override
                    public long held() {
                        return metric.usedDirectMemory();
                    }

                    @Override
                    public void close() {
                    }
                };
            }
            default -> throw new IllegalArgumentException(name);
        };
    }

    /** In the child: the whole run for one allocator, as one Markdown row. */
    static String child(String name, long peak) throws Exception {
        long rss0 = rss();
        Subject warm = subject(name); // the code paths loaded and run once
        for (int i = 0; i < 100; i++) {
            Object b = warm.allocate();
            warm.touch(b);
            warm.free(b);
        }
        warm.close();
        Subject first = subject(name);
        long t0 = System.nanoTime();
        Object one = first.allocate();
        first.touch(one);
        long firstCarve = System.nanoTime() - t0;
        first.free(one);
        first.close();

        Subject s = subject(name);
        List<Object> all = new ArrayList<>((int) (peak / BUF));
        for (long n = 0; n < peak; n += BUF) {
            Object b = s.allocate();
            s.touch(b);
            all.add(b);
        }
        long rssPeak = rss();
        long heldPeak = s.held();
        for (Object b : all) {
            s.free(b);
        }
        all.clear();
        long rssFreed = rss();
        long heldFreed = s.held();
        Thread.sleep(1000);
        long rssIdle = rss();
        long heldIdle = s.held();
        t0 = System.nanoTime();
        Object again = s.allocate();
        s.touch(again);
        long afterIdle = System.nanoTime() - t0;
        s.free(again);
        s.close();
        double mib = 1 << 20;
        return String.format("| %s | %.0f / %.0f MiB | %.0f / %.0f MiB | %.0f / %.0f MiB | %.0f MiB | %,d ns | %,d ns |",
                name, rssPeak / mib, heldPeak / mib, rssFreed / mib, heldFreed / mib, rssIdle / mib, heldIdle / mib,
                rss0 / mib, firstCarve, afterIdle);
    }

    public static void main(String[] args) throws Exception {
        if (args.length > 0 && args[0].equals("--child")) {
            System.out.println(child(args[1], Long.parseLong(args[2])));
            return;
        }
        long peak = (long) ((args.length > 0 ? Double.parseDouble(args[0]) : 4) * (1L << 30));
        int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 3;
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        System.out.println("| allocator | peak: RSS / held | all freed: RSS / held | after 1 s idle: RSS / held "
                + "| RSS before | first allocation, fresh pool | first allocation after the idle second |");
        System.out.println("|---|---:|---:|---:|---:|---:|---:|");
        for (int r = 0; r < rounds; r++) {
            for (String name : SUBJECTS) {
                List<String> cmd = new ArrayList<>(List.of(java, "--enable-native-access=ALL-UNNAMED", "-Xms1g", "-Xmx1g",
                        "-XX:MaxDirectMemorySize=" + (2 * peak + (1L << 30)), "--sun-misc-unsafe-memory-access=allow",
                        "--add-opens=java.base/java.nio=ALL-UNNAMED", "--add-opens=java.base/jdk.internal.misc=ALL-UNNAMED",
                        "-Dio.netty.tryReflectionSetAccessible=true", "-Dio.netty.leakDetection.level=disabled",
                        "-cp", System.getProperty("java.class.path"), PeakTrimBenchmark.class.getName(), "--child", name,
                        Long.toString(peak)));
                Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
                try (BufferedReader out = new BufferedReader(new InputStreamReader(p.getInputStream()))) {
                    for (String line; (line = out.readLine()) != null; ) {
                        if (line.startsWith("|")) {
                            System.out.println(line);
                        } else {
                            System.err.println(name + ": " + line);
                        }
                    }
                }
                if (p.waitFor() != 0) {
                    throw new IllegalStateException(name + " exited with " + p.exitValue());
                }
            }
        }
    }
}
