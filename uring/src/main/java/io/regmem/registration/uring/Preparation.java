package io.regmem.registration.uring;

import static io.regmem.registration.uring.UringLayout.*;

import io.regmem.core.Errno;
import io.regmem.core.PooledBuffer;
import io.regmem.core.RdmaException;

/**
 * Operation preparation of a ring: the checks every operation passes before anything is prepared
 * (the file, the buffer's registered chunk, the range, {@code O_DIRECT} alignment, room in the
 * queues), then the entry written and the operation begun ({@link Operations}); cancels and taking
 * back what was never submitted. Owner thread only, as the ring (which checks it); allocates nothing.
 */
final class Preparation {
    private final IoRing ring;
    private final SubmissionQueue sq;
    private final Operations ops;
    private final FixedBuffers buffers;
    private final int capacity;

    Preparation(IoRing ring, SubmissionQueue sq, Operations ops, FixedBuffers buffers) {
        this.ring = ring;
        this.sq = sq;
        this.ops = ops;
        this.buffers = buffers;
        this.capacity = sq.entries;
    }

    /** Checks and prepares a READ or WRITE (fixed or plain) of {@code buffer}'s memory. */
    void rw(byte op, IoFile file, PooledBuffer buffer, long offset, int length, long fileOffset, long userData, String what) {
        boolean writesFile = op == OP_WRITE_FIXED || op == OP_WRITE;
        checkFile(file, writesFile, what);
        if (buffer == null) {
            throw new RdmaException(Errno.EINVAL, ring + "." + what + ": buffer is null");
        }
        FixedSlot s = slotOf(buffer, what);
        long base = buffer.address(); // EBADF for a freed buffer
        if (length <= 0) {
            throw new RdmaException(Errno.EINVAL, ring + "." + what + ": length " + length + " is not positive");
        }
        if (offset < 0 || offset > buffer.capacity() - length) {
            throw new RdmaException(Errno.EFAULT, ring + "." + what + ": range [" + offset + ", +" + length
                    + ") lies outside the buffer's " + buffer.capacity() + " bytes at 0x" + Long.toHexString(base));
        }
        if (fileOffset < 0) {
            throw new RdmaException(Errno.EINVAL, ring + "." + what + ": file offset " + fileOffset + " is negative");
        }
        long address = base + offset;
        if (file.direct && ((address & (file.memoryAlignment - 1)) != 0 || (length & (file.offsetAlignment - 1)) != 0
                || (fileOffset & (file.offsetAlignment - 1)) != 0)) {
            throw new RdmaException(Errno.EINVAL, ring + "." + what + ": O_DIRECT I/O on " + file + " must be aligned: address 0x"
                    + Long.toHexString(address) + " to " + file.memoryAlignment + ", length " + length + " and file offset "
                    + fileOffset + " to " + file.offsetAlignment + " bytes");
        }
        int id = takeOp(what);
        long sqe = nextSqe();
        buffer.pin(); // (EBADF if another thread freed it meanwhile: nothing prepared) unpinned when it completes
        boolean fixed = op == OP_READ_FIXED || op == OP_WRITE_FIXED;
        sq.write(sqe, op, file.sqeFlags, file.sqeFd, fileOffset, address, length, 0, id, fixed ? s.index : 0);
        commit(id, userData, s, buffer);
    }

    FixedSlot slotOf(PooledBuffer buffer, String what) {
        Object a = buffer.chunk().ioAttachment();
        if (!(a instanceof FixedSlot s) || s.ring != ring || s.removed) {
            String why = a instanceof FixedSlot s && s.ring == ring && s.failure != null
                    ? " (its registration failed: " + s.failure.getMessage() + ")" : " (register its pool: ring.register(pool))";
            throw new RdmaException(Errno.EFAULT, ring + "." + what + ": " + buffer + " is not in a chunk registered with this ring"
                    + why);
        }
        if (!s.registered) {
            buffers.runDeferred(); // registered by another thread's allocation: do it now
            if (!s.registered) {
                throw new RdmaException(Errno.EFAULT, ring + "." + what + ": " + s + " is not registered"
                        + (s.failure != null ? ": " + s.failure.getMessage() : ""));
            }
        }
        return s;
    }

