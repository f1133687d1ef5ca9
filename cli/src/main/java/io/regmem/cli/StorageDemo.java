package io.regmem.cli;

import io.regmem.core.BufferPool;
import io.regmem.core.Errno;
import io.regmem.core.LeakReport;
import io.regmem.core.PooledBuffer;
import io.regmem.core.RdmaException;
import io.regmem.registration.Access;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.Opcode;
import io.regmem.registration.PoolRegistration;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import io.regmem.registration.uring.IoCompletionHandler;
import io.regmem.registration.uring.IoFile;
import io.regmem.registration.uring.IoRegistration;
import io.regmem.registration.uring.IoRing;
import java.io.IOException;
import java.io.PrintStream;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.SplittableRandom;
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
 */
final class StorageDemo {
    static final int OP_READ = 1;
    static final int OP_WRITE = 2;
    static final int OP_KEY = 3;
    private static final int MSG = 64;
    private static final int KEY_MSG = 1024;
    private static final long WRITE_SEED = 0x5DEECE66DL;
    // server work request ids: kind in the high bits, slot in the low
    private static final long WR_RECV = 1L << 40;
    private static final long WR_WRITE = 2L << 40;
    private static final long WR_READ = 3L << 40;
    private static final long WR_REPLY = 4L << 40;
    private static final long SLOT_MASK = (1L << 40) - 1;

    private final PrintStream out;
    private final String provider;
    /** Options for every device this part opens ({@code --device-option}). */
    private Map<String, String> deviceOptions = Map.of();

    /** Opens this part's devices with {@code options} (the provider's device options). */
    StorageDemo withDeviceOptions(Map<String, String> options) {
        this.deviceOptions = Map.copyOf(options);
        return this;
    }
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

    /** The long the generated file holds at 8-byte-aligned offset {@code p}. */
    static long pattern(long p) {
        return (p + 0x1234_5678L) * 0x9E3779B97F4A7C15L;
    }

    /** What the client writes at offset {@code p}. */
    static long written(long p) {
        return pattern(p) ^ WRITE_SEED;
    }

    /** The server: one QP, its pool (registered with its PD and the ring), the ring and the file. */
    private final class Server {
        final QueuePair qp;
        final CompletionQueue cq;
        final BufferPool pool;
        final PoolRegistration rdma;
        final IoRing ring;
        final IoRegistration fixed;
        final IoFile file;
        final PooledBuffer[] recvs;
        final PooledBuffer[] replies;
        final PooledBuffer[] blocks;
        final int[] op;
        final long[] fileOffset;
        final int[] length;
        final long[] clientAddr;
        final int[] clientKey;
        final long[] ioAddr;
        final long[] rdmaAddr;
        /** Blocks whose RDMA WRITE is under way, by the index in its work request id. */
        final PooledBuffer[] sending;
        final int[] freeSending;
        int freeSendingTop;
        final int[] importedKeys = new int[64];
        final WorkRequest wr = new WorkRequest(1);
        final WorkRequest recv = new WorkRequest(1);
        final WorkCompletion[] wcs = {new WorkCompletion(), new WorkCompletion(), new WorkCompletion(), new WorkCompletion()};
        final IoCompletionHandler onIo = this::ioDone;
        long sameMemory;

