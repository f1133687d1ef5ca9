package io.regmem.registration.uring;

import static io.regmem.registration.uring.UringLayout.*;

import io.regmem.core.BufferPool;
import io.regmem.core.Chunk;
import io.regmem.core.Errno;
import io.regmem.core.PooledBuffer;
import io.regmem.core.RdmaException;
import io.regmem.core.internal.Libc;
import io.regmem.core.internal.Unistd;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * An io_uring instance: a submission queue and a completion queue shared with the kernel, a
 * fixed-buffer table for pool chunks ({@link #register(BufferPool)}) and a fixed-file table for
 * files opened {@link IoFile.Mode#REGISTERED}
 * ({@link #openFile(Path, IoFile.Mode...)}).
 *
 * <h2>One thread</h2>
 * A ring belongs to the thread that built it, its owner, as the kernel's
 * {@code IORING_SETUP_SINGLE_ISSUER} makes it: only the owner prepares, submits, reaps, opens and
 * closes files and registers pools. Any other thread gets {@link Errno#EPERM} before anything
 * happens. Run one ring per I/O thread. A registered pool may still be used from any thread:
 * chunks its other threads add are registered by the owner at its next call (or when an operation
 * needs them), and chunks they release are retired by the owner (see {@link IoRegistration}). Those
 * threads never wait for the owner: a chunk they add and release before the owner's next call takes
 * no fixed-buffer slot and its memory goes back at once, so a busy owner never makes their
 * allocations fail.
 *
 * <h2>Operations</h2>
 * {@link #readFixed}, {@link #writeFixed}, {@link #read}, {@link #write} and {@link #fsync} each
 * prepare one submission-queue entry and return; {@link #submit()} hands every prepared entry to
 * the kernel with one system call (batching). {@link #poll(IoCompletionHandler)} delivers finished
 * operations without waiting; {@link #await(int, IoCompletionHandler)} submits and waits. A
 * failed I/O is a completion with a negative errno, never an exception. Bad input (a buffer not
 * in a registered chunk, a range past the buffer, misaligned {@code O_DIRECT} I/O, a closed file,
 * a full queue) is an {@link RdmaException} before anything is prepared. Preparing, submitting and
 * reaping allocate nothing.
 *
 * <h2>Setup</h2>
 * The ring asks for {@code SINGLE_ISSUER | DEFER_TASKRUN | TASKRUN_FLAG | SUBMIT_ALL} (completion
 * work runs only when the owner reaps), falls back to {@code COOP_TASKRUN | TASKRUN_FLAG |
 * SUBMIT_ALL}, then to none, as the kernel accepts; {@link #setupFlags()} says what it got. The
 * completion queue has twice the submission queue's entries; at most {@link #capacity()}
 * operations are prepared or in flight at once.
 */
public final class IoRing implements AutoCloseable {
    private static final VarHandle INT = ValueLayout.JAVA_INT.varHandle();
    /** Completion user data at or above this are tags of fixed buffers, not operations. */
    static final long TAG_BASE = 1L << 62;
    /** The user data of the ring's own cancel request at close. */
    private static final long CANCEL_USER_DATA = 1L << 61;

    private final Thread owner;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment capture;
    private final MemorySegment scratch;
    private final RingMemory mem;
    private final int fd;
    private final MemorySegment sq;
    private final MemorySegment cq;
    private final MemorySegment sqes;
    private final long sqHeadOff;
    private final long sqTailOff;
    private final long sqFlagsOff;
    private final int sqMask;
    private final int sqEntries;
    private final long cqHeadOff;
    private final long cqTailOff;
    private final long cqesOff;
    private final int cqMask;
    private final boolean taskrunFlag;
    private final boolean deferTaskrun;
    private int sqTail;
    private int cqHead;

    /** An id per prepared or in-flight operation (the SQE's user data). */
    private final Operations ops;
    private final int capacity;
    private int prepared;
    /** Completions reaped while the ring waited for itself (a chunk retiring), delivered first by poll. */
    private final CompletionStash stash;

    private final FixedBuffers buffers;
    private final FileTable files;
    private final List<IoRegistration> registrations = new CopyOnWriteArrayList<>();
    private volatile boolean closed;
    private long submitted;
    private long completed;

    /** Rings open in this JVM, for {@link #openRings()}. */
    private static final Set<IoRing> OPEN = ConcurrentHashMap.newKeySet();

    private IoRing(Builder b) {
        Libc.requireBound("io_uring");
        this.owner = Thread.currentThread();
        this.capture = arena.allocate(Libc.CAPTURE);
        this.scratch = arena.allocate(256, 8);
        try {
            this.mem = new RingMemory(arena, capture, b.entries, b.singleIssuer);
        } catch (RuntimeException e) {
            arena.close();
            throw e;
        }
        this.fd = mem.fd;
        this.sq = mem.sq;
        this.cq = mem.cq;
        this.sqes = mem.sqes;
        this.sqHeadOff = mem.sqHeadOff;
        this.sqTailOff = mem.sqTailOff;
        this.sqFlagsOff = mem.sqFlagsOff;
        this.sqMask = mem.sqMask;
        this.sqEntries = mem.sqEntries;
        this.cqHeadOff = mem.cqHeadOff;
        this.cqTailOff = mem.cqTailOff;
        this.cqesOff = mem.cqesOff;
        this.cqMask = mem.cqMask;
        this.taskrunFlag = (mem.setupFlags & SETUP_TASKRUN_FLAG) != 0;
        this.deferTaskrun = (mem.setupFlags & SETUP_DEFER_TASKRUN) != 0;
        this.sqTail = (int) INT.getAcquire(sq, sqTailOff);
        this.cqHead = (int) INT.getAcquire(cq, cqHeadOff);
        this.capacity = sqEntries;
        this.ops = new Operations(capacity);
        this.stash = new CompletionStash(capacity);
        this.buffers = new FixedBuffers(this, fd, capture, scratch, b.fixedBuffers);
        this.files = new FileTable(this, fd, arena, capture, scratch, b.fixedFiles);
        try {
            registerSparse(REGISTER_BUFFERS2, b.fixedBuffers, "fixed-buffer table");
            registerSparse(REGISTER_FILES2, b.fixedFiles, "fixed-file table");
        } catch (RuntimeException e) {
            unmapAndClose();
            throw e;
        }
        OPEN.add(this);
    }

    /** The rings open in this JVM now, described (a leak check: tests end with none). */
    public static List<String> openRings() {
        List<String> out = new ArrayList<>();
        for (IoRing r : OPEN) {
            out.add(r + " owned by '" + r.owner.getName() + "'");
        }
        return out;
    }

    // ---- building ------------------------------------------------------------------------------

    /** A builder with the defaults: 256 entries, 1,024 fixed buffers, 64 fixed files, single issuer. */
    public static Builder builder() {
        return new Builder();
    }

    /** A ring of {@code entries} submission-queue entries with the other defaults. */
    public static IoRing open(int entries) {
        return builder().entries(entries).build();
    }

    /** Options of an {@link IoRing}. */
    public static final class Builder {
        private int entries = 256;
        private int fixedBuffers = 1024;
        private int fixedFiles = 64;
        private boolean singleIssuer = true;

        private Builder() {
        }

        /** Submission-queue entries, a power of two from 1 to 32,768 (default 256). */
        public Builder entries(int n) {
            if (n < 1 || n > MAX_ENTRIES || Integer.bitCount(n) != 1) {
                throw new RdmaException(Errno.EINVAL, "IoRing.Builder.entries: " + n
                        + " is not a power of two from 1 to " + MAX_ENTRIES);
            }
            this.entries = n;
            return this;
        }

        /** Slots of the fixed-buffer table, one per pool chunk, 1 to 16,384 (default 1,024). */
        public Builder fixedBuffers(int n) {
            if (n < 1 || n > MAX_FIXED_BUFFERS) {
                throw new RdmaException(Errno.EINVAL, "IoRing.Builder.fixedBuffers: " + n
                        + " is outside 1.." + MAX_FIXED_BUFFERS + " (the kernel's limit per ring)");
            }
            this.fixedBuffers = n;
            return this;
        }

        /** Slots of the fixed-file table, 1 to 65,536 (default 64). */
        public Builder fixedFiles(int n) {
            if (n < 1 || n > 65536) {
                throw new RdmaException(Errno.EINVAL, "IoRing.Builder.fixedFiles: " + n + " is outside 1..65536");
            }
            this.fixedFiles = n;
            return this;
        }

        /**
         * Whether to ask for {@code SINGLE_ISSUER | DEFER_TASKRUN} (default true). The ring is
         * confined to its owner thread either way; false only changes how the kernel runs
         * completion work.
         */
        public Builder singleIssuer(boolean on) {
            this.singleIssuer = on;
            return this;
        }

        /**
         * Sets up the ring on the calling thread, which becomes its owner.
         *
         * @throws RdmaException {@link Errno#ENOSYS} or {@link Errno#EPERM} when io_uring is not
         *                       available (kernel, sysctl {@code kernel.io_uring_disabled}, a seccomp
         *                       filter); {@link Errno#ENOMEM} naming {@code RLIMIT_MEMLOCK} when the
         *                       locked-memory limit is too small
         */
        public IoRing build() {
            return new IoRing(this);
        }
    }

    private void registerSparse(int opcode, int n, String what) {
        MemorySegment r = scratch;
        r.fill((byte) 0);
        r.set(ValueLayout.JAVA_INT, RSRC_REGISTER_NR, n);
        r.set(ValueLayout.JAVA_INT, RSRC_REGISTER_FLAGS, RSRC_REGISTER_SPARSE);
        long rc = Unistd.syscall(capture, SYS_IO_URING_REGISTER, fd, opcode, r.address(), RSRC_REGISTER_SIZE, 0, 0);
        if (rc < 0) {
            int errno = (int) -rc;
            if (errno == Errno.ENOMEM.value()) {
                throw RingMemory.memlock("registering a sparse " + what + " of " + n + " slots", -1);
            }
            throw new RdmaException(Errno.of(errno), this + ": registering a sparse " + what + " of " + n
                    + " slots failed with errno " + errno);
        }
    }

    // ---- queries -------------------------------------------------------------------------------

    /** The thread that owns the ring. */
    public Thread owner() {
        return owner;
    }

    /** Operations that may be prepared or in flight at once (the submission queue's entries). */
    public int capacity() {
        return capacity;
    }

    /** Operations prepared and not yet submitted. */
    public int prepared() {
        return prepared;
    }

    /** Operations prepared or submitted whose completion has not been delivered. */
    public int inFlight() {
        return ops.inFlight() + stash.size();
    }

    /** Operations submitted to the kernel since the ring was built. */
    public long submitted() {
        return submitted;
    }

    /** Completions delivered since the ring was built. */
    public long completed() {
        return completed;
    }

    /** The setup flags the kernel accepted, by name ({@code "SINGLE_ISSUER|DEFER_TASKRUN|..."}). */
    public String setupFlags() {
        return mem.flagNames();
    }

    /**
     * Fixed-buffer slots in use: one per chunk the owner registered and has not retired, plus chunks
     * that left their pool and are still named by an operation in flight. A chunk born on another
     * thread takes a slot at the owner's next call, and none if it leaves before.
     */
    public int fixedBuffersInUse() {
        return buffers.inUse();
    }

    /** Files open on this ring. */
    public int openFiles() {
        return files.open();
    }

    /** True once closed. */
    public boolean isClosed() {
        return closed;
    }

    /** The {@link Errno} of a negative completion result (an unknown errno is {@link Errno#EIO}), or null for a success. */
    public static Errno errno(int result) {
        return result >= 0 ? null : Errno.of(-result);
    }

    // ---- files and pools -----------------------------------------------------------------------

    /**
     * Opens a file; with {@link IoFile.Mode#REGISTERED} it also takes a slot of the fixed-file table.
     *
     * @param modes at least one of {@link IoFile.Mode#READ} and {@link IoFile.Mode#WRITE}
     * @throws RdmaException {@link Errno#EINVAL} for modes without READ or WRITE, or {@code DIRECT}
     *                       on a file system without {@code O_DIRECT}; the errno of {@code open}
     *                       ({@link Errno#ENOENT}, {@link Errno#EACCES}...); {@link Errno#ENOMEM}
     *                       when every fixed-file slot is taken (REGISTERED)
     */
    public IoFile openFile(Path path, IoFile.Mode... modes) {
        checkOwner("openFile");
        if (path == null || modes == null || Arrays.asList(modes).contains(null)) {
            throw new RdmaException(Errno.EINVAL, this + ".openFile: path and modes must not be null");
        }
        return files.open(path, modes);
    }

    void closeFile(IoFile f) {
        if (f.closed) {
            return;
        }
        if (closed) {
            f.closed = true;
            return;
        }
        checkOwner("IoFile.close");
        files.close(f);
    }

    /**
     * Registers every chunk of {@code pool}, present and future, in the fixed-buffer table: a slot
     * per chunk, at its birth. Closing the returned registration (or the ring) clears them.
     *
     * @throws RdmaException {@link Errno#EBUSY} if the pool is registered with a ring already;
     *                       {@link Errno#EINVAL} for chunks over 1 GiB (io_uring's limit per
     *                       buffer); {@link Errno#ENOMEM} when the slots run out or the memlock limit
     *                       is reached (nothing stays registered then)
     */
    public IoRegistration register(BufferPool pool) {
        checkOwner("register");
        if (pool == null) {
            throw new RdmaException(Errno.EINVAL, this + ".register: pool is null");
        }
        IoRegistration r = new IoRegistration(this, pool);
        registrations.add(r);
        try {
            pool.addChunkListener(r);
        } catch (RuntimeException e) {
            registrations.remove(r);
            throw e;
        }
        return r;
    }

    void forget(IoRegistration r) {
        registrations.remove(r);
    }

    FixedSlot addChunk(IoRegistration reg, Chunk chunk) {
        return buffers.add(reg, chunk);
    }

    void removeChunk(FixedSlot s, Runnable hold) {
        buffers.remove(s, hold);
    }

    /** True on the owner thread. */
    boolean onOwner() {
        return Thread.currentThread() == owner;
    }

    // ---- operations ----------------------------------------------------------------------------

    /**
     * Prepares {@code READ_FIXED}: {@code length} bytes of {@code file} at {@code fileOffset} into
     * {@code buffer} at {@code offset}, through the buffer's fixed-buffer index.
     *
     * @throws RdmaException before anything is prepared: {@link Errno#EPERM} off the owner thread;
     *                       {@link Errno#EBADF} for a closed ring or file, a file not opened for
     *                       reading, or a freed buffer; {@link Errno#EFAULT} for a buffer not in a
     *                       chunk registered with this ring or a range past the buffer;
     *                       {@link Errno#EINVAL} for misaligned {@code O_DIRECT} I/O or a negative
     *                       offset; {@link Errno#EBUSY} when {@link #capacity()} operations are
     *                       prepared or in flight
     */
    public void readFixed(IoFile file, PooledBuffer buffer, long offset, int length, long fileOffset, long userData) {
        prepareRw(OP_READ_FIXED, file, buffer, offset, length, fileOffset, userData, "readFixed");
    }

    /** Prepares {@code WRITE_FIXED}: the mirror of {@link #readFixed}, from the buffer into the file. */
    public void writeFixed(IoFile file, PooledBuffer buffer, long offset, int length, long fileOffset, long userData) {
        prepareRw(OP_WRITE_FIXED, file, buffer, offset, length, fileOffset, userData, "writeFixed");
    }

    /**
     * Prepares a plain {@code READ} into the same memory without its fixed-buffer index (the kernel
     * pins the pages for each I/O); same rules as {@link #readFixed}: the buffer must be in a pool
     * registered with this ring, so that its memory outlives the I/O.
     */
    public void read(IoFile file, PooledBuffer buffer, long offset, int length, long fileOffset, long userData) {
        prepareRw(OP_READ, file, buffer, offset, length, fileOffset, userData, "read");
    }

    /** Prepares a plain {@code WRITE}: the mirror of {@link #read}. */
    public void write(IoFile file, PooledBuffer buffer, long offset, int length, long fileOffset, long userData) {
        prepareRw(OP_WRITE, file, buffer, offset, length, fileOffset, userData, "write");
    }

    /**
     * Prepares {@code fsync} of {@code file} ({@code fdatasync} when {@code dataOnly}).
     *
     * @throws RdmaException as {@link #readFixed} for the ring, the file and the queue
     */
    public void fsync(IoFile file, boolean dataOnly, long userData) {
        checkOwner("fsync");
        checkFile(file, false, "fsync");
        int id = takeOp("fsync");
        long sqe = nextSqe();
        writeSqe(sqe, OP_FSYNC, file.sqeFlags, file.sqeFd, 0, 0, 0, dataOnly ? FSYNC_DATASYNC : 0, id, 0);
        commit(id, userData, null, null);
    }

    /**
     * Prepares {@code IORING_OP_NOP}: an operation that completes with result 0 without doing
     * anything (a wake-up, or the ring's own overhead measured alone).
     *
     * @throws RdmaException {@link Errno#EPERM} off the owner thread, {@link Errno#EBADF} once
     *                       closed, {@link Errno#EBUSY} when the queue is full
     */
    public void nop(long userData) {
        checkOwner("nop");
        int id = takeOp("nop");
        long sqe = nextSqe();
        writeSqe(sqe, OP_NOP, (byte) 0, 0, 0, 0, 0, 0, id, 0);
        commit(id, userData, null, null);
    }

    private void prepareRw(byte op, IoFile file, PooledBuffer buffer, long offset, int length, long fileOffset,
            long userData, String what) {
        checkOwner(what);
        boolean writesFile = op == OP_WRITE_FIXED || op == OP_WRITE;
        checkFile(file, writesFile, what);
        if (buffer == null) {
            throw new RdmaException(Errno.EINVAL, this + "." + what + ": buffer is null");
        }
        FixedSlot s = slotOf(buffer, what);
        long base = buffer.address(); // EBADF for a freed buffer
        if (length <= 0) {
            throw new RdmaException(Errno.EINVAL, this + "." + what + ": length " + length + " is not positive");
        }
        if (offset < 0 || offset > buffer.capacity() - length) {
            throw new RdmaException(Errno.EFAULT, this + "." + what + ": range [" + offset + ", +" + length
                    + ") lies outside the buffer's " + buffer.capacity() + " bytes at 0x" + Long.toHexString(base));
        }
        if (fileOffset < 0) {
            throw new RdmaException(Errno.EINVAL, this + "." + what + ": file offset " + fileOffset + " is negative");
        }
        long address = base + offset;
        if (file.direct && ((address & (file.memoryAlignment - 1)) != 0 || (length & (file.offsetAlignment - 1)) != 0
                || (fileOffset & (file.offsetAlignment - 1)) != 0)) {
            throw new RdmaException(Errno.EINVAL, this + "." + what + ": O_DIRECT I/O on " + file + " must be aligned: address 0x"
                    + Long.toHexString(address) + " to " + file.memoryAlignment + ", length " + length + " and file offset "
                    + fileOffset + " to " + file.offsetAlignment + " bytes");
        }
        int id = takeOp(what);
        long sqe = nextSqe();
        buffer.pin(); // (EBADF if another thread freed it meanwhile: nothing prepared) unpinned when it completes
        boolean fixed = op == OP_READ_FIXED || op == OP_WRITE_FIXED;
        writeSqe(sqe, op, file.sqeFlags, file.sqeFd, fileOffset, address, length, 0, id, fixed ? s.index : 0);
        commit(id, userData, s, buffer);
    }

    private FixedSlot slotOf(PooledBuffer buffer, String what) {
        Object a = buffer.chunk().ioAttachment();
        if (!(a instanceof FixedSlot s) || s.ring != this || s.removed) {
            String why = a instanceof FixedSlot s && s.ring == this && s.failure != null
                    ? " (its registration failed: " + s.failure.getMessage() + ")" : " (register its pool: ring.register(pool))";
            throw new RdmaException(Errno.EFAULT, this + "." + what + ": " + buffer + " is not in a chunk registered with this ring"
                    + why);
        }
        if (!s.registered) {
            buffers.runDeferred(); // registered by another thread's allocation: do it now
            if (!s.registered) {
                throw new RdmaException(Errno.EFAULT, this + "." + what + ": " + s + " is not registered"
                        + (s.failure != null ? ": " + s.failure.getMessage() : ""));
            }
        }
        return s;
    }

    private void checkFile(IoFile file, boolean writing, String what) {
        if (file == null) {
            throw new RdmaException(Errno.EINVAL, this + "." + what + ": file is null");
        }
        if (file.ring != this) {
            throw new RdmaException(Errno.EBADF, this + "." + what + ": " + file + " belongs to another ring");
        }
        file.checkOpen(what);
        if (writing ? !file.writable : !file.readable && !what.equals("fsync")) {
            throw new RdmaException(Errno.EBADF, this + "." + what + ": " + file + " is not open for "
                    + (writing ? "writing" : "reading"));
        }
    }

    private int takeOp(String what) {
        int id = ops.peekFree();
        if (id < 0) {
            throw new RdmaException(Errno.EBUSY, this + "." + what + ": " + capacity + " operations are prepared or in flight"
                    + " (the queue is full): submit and reap completions first");
        }
        return id;
    }

    private long nextSqe() {
        int head = (int) INT.getAcquire(sq, sqHeadOff);
        if (sqTail - head >= sqEntries) {
            throw new RdmaException(Errno.EBUSY, this + ": the submission queue is full (" + sqEntries + " entries); submit() first");
        }
        return (long) (sqTail & sqMask) * SQE_SIZE;
    }

    private void writeSqe(long o, byte op, byte flags, int fileRef, long off, long addr, int len, int rwFlags, long userData,
            int bufIndex) {
        MemorySegment q = sqes;
        q.set(ValueLayout.JAVA_LONG, o, 0L);
        q.set(ValueLayout.JAVA_LONG, o + 40, 0L);
        q.set(ValueLayout.JAVA_LONG, o + 48, 0L);
        q.set(ValueLayout.JAVA_LONG, o + 56, 0L);
        q.set(ValueLayout.JAVA_BYTE, o + SQE_OPCODE, op);
        q.set(ValueLayout.JAVA_BYTE, o + SQE_FLAGS, flags);
        q.set(ValueLayout.JAVA_INT, o + SQE_FD, fileRef);
        q.set(ValueLayout.JAVA_LONG, o + SQE_OFF, off);
        q.set(ValueLayout.JAVA_LONG, o + SQE_ADDR, addr);
        q.set(ValueLayout.JAVA_INT, o + SQE_LEN, len);
        q.set(ValueLayout.JAVA_INT, o + SQE_RW_FLAGS, rwFlags);
        q.set(ValueLayout.JAVA_LONG, o + SQE_USER_DATA, userData);
        q.set(ValueLayout.JAVA_SHORT, o + SQE_BUF_INDEX, (short) bufIndex);
    }

    private void commit(int id, long userData, FixedSlot s, PooledBuffer buffer) {
        ops.begin(id, userData, s, buffer);
        prepared++;
        sqTail++;
    }

    /**
     * Hands every prepared operation to the kernel with one system call.
     *
     * @return the operations submitted
     * @throws RdmaException {@link Errno#EPERM} off the owner thread, {@link Errno#EBADF} once
     *                       closed, {@link Errno#EAGAIN} when the kernel cannot take them now (they
     *                       stay prepared)
     */
    public int submit() {
        checkOwner("submit");
        if (buffers.hasDeferred()) {
            buffers.runDeferred();
        }
        return enter(0, 0);
    }

    /** Publishes the prepared entries and enters the kernel; returns the entries it consumed. */
    private int enter(int minComplete, int flags) {
        if (closed) {
            return 0; // closed by a handler of this very call: nothing to enter
        }
        int toSubmit = prepared;
        if (toSubmit > 0) {
            INT.setRelease(sq, sqTailOff, sqTail);
        } else if (minComplete == 0 && flags == 0) {
            return 0;
        }
        // On a DEFER_TASKRUN ring completion work runs only inside GETEVENTS: a submit asks for it
        // too (waiting for nothing), so finished I/Os are posted in the same system call.
        int f = deferTaskrun ? flags | ENTER_GETEVENTS : flags;
        while (true) {
            long rc = Unistd.syscall(capture, SYS_IO_URING_ENTER, fd, toSubmit, minComplete, f, 0, 0);
            if (rc >= 0) {
                int n = (int) rc;
                prepared -= n;
                submitted += n;
                return n;
            }
            int errno = (int) -rc;
            if (errno == 4) { // EINTR
                continue;
            }
            if (errno == Errno.EAGAIN.value() || errno == Errno.EBUSY.value()) {
                if (minComplete > 0 || flags != 0) {
                    return 0; // completions pending: reap and come back
                }
                throw new RdmaException(Errno.EAGAIN, this + ".submit: the kernel cannot take " + toSubmit
                        + " entries now (errno " + errno + "); they stay prepared, reap and retry");
            }
            throw new RdmaException(Errno.of(errno), this + ": io_uring_enter failed with errno " + errno);
        }
    }

    /**
     * Delivers finished operations to {@code handler} without waiting (entering the kernel only
     * when it has completion work pending for this ring). Prepared operations are not submitted.
     *
     * @return the completions delivered
     */
    public int poll(IoCompletionHandler handler) {
        checkOwner("poll");
        if (handler == null) {
            throw new RdmaException(Errno.EINVAL, this + ".poll: handler is null");
        }
        if (buffers.hasDeferred()) {
            buffers.runDeferred();
        }
        int n = drainStash(handler);
        n += reap(handler);
        // A cleared fixed buffer's tag completion may need the ring's task work run to be posted:
        // enter (without waiting) while one is due, as for operations in flight.
        if (n == 0 && ((ops.inFlight() > prepared && kernelHasWork()) || (buffers.awaitingTags() && !closed))) {
            enter(0, ENTER_GETEVENTS);
            n += reap(handler);
        }
        return n;
    }

    /**
     * Submits what is prepared, then waits until at least {@code minCompletions} completions (at
     * most those in flight) were delivered to {@code handler}.
     *
     * @return the completions delivered
     */
    public int await(int minCompletions, IoCompletionHandler handler) {
        checkOwner("await");
        if (handler == null) {
            throw new RdmaException(Errno.EINVAL, this + ".await: handler is null");
        }
        if (buffers.hasDeferred()) {
            buffers.runDeferred();
        }
        int n = drainStash(handler);
        n += reap(handler);
        while (n < minCompletions && ops.inFlight() > 0) {
            int want = Math.min(minCompletions - n, ops.inFlight());
            enter(want, ENTER_GETEVENTS);
            n += reap(handler);
        }
        if (prepared > 0) {
            enter(0, 0);
        }
        return n;
    }

    private boolean kernelHasWork() {
        if (closed) {
            return false;
        }
        if (!taskrunFlag) {
            return true;
        }
        int f = (int) INT.getAcquire(sq, sqFlagsOff);
        return (f & (SQ_TASKRUN | SQ_CQ_OVERFLOW)) != 0;
    }

    private int drainStash(IoCompletionHandler handler) {
        int n = 0;
        while (stash.size() > 0) {
            long ud = stash.headUserData();
            int res = stash.headResult();
            stash.pop();
            completed++;
            n++;
            handler.onComplete(ud, res);
        }
        return n;
    }

    /** Reaps the completion queue; operations go to {@code handler}, or to the stash when it is null. */
    private int reap(IoCompletionHandler handler) {
        int n = 0;
        // Only what was there when the call began: a handler that submits may make the kernel post
        // more at once (page-cache reads complete inline), and a reap must return.
        if (closed) {
            return 0;
        }
        int end = (int) INT.getAcquire(cq, cqTailOff);
        while (true) {
            // fields, not locals: a handler (or a chunk retiring inside one) may reap in between;
            // a handler may even close the ring, after which its memory is gone
            int head = cqHead;
            if (closed || end - head <= 0) {
                return n;
            }
            long o = cqesOff + (long) (head & cqMask) * CQE_SIZE;
            long ud = cq.get(ValueLayout.JAVA_LONG, o + CQE_USER_DATA);
            int res = cq.get(ValueLayout.JAVA_INT, o + CQE_RES);
            cqHead = head + 1;
            INT.setRelease(cq, cqHeadOff, head + 1);
            if (ud >= CANCEL_USER_DATA) {
                if (ud >= TAG_BASE) {
                    buffers.tagArrived(ud);
                }
                continue;
            }
            int id = (int) ud;
            long userData = ops.userData(id);
            FixedSlot s = ops.end(id);
            if (s != null && s.removed) {
                buffers.finishRetired(); // the last operation on a chunk that left its pool
            }
            if (handler == null) {
                stash.add(userData, res);
            } else {
                completed++;
                n++;
                handler.onComplete(userData, res);
            }
        }
    }

    /**
     * Asks the kernel to cancel every operation prepared or in flight whose user data is
     * {@code userData} ({@code IORING_OP_ASYNC_CANCEL}, submitted at once with whatever else is
     * prepared): an I/O that waits (a pipe, a socket, a device that does not answer) then completes
     * with {@code -ECANCELED}; one the kernel has already started completes as it would have. Each
     * is still delivered by {@link #poll} or {@link #await}, and its buffer stays pinned until then.
     *
     * @return the operations asked to cancel (0 when none has that user data)
     * @throws RdmaException {@link Errno#EPERM} off the owner thread, {@link Errno#EBADF} once closed,
     *                       {@link Errno#EBUSY} when the submission queue has no room for the cancels
     */
    public int cancel(long userData) {
        checkOwner("cancel");
        int n = 0;
        for (int id = 0; id < capacity; id++) {
            if (ops.isBusy(id) && ops.userData(id) == userData) {
                n += prepareCancel(id, true) ? 1 : 0;
            }
        }
        if (n > 0) {
            enter(0, 0);
        }
        return n;
    }


    /** Prepares a cancel of operation {@code id}; false (or EBUSY when {@code strict}) if the queue is full. */
    private boolean prepareCancel(int id, boolean strict) {
        int head = (int) INT.getAcquire(sq, sqHeadOff);
        if (sqTail - head >= sqEntries) {
            if (strict) {
                throw new RdmaException(Errno.EBUSY, this + ".cancel: the submission queue is full (" + sqEntries
                        + " entries); submit() first");
            }
            return false;
        }
        long o = (long) (sqTail & sqMask) * SQE_SIZE;
        writeSqe(o, OP_ASYNC_CANCEL, (byte) 0, -1, 0, id, 0, 0, CANCEL_USER_DATA, 0);
        sqTail++;
        prepared++;
        return true;
    }

    /**
     * A chunk left its pool while operations use it (owner): asks the kernel to cancel them, so that
     * the chunk's retirement ends soon; its memory is held until they completed.
     */
    void cancelOn(FixedSlot s) {
        int n = 0;
        for (int id = 0; id < capacity; id++) {
            if (ops.slot(id) == s && prepareCancel(id, false)) {
                n++;
            }
        }
        if (n > 0) {
            enter(0, 0);
        }
    }

    /** Waits for at least one completion of anything and reaps into the stash (the ring waiting for itself). */
    void waitInternally() {
        enter(1, ENTER_GETEVENTS);
        reap(null);
    }

    // ---- ownership and close -------------------------------------------------------------------

    private void checkOwner(String what) {
        if (Thread.currentThread() != owner) {
            throw new RdmaException(Errno.EPERM, this + "." + what + ": called on thread '" + Thread.currentThread().getName()
                    + "'; an io_uring is used by its owner thread '" + owner.getName() + "' only");
        }
        if (closed) {
            throw new RdmaException(Errno.EBADF, this + "." + what + ": the ring is closed");
        }
    }

    void checkOwnerForClose(String what) {
        if (Thread.currentThread() != owner && owner.isAlive()) {
            throw new RdmaException(Errno.EPERM, this + "." + what + ": called on thread '" + Thread.currentThread().getName()
                    + "' while the owner thread '" + owner.getName() + "' lives; close on the owner");
        }
    }

    /**
     * Closes the ring: operations prepared and not submitted are dropped; those in flight are
     * cancelled and waited for (their completions are not delivered: reap first to see them); every
     * registered pool's chunks are cleared and their tag completions awaited; files are closed; the
     * rings are unmapped. The pools stay usable. Closing twice does nothing.
     *
     * <p>On the owner thread, or on any thread once the owner thread has ended (the kernel then has
     * already cancelled and waited for the owner's I/O).
     *
     * @throws RdmaException {@link Errno#EPERM} on another thread while the owner lives
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        checkOwnerForClose("close");
        if (onOwner()) {
            dropPrepared();
            if (ops.inFlight() > 0) {
                cancelAll();
                while (ops.inFlight() > 0) {
                    waitInternally();
                }
            }
            buffers.runDeferred();
            for (IoRegistration r : registrations) {
                r.close();
            }
            files.closeAll(true);
            while (buffers.awaitingTags() || buffers.retiring()) {
                waitInternally();
            }
            stash.clear(); // completions nobody reaped before close are dropped, as documented
        }
        closed = true;
        for (int id = 0; id < capacity; id++) {
            ops.unpin(id); // owner gone: the kernel has no I/O of it left (on the owner, none is left anyway)
        }
        for (IoRegistration r : registrations) {
            r.detachAll(); // owner gone: the kernel has no I/O of it left
        }
        registrations.clear();
        buffers.releaseDeferred();
        files.closeAll(false);
        unmapAndClose();
    }

    /** Takes back the operations prepared and never submitted (their entries are still ours). */
    private void dropPrepared() {
        while (prepared > 0) {
            sqTail--;
            prepared--;
            long o = (long) (sqTail & sqMask) * SQE_SIZE;
            int id = (int) sqes.get(ValueLayout.JAVA_LONG, o + SQE_USER_DATA);
            ops.end(id);
        }
    }

    private void cancelAll() {
        int head = (int) INT.getAcquire(sq, sqHeadOff);
        if (sqTail - head >= sqEntries) {
            return;
        }
        long o = (long) (sqTail & sqMask) * SQE_SIZE;
        writeSqe(o, OP_ASYNC_CANCEL, (byte) 0, -1, 0, 0, 0, ASYNC_CANCEL_ANY, CANCEL_USER_DATA, 0);
        sqTail++;
        prepared++;
        enter(0, 0);
        prepared = 0;
    }

    private void unmapAndClose() {
        mem.unmap(capture);
        closed = true;
        OPEN.remove(this);
        arena.close();
    }

    @Override
    public String toString() {
        return "IoRing[fd " + fd + ", " + sqEntries + " entries" + (closed ? ", closed" : "") + "]";
    }
}
