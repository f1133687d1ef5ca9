package io.regmem.cli;

import io.regmem.core.BufferPool;
import io.regmem.core.LeakReport;
import io.regmem.core.RdmaException;
import io.regmem.registration.Access;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.PoolRegistration;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.uring.IoRing;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Locale;
import java.util.Map;
import org.HdrHistogram.Histogram;

/**
 * The storage part of {@code regmem demo}: a file served to an RPC client over RDMA without a copy.
 *
 * <p>Two devices of the chosen provider are connected in this JVM. The server's {@link BufferPool}
 * is registered with its protection domain and with an {@link IoRing} at once. A client call asks
 * for a block: the server reads it from the file with {@code READ_FIXED} into a pooled buffer and
 * RDMA WRITEs it from that same buffer into the client's registered memory, then answers with a
 * SEND. A write call goes the other way: RDMA READ from the client into a pooled buffer, then
 * {@code WRITE_FIXED} from it to the file. The client checks every byte it reads; the blocks it
 * wrote are read back through the same path and, at the end, straight from the file.
 *
 * <p>This class sets the part up, runs its phases and reports; {@link StorageServer},
 * {@link StorageClient} and {@link StorageProtocol} are its two ends and their messages.
 */
final class StorageDemo {
    private final PrintStream out;
    private final String provider;
    /** Options for every device this part opens ({@code --device-option}). */
    private Map<String, String> deviceOptions = Map.of();
    private final long fileBytes;
    private final int block;
    private final int depth;
    private final long reads;
    private final long writes;
    private final Path tmpDir;

    StorageDemo(PrintStream out, String provider, long fileBytes, int block, int depth, long reads, long writes, Path tmpDir) {
        this.out = out;
        this.provider = provider;
        this.fileBytes = fileBytes;
        this.block = block;
        this.depth = depth;
        this.reads = reads;
        this.writes = writes;
        this.tmpDir = tmpDir;
    }

    /** Opens this part's devices with {@code options} (the provider's device options). */
    StorageDemo withDeviceOptions(Map<String, String> options) {
        this.deviceOptions = Map.copyOf(options);
        return this;
    }

    /** Runs the storage part; false when a check failed or something leaked. */
    boolean run() throws IOException {
        Path path = Files.createTempFile(tmpDir, "regmem-storage-", ".dat");
        try {
            long t0 = System.nanoTime();
            generate(path);
            out.printf(Locale.ROOT, "%nStorage: a %,d MiB file of known content (%s), generated in %.2f s%n", fileBytes >> 20,
                    path, (System.nanoTime() - t0) / 1e9);
            return serve(path);
        } finally {
            Files.deleteIfExists(path);
        }
    }

    private void generate(Path path) throws IOException {
        try (FileChannel ch = FileChannel.open(path, StandardOpenOption.WRITE)) {
            ByteBuffer b = ByteBuffer.allocateDirect(1 << 20).order(ByteOrder.nativeOrder());
            for (long pos = 0; pos < fileBytes; pos += b.capacity()) {
                b.clear();
                for (int i = 0; i < b.capacity(); i += 8) {
                    b.putLong(i, StorageProtocol.pattern(pos + i));
                }
                while (b.hasRemaining()) {
                    ch.write(b, pos + b.position());
                }
            }
            ch.force(false);
        }
    }