        Server(QueuePair qp, CompletionQueue cq,
               ProtectionDomain pd, Path path) {
            this.qp = qp;
            this.cq = cq;
            this.pool = BufferPool.builder().name("storage-server").pageAligned().chunkSize(4 << 20)
                    .largestClass(Math.max(4 << 20, block)).build();
            this.rdma = pd.register(pool, Access.LOCAL_WRITE);
            this.ring = IoRing.builder().entries(Integer.highestOneBit(Math.max(depth, 2) * 2 - 1)).build();
            this.fixed = ring.register(pool);
            IoFile f;
            try {
                f = ring.openFile(path, IoFile.Mode.READ, IoFile.Mode.WRITE, IoFile.Mode.DIRECT);
            } catch (RdmaException e) {
                if (e.errno() != Errno.EINVAL) {
                    throw e;
                }
                f = ring.openFile(path, IoFile.Mode.READ, IoFile.Mode.WRITE); // a file system without O_DIRECT (tmpfs)
            }
            this.file = f;
            this.recvs = new PooledBuffer[depth + 1];
            this.replies = new PooledBuffer[depth];
            this.blocks = new PooledBuffer[depth];
            this.op = new int[depth];
            this.fileOffset = new long[depth];
            this.length = new int[depth];
            this.clientAddr = new long[depth];
            this.clientKey = new int[depth];
            this.ioAddr = new long[depth];
            this.rdmaAddr = new long[depth];
            this.sending = new PooledBuffer[2 * depth];
            this.freeSending = new int[2 * depth];
            for (int i = 0; i < freeSending.length; i++) {
                freeSending[i] = i;
            }
            this.freeSendingTop = freeSending.length;
            for (int i = 0; i < replies.length; i++) {
                replies[i] = pool.allocate(MSG);
            }
            for (int i = 0; i < recvs.length; i++) {
                recvs[i] = pool.allocate(KEY_MSG);
                postRecv(i);
            }
        }

        void postRecv(int i) {
            recv.reset().wrId(WR_RECV | i).addSge(recvs[i].address(), KEY_MSG, rdma.lkey(recvs[i]));
            qp.postRecv(recv);
        }

        /** One pass: the CQ, then the ring. */
        void step() {
            int n = cq.poll(wcs);
            for (int i = 0; i < n; i++) {
                completion(wcs[i]);
            }
            ring.submit();
            ring.poll(onIo);
        }

        void completion(WorkCompletion wc) {
            if (wc.status() != WcStatus.SUCCESS) {
                throw new IllegalStateException("server: " + wc);
            }
            long kind = wc.wrId() & ~SLOT_MASK;
            int slot = (int) (wc.wrId() & SLOT_MASK);
            if (kind == WR_RECV) {
                request(recvs[slot].segment());
                postRecv(slot);
            } else if (kind == WR_READ) {
                // the client's block is in our buffer: to the file from the same memory
                ioAddr[slot] = blocks[slot].address();
                ring.writeFixed(file, blocks[slot], 0, length[slot], fileOffset[slot], slot);
            } else if (kind == WR_WRITE) {
                sending[slot].close(); // the transport is done with it (slot: its index in sending)
                sending[slot] = null;
                freeSending[freeSendingTop++] = slot;
            }
        }

        void request(MemorySegment m) {
            int kind = m.get(ValueLayout.JAVA_INT, 0);
            int slot = m.get(ValueLayout.JAVA_INT, 4);
            if (kind == OP_KEY) {
                int len = m.get(ValueLayout.JAVA_INT, 8);
                importedKeys[slot] = qp.importRemoteKey(m.asSlice(16, len));
                return;
            }
            op[slot] = kind;
            fileOffset[slot] = m.get(ValueLayout.JAVA_LONG, 8);
            length[slot] = m.get(ValueLayout.JAVA_INT, 16);
            clientKey[slot] = importedKeys[m.get(ValueLayout.JAVA_INT, 20)];
            clientAddr[slot] = m.get(ValueLayout.JAVA_LONG, 24);
            if (blocks[slot] != null) {
                throw new IllegalStateException("server: a call on slot " + slot + " while its last block is still out");
            }
            PooledBuffer b = pool.allocate(length[slot]);
            blocks[slot] = b;
            if (kind == OP_READ) {
                ioAddr[slot] = b.address();
                ring.readFixed(file, b, 0, length[slot], fileOffset[slot], slot);
            } else {
                rdmaAddr[slot] = b.address();
                wr.reset().wrId(WR_READ | slot).opcode(Opcode.RDMA_READ).addSge(b.address(), length[slot], rdma.lkey(b))
                        .remote(clientAddr[slot], clientKey[slot]);
                qp.postSend(wr);
            }
        }

