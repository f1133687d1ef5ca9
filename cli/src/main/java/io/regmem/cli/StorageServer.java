package io.regmem.cli;

import static io.regmem.cli.StorageProtocol.KEY_MSG;
import static io.regmem.cli.StorageProtocol.MSG;
import static io.regmem.cli.StorageProtocol.OP_KEY;
import static io.regmem.cli.StorageProtocol.OP_READ;

import io.regmem.core.BufferPool;
import io.regmem.core.Errno;
import io.regmem.core.LeakReport;
import io.regmem.core.PooledBuffer;
import io.regmem.core.RdmaException;
import io.regmem.registration.Access;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.Opcode;
import io.regmem.registration.PoolRegistration;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.QueuePair;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import io.regmem.registration.uring.IoCompletionHandler;
import io.regmem.registration.uring.IoFile;
import io.regmem.registration.uring.IoRegistration;
import io.regmem.registration.uring.IoRing;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Objects;

/**
 * The storage demo's server: one QP, its pool (registered with its PD and with the ring at once),
 * the ring and the file. A read call is {@code READ_FIXED} into a pooled buffer, then an RDMA WRITE
 * from that buffer to the client; a write call is an RDMA READ from the client into a pooled buffer,
 * then {@code WRITE_FIXED} from it; each call ends with a SEND of its {@link StorageProtocol reply}.
 */
final class StorageServer {
    // work request ids: kind in the high bits, slot in the low
    private static final long WR_RECV = 1L << 40;
    private static final long WR_WRITE = 2L << 40;
    private static final long WR_READ = 3L << 40;
    private static final long WR_REPLY = 4L << 40;
    private static final long SLOT_MASK = (1L << 40) - 1;

    final int block;
    final int depth;
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

    /** A server of {@code depth} calls at once, blocks of up to {@code block} bytes, on {@code qp}. */
    StorageServer(QueuePair qp, CompletionQueue cq, ProtectionDomain pd, Path path, int block, int depth) {
        this.block = block;
        this.depth = depth;
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