    void checkFile(IoFile file, boolean writing, String what) {
        if (file == null) {
            throw new RdmaException(Errno.EINVAL, ring + "." + what + ": file is null");
        }
        if (file.ring != ring) {
            throw new RdmaException(Errno.EBADF, ring + "." + what + ": " + file + " belongs to another ring");
        }
        file.checkOpen(what);
        if (writing ? !file.writable : !file.readable && !what.equals("fsync")) {
            throw new RdmaException(Errno.EBADF, ring + "." + what + ": " + file + " is not open for "
                    + (writing ? "writing" : "reading"));
        }
    }

    int takeOp(String what) {
        int id = ops.peekFree();
        if (id < 0) {
            throw new RdmaException(Errno.EBUSY, ring + "." + what + ": " + capacity + " operations are prepared or in flight"
                    + " (the queue is full): submit and reap completions first");
        }
        return id;
    }

    long nextSqe() {
        if (sq.full()) {
            throw new RdmaException(Errno.EBUSY, ring + ": the submission queue is full (" + sq.entries + " entries); submit() first");
        }
        return sq.next();
    }

    void commit(int id, long userData, FixedSlot s, PooledBuffer buffer) {
        ops.begin(id, userData, s, buffer);
        sq.commit();
    }

    /** Prepares {@code fsync} of {@code file} ({@code fdatasync} when {@code dataOnly}). */
    void fsync(IoFile file, boolean dataOnly, long userData) {
        checkFile(file, false, "fsync");
        int id = takeOp("fsync");
        long sqe = nextSqe();
        sq.write(sqe, OP_FSYNC, file.sqeFlags, file.sqeFd, 0, 0, 0, dataOnly ? FSYNC_DATASYNC : 0, id, 0);
        commit(id, userData, null, null);
    }

    /** Prepares {@code IORING_OP_NOP}. */
    void nop(long userData) {
        int id = takeOp("nop");
        long sqe = nextSqe();
        sq.write(sqe, OP_NOP, (byte) 0, 0, 0, 0, 0, 0, id, 0);
        commit(id, userData, null, null);
    }

    /** Prepares a cancel of every operation whose user data is {@code userData}; EBUSY if the queue fills. */
    int cancels(long userData) {
        int n = 0;
        for (int id = 0; id < capacity; id++) {
            if (ops.isBusy(id) && ops.userData(id) == userData) {
                n += cancel(id, true) ? 1 : 0;
            }
        }
        return n;
    }

    /** Prepares a cancel of every operation on {@code s}, as far as the queue has room. */
    int cancelsOn(FixedSlot s) {
        int n = 0;
        for (int id = 0; id < capacity; id++) {
            if (ops.slot(id) == s && cancel(id, false)) {
                n++;
            }
        }
        return n;
    }

    /** Prepares a cancel of operation {@code id}; false (or EBUSY when {@code strict}) if the queue is full. */
    private boolean cancel(int id, boolean strict) {
        if (sq.full()) {
            if (strict) {
                throw new RdmaException(Errno.EBUSY, ring + ".cancel: the submission queue is full (" + sq.entries
                        + " entries); submit() first");
            }
            return false;
        }
        sq.write(sq.next(), OP_ASYNC_CANCEL, (byte) 0, -1, 0, id, 0, 0, IoRing.CANCEL_USER_DATA, 0);
        sq.commit();
        return true;
    }

    /** Prepares one cancel of everything in flight (closing); false if the queue has no room. */
    boolean cancelAll() {
        if (sq.full()) {
            return false;
        }
        sq.write(sq.next(), OP_ASYNC_CANCEL, (byte) 0, -1, 0, 0, 0, ASYNC_CANCEL_ANY, IoRing.CANCEL_USER_DATA, 0);
        sq.commit();
        return true;
    }

    /** Takes back the operations prepared and never submitted (their entries are still ours). */
    void dropPrepared() {
        while (sq.prepared > 0) {
            ops.end((int) sq.unprepare());
        }
    }
}
