package io.regmem.cli;

import static io.regmem.cli.StorageProtocol.KEY_MSG;
import static io.regmem.cli.StorageProtocol.MSG;
import static io.regmem.cli.StorageProtocol.OP_KEY;
import static io.regmem.cli.StorageProtocol.OP_WRITE;
import static io.regmem.cli.StorageProtocol.pattern;
import static io.regmem.cli.StorageProtocol.written;

import io.regmem.core.BufferPool;
import io.regmem.core.PooledBuffer;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.Opcode;
import io.regmem.registration.PoolRegistration;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;
import org.HdrHistogram.Histogram;

/**
 * The storage demo's client: a slot per call in flight, each with a block of registered memory it
 * sends the server the address of. It checks every byte it reads, remembers the blocks it wrote and
 * reads them back, and at the end checks the file itself.
 */
final class StorageClient {
    final long fileBytes;
    final int block;
    final int depth;
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
    StorageServer server;

    /** A client of {@code depth} calls at once over {@code pair}'s QP B, its blocks from {@code pool}. */
    StorageClient(SoftPair pair, BufferPool pool, PoolRegistration reg, long fileBytes, int block, int depth, long writes) {
        this.fileBytes = fileBytes;
        this.block = block;
        this.depth = depth;
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
    void phase(int kind, long count, StorageServer s) {
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

    private void sendKeys(StorageServer s) {
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