    private boolean serve(Path path) throws IOException {
        SoftPair pair = new SoftPair(provider, deviceOptions, 4 * depth + 8, new QpInitAttributes().maxSendWr(2 * depth + 4)
                .maxRecvWr(depth + 1), new QpInitAttributes().maxSendWr(depth + 4).maxRecvWr(depth + 1));
        boolean tornDown = false;
        StorageServer server = null;
        BufferPool clientPool = null;
        PoolRegistration clientReg = null;
        try {
            server = new StorageServer(pair.qpA, pair.cqA, pair.pdA, path, block, depth);
            clientPool = BufferPool.builder().name("storage-client").pageAligned().chunkSize(Math.max(4 << 20, 2L * depth * block))
                    .largestClass(Math.max(4 << 20, block)).build();
            clientReg = pair.pdB.register(clientPool, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ);
            StorageClient client = new StorageClient(pair, clientPool, clientReg, fileBytes, block, depth, writes);
            long start = System.nanoTime();
            client.phase(StorageProtocol.OP_READ, reads, server);
            long readNs = System.nanoTime() - start;
            long w0 = System.nanoTime();
            client.phase(StorageProtocol.OP_WRITE, writes, server);
            long writeNs = System.nanoTime() - w0;
            client.phase(StorageProtocol.OP_READ, -1, server); // the written blocks, back through the pipeline
            server.drain();
            boolean fileOk = client.checkFile(path);
            pair.disconnect(); // the receives still posted on both sides are flushed
            drainFlushed(pair.cqA);
            drainFlushed(pair.cqB);
            client.close();
            LeakReport clientLeaks = clientPool.closeAndReport();
            clientPool = null;
            clientReg.close();
            clientReg = null;
            LeakReport serverLeaks = server.close();
            String ringFlags = server.ring.setupFlags();
            boolean direct = server.file.isDirect();
            server = null;
            pair.close();
            tornDown = true;
            String reportA = pair.devA.resources().report();
            String reportB = pair.devB.resources().report();
            out.printf(Locale.ROOT, "Served on the %s provider, io_uring %s, %d calls in flight, blocks of %,d B (%s)%n",
                    provider, ringFlags, depth, block, direct ? "O_DIRECT" : "page cache: no O_DIRECT here");
            out.printf(Locale.ROOT, "  reads : %,d blocks READ_FIXED then RDMA WRITE in %.2f s (%,.0f blocks/s, %.0f MB/s)%n",
                    client.readsDone, readNs / 1e9, client.readsDone / (readNs / 1e9), client.readsDone * (double) block / readNs * 1e3);
            out.printf(Locale.ROOT, "  writes: %,d blocks RDMA READ then WRITE_FIXED in %.2f s (%,.0f blocks/s, %.0f MB/s)%n",
                    client.writesDone, writeNs / 1e9, client.writesDone / (writeNs / 1e9),
                    client.writesDone * (double) block / writeNs * 1e3);
            out.printf(Locale.ROOT, "Latency per call (us)   p50      p90      p99    p99.9      max%n");
            print("read", client.readLat);
            print("write", client.writeLat);
            out.printf(Locale.ROOT, "Bytes checked: %,d read by the client, every byte (the %,d written blocks read back "
                    + "included); the file afterwards: %s%n", client.bytesChecked, client.verifyReads,
                    fileOk ? "as written" : "DIFFERENT");
            long copies = client.readsDone + client.writesDone + client.verifyReads - client.serverSameMemory();
            out.printf(Locale.ROOT, "Copies between file and wire on the server: %d (%,d blocks moved by the kernel and the "
                    + "transport from the same pooled buffers, registered once with both)%n", copies, client.serverSameMemory());
            out.printf(Locale.ROOT, "Devices: %s (server): %s; %s (client): %s. Pools: %s; %s. Rings open: %d%n",
                    pair.devA.name(), reportA, pair.devB.name(), reportB,
                    serverLeaks.describe().strip(), clientLeaks.describe().strip(), IoRing.openRings().size());
            return fileOk && copies == 0 && serverLeaks.clean() && clientLeaks.clean()
                    && reportA.equals("no live objects") && reportB.equals("no live objects") && IoRing.openRings().isEmpty();
        } finally {
            if (!tornDown) {
                if (server != null) {
                    try {
                        server.ring.close();
                    } catch (RuntimeException ignored) {
                        // reporting the first failure
                    }
                }
                pair.forceClose();
            }
        }
    }

    /** Polls away the flushed completions of receives still posted when the QPs were destroyed. */
    private static void drainFlushed(CompletionQueue cq) {
        WorkCompletion[] wcs = {new WorkCompletion(), new WorkCompletion(), new WorkCompletion(), new WorkCompletion()};
        while (cq.poll(wcs) > 0) {
            // flushed receives: nothing to do
        }
    }

    private void print(String what, Histogram h) {
        out.printf(Locale.ROOT, "  %-18s %8d %8d %8d %8d %8d%n", what, h.getValueAtPercentile(50), h.getValueAtPercentile(90),
                h.getValueAtPercentile(99), h.getValueAtPercentile(99.9), h.getMaxValue());
    }

    /** True if io_uring can be set up here; otherwise prints why in one line. */
    static boolean available(PrintStream out) {
        try (IoRing _ = IoRing.open(2)) {
            return true;
        } catch (RdmaException e) {
            out.printf(Locale.ROOT, "%nStorage: skipped, %s%n", e.getMessage());
            return false;
        }
    }
}