        void ioDone(long slotId, int result) {
            int slot = (int) slotId;
            PooledBuffer b = blocks[slot];
            if (result != length[slot]) {
                throw new IllegalStateException("server: " + (op[slot] == OP_READ ? "READ_FIXED" : "WRITE_FIXED") + " of "
                        + length[slot] + " B at " + fileOffset[slot] + " returned " + result
                        + (result < 0 ? " (" + IoRing.errno(result) + ")" : ""));
            }
            if (op[slot] == OP_READ) {
                // the block leaves from the buffer READ_FIXED filled: no copy between file and wire
                long source = b.address();
                // the block is the transport's until the WRITE completes, which may be after the
                // client's next call on this slot arrives: it moves out of the slot
                int out = freeSending[--freeSendingTop];
                sending[out] = b;
                blocks[slot] = null;
                wr.reset().wrId(WR_WRITE | out).opcode(Opcode.RDMA_WRITE).addSge(source, result, rdma.lkey(b))
                        .remote(clientAddr[slot], clientKey[slot]);
                qp.postSend(wr);
                countSameMemory(slot, source, b);
            } else {
                countSameMemory(slot, rdmaAddr[slot], b);
                b.close();
                blocks[slot] = null;
            }
            MemorySegment r = replies[slot].segment();
            r.set(ValueLayout.JAVA_INT, 0, slot);
            r.set(ValueLayout.JAVA_INT, 4, result);
            wr.reset().wrId(WR_REPLY | slot).opcode(Opcode.SEND).addSge(replies[slot].address(), 8, rdma.lkey(replies[slot]));
            qp.postSend(wr);
        }

        /**
         * Counts a block whose RDMA side and file side used the same memory: the address the ring
         * did its fixed I/O at is the address of the RDMA work request, in a chunk registered with
         * both the ring (a fixed-buffer index) and the PD (a memory region).
         */
        void countSameMemory(int slot, long rdmaAddress, PooledBuffer b) {
            if (ioAddr[slot] == rdmaAddress && fixed.bufferIndex(b.chunk()) >= 0 && rdma.region(b) != null) {
                sameMemory++;
            }
        }

        /** Polls until every block's RDMA WRITE completed (the client may have its reply first). */
        void drain() {
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (Arrays.stream(blocks).anyMatch(Objects::nonNull)
                    || Arrays.stream(sending).anyMatch(Objects::nonNull)) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("server: blocks still out after 10 s");
                }
                step();
            }
        }

        LeakReport close() {
            for (PooledBuffer b : recvs) {
                b.close();
            }
            for (PooledBuffer b : replies) {
                b.close();
            }
            file.close();
            fixed.close();
            ring.close();
            LeakReport report = pool.closeAndReport();
            rdma.close();
            return report;
        }
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
                    b.putLong(i, pattern(pos + i));
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
        Server server = null;
        BufferPool clientPool = null;
        PoolRegistration clientReg = null;
        try {
            server = new Server(pair.qpA, pair.cqA, pair.pdA, path);
            clientPool = BufferPool.builder().name("storage-client").pageAligned().chunkSize(Math.max(4 << 20, 2L * depth * block))
                    .largestClass(Math.max(4 << 20, block)).build();
            clientReg = pair.pdB.register(clientPool, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ);
            Client client = new Client(pair, clientPool, clientReg);
            long start = System.nanoTime();
            client.phase(OP_READ, reads, server);
            long readNs = System.nanoTime() - start;
            long w0 = System.nanoTime();
            client.phase(OP_WRITE, writes, server);
            long writeNs = System.nanoTime() - w0;
            client.phase(OP_READ, -1, server); // the written blocks, back through the pipeline
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

    /** The client: a slot per call in flight, each with a block of registered memory. */
    private final class Client {
        final SoftPair pair;
        final PoolRegistration reg;
        final PooledBuffer[] data;
        final PooledBuffer[] sends;
        final PooledBuffer[] recvs;
        final long[] started;
        final long[] offsets;
        final int[] kinds;
        final WorkRequest wr = new WorkRequest(1);
        final WorkRequest recv = new WorkRequest(1);
        final WorkCompletion[] wcs = {new WorkCompletion(), new WorkCompletion(), new WorkCompletion(), new WorkCompletion()};
        final Histogram readLat = new Histogram(3);
        final Histogram writeLat = new Histogram(3);
        final long[] writtenOffsets;
        final SplittableRandom rnd = new SplittableRandom(7);
        final long blocks;
        int writtenCount;
        long readsDone;
        long writesDone;
        long verifyReads;
        long bytesChecked;
        Server server;

        Client(SoftPair pair, BufferPool pool, PoolRegistration reg) {
            this.pair = pair;
            this.reg = reg;
            this.data = new PooledBuffer[depth];
            this.sends = new PooledBuffer[depth];
            this.recvs = new PooledBuffer[depth];
            this.started = new long[depth];
            this.offsets = new long[depth];
            this.kinds = new int[depth];
            this.blocks = fileBytes / block;
            this.writtenOffsets = new long[(int) Math.min(writes, blocks)];
            for (int i = 0; i < depth; i++) {
                data[i] = pool.allocate(block);
                sends[i] = pool.allocate(KEY_MSG);
                recvs[i] = pool.allocate(MSG);
            }
            // a receive buffer per call in flight, each posted again once its reply is read: a reply
            // lands in whichever receive is first, not in its call's
            for (int i = 0; i < depth; i++) {
                postRecv(i);
            }
        }

        private void postRecv(int buffer) {
            recv.reset().wrId(buffer).addSge(recvs[buffer].address(), MSG, reg.lkey(recvs[buffer]));
            pair.qpB.postRecv(recv);
        }

        long serverSameMemory() {
            return server.sameMemory;
        }

        /** Runs {@code count} calls of one kind ({@code -1}: read back every written block), {@code depth} at once. */
        void phase(int kind, long count, Server s) {
            this.server = s;
            if (readsDone + writesDone + verifyReads == 0) {
                sendKeys(s);
            }
            boolean verify = count < 0;
            long total = verify ? writtenCount : count;
            long issued = 0;
            long done = 0;
            int inFlight = 0;
            boolean[] busy = new boolean[depth];
            while (done < total) {
                for (int slot = 0; slot < depth && issued < total; slot++) {
                    if (!busy[slot]) {
                        long off = verify ? writtenOffsets[(int) issued] : kind == OP_WRITE ? nextWriteOffset(issued)
                                : rnd.nextLong(blocks) * block;
                        issue(slot, kind, off);
                        busy[slot] = true;
                        issued++;
                        inFlight++;
                    }
                }
                s.step();
                int n = pair.cqB.poll(wcs);
                for (int i = 0; i < n; i++) {
                    WorkCompletion wc = wcs[i];
                    if (wc.status() != WcStatus.SUCCESS) {
                        throw new IllegalStateException("client: " + wc);
                    }
                    if (wc.opcode() == Opcode.RECV) {
                        // receives are consumed in the order posted, replies come in the order served:
                        // the reply names its call
                        int buffer = (int) wc.wrId();
                        MemorySegment reply = recvs[buffer].segment();
                        int slot = reply.get(ValueLayout.JAVA_INT, 0);
                        int result = reply.get(ValueLayout.JAVA_INT, 4);
                        postRecv(buffer); // read out: the buffer takes the next reply
                        finish(slot, result, verify);
                        busy[slot] = false;
                        inFlight--;
                        done++;
                    }
                }
            }
        }

        private long nextWriteOffset(long i) {
            // distinct blocks spread over the file, remembered for the read-back
            long off = ((i * 7919) % blocks) * block;
            if (writtenCount < writtenOffsets.length) {
                writtenOffsets[writtenCount++] = off;
            }
            return off;
        }

        private void sendKeys(Server s) {
            // one key per client chunk, sent once: the server imports it and names it by index
            List<MemoryRegion> regions = new ArrayList<>();
            for (PooledBuffer d : data) {
                MemoryRegion mr = reg.region(d);
                if (!regions.contains(mr)) {
                    regions.add(mr);
                }
            }
            for (int k = 0; k < regions.size(); k++) {
                byte[] key = regions.get(k).exportRemoteKey();
                MemorySegment m = sends[0].segment();
                m.set(ValueLayout.JAVA_INT, 0, OP_KEY);
                m.set(ValueLayout.JAVA_INT, 4, k);
                m.set(ValueLayout.JAVA_INT, 8, key.length);
                MemorySegment.copy(MemorySegment.ofArray(key), 0, m, 16, key.length);
                wr.reset().wrId(1L << 40).opcode(Opcode.SEND).addSge(sends[0].address(), 16 + key.length, reg.lkey(sends[0]));
                pair.qpB.postSend(wr);
                int got = 0;
                while (got == 0) {
                    s.step();
                    got = pair.cqB.poll(wcs);
                }
                s.step();
            }
            keyIndex = new int[depth];
            for (int i = 0; i < depth; i++) {
                keyIndex[i] = regions.indexOf(reg.region(data[i]));
            }
        }

        int[] keyIndex;

        private void issue(int slot, int kind, long off) {
            PooledBuffer d = data[slot];
            MemorySegment seg = d.segment();
            if (kind == OP_WRITE) {
                for (int i = 0; i < block; i += 8) {
                    seg.set(ValueLayout.JAVA_LONG, i, written(off + i));
                }
            } else {
                seg.fill((byte) 0);
            }
            MemorySegment m = sends[slot].segment();
            m.set(ValueLayout.JAVA_INT, 0, kind);
            m.set(ValueLayout.JAVA_INT, 4, slot);
            m.set(ValueLayout.JAVA_LONG, 8, off);
            m.set(ValueLayout.JAVA_INT, 16, block);
            m.set(ValueLayout.JAVA_INT, 20, keyIndex[slot]);
            m.set(ValueLayout.JAVA_LONG, 24, d.address());
            offsets[slot] = off;
            kinds[slot] = kind;
            started[slot] = System.nanoTime();
            wr.reset().wrId(2L << 40 | slot).opcode(Opcode.SEND).addSge(sends[slot].address(), 32, reg.lkey(sends[slot]));
            pair.qpB.postSend(wr);
        }

        private void finish(int slot, int result, boolean verify) {
            long ns = System.nanoTime() - started[slot];
            if (result != block) {
                throw new IllegalStateException("client: call on block at " + offsets[slot] + " answered " + result);
            }
            if (kinds[slot] == OP_WRITE) {
                writeLat.recordValue(ns / 1000);
                writesDone++;
                return;
            }
            readLat.recordValue(ns / 1000);
            MemorySegment seg = data[slot].segment();
            long off = offsets[slot];
            for (int i = 0; i < block; i += 8) {
                long want = verify ? written(off + i) : pattern(off + i);
                if (seg.get(ValueLayout.JAVA_LONG, i) != want) {
                    long got = seg.get(ValueLayout.JAVA_LONG, i);
                    throw new IllegalStateException("client: block at " + off + " differs at byte " + i + ": got 0x"
                            + Long.toHexString(got) + ", want 0x" + Long.toHexString(want) + (verify ? " (read back)" : ""));
                }
            }
            bytesChecked += block;
            if (verify) {
                verifyReads++;
            } else {
                readsDone++;
            }
        }

        /** The written blocks straight from the file, the rest of the file as generated. */
        boolean checkFile(Path path) throws IOException {
            Set<Long> writtenSet = new HashSet<>();
            for (int i = 0; i < writtenCount; i++) {
                writtenSet.add(writtenOffsets[i]);
            }
            try (FileChannel ch = FileChannel.open(path, StandardOpenOption.READ)) {
                ByteBuffer b = ByteBuffer.allocateDirect(block).order(ByteOrder.nativeOrder());
                for (long off = 0; off + block <= fileBytes; off += block) {
                    b.clear();
                    while (b.hasRemaining() && ch.read(b, off + b.position()) > 0) {
                        // fill
                    }
                    boolean w = writtenSet.contains(off);
                    for (int i = 0; i < block; i += 8) {
                        if (b.getLong(i) != (w ? written(off + i) : pattern(off + i))) {
                            return false;
                        }
                    }
                }
            }
            return true;
        }

        void close() {
            for (int i = 0; i < depth; i++) {
                data[i].close();
                sends[i].close();
                recvs[i].close();
            }
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
