package io.regmem.registration.uring;

import static io.regmem.registration.uring.UringLayout.*;

import io.regmem.core.BufferPool;
import io.regmem.core.Errno;
import io.regmem.core.PooledBuffer;
import io.regmem.core.RdmaException;
import io.regmem.core.internal.Libc;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;

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
    /** Completion user data at or above this are tags of fixed buffers, not operations. */
    static final long TAG_BASE = 1L << 62;
    /** The user data of the ring's own cancel request at close. */
    static final long CANCEL_USER_DATA = 1L << 61;

    private final RingOwner owner;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment capture;
    private final MemorySegment scratch;
    private final RingMemory mem;
    private final int fd;
    private final SubmissionQueue sq;
    private final Preparation prep;
    private final CompletionQueue cq;

    /** An id per prepared or in-flight operation (the SQE's user data). */
    private final Operations ops;
    private final int capacity;

    private final FixedBuffers buffers;
    private final FileTable files;
    private final Registrations registrations = new Registrations();
    private volatile boolean closed;

    private IoRing(Builder b) {
        Libc.requireBound("io_uring");
        this.owner = new RingOwner();
        this.capture = arena.allocate(Libc.CAPTURE);
        this.scratch = arena.allocate(256, 8);
        try {
            this.mem = new RingMemory(arena, capture, b.entries, b.singleIssuer);
        } catch (RuntimeException e) {
            arena.close();
            throw e;
        }
        this.fd = mem.fd;
        this.sq = new SubmissionQueue(this, mem, capture);
        this.capacity = sq.entries;
        this.ops = new Operations(capacity);
        this.buffers = new FixedBuffers(this, fd, capture, scratch, b.fixedBuffers);
        this.cq = new CompletionQueue(this, mem, sq, ops, buffers, capacity);
        this.prep = new Preparation(this, sq, ops, buffers);
        this.files = new FileTable(this, fd, arena, capture, scratch, b.fixedFiles);
        try {
            mem.registerSparse(capture, scratch, REGISTER_BUFFERS2, b.fixedBuffers, "fixed-buffer table", this);
            mem.registerSparse(capture, scratch, REGISTER_FILES2, b.fixedFiles, "fixed-file table", this);
        } catch (RuntimeException e) {
            unmapAndClose();
            throw e;
        }
        RingOwner.opened(this);
    }

    /** The rings open in this JVM now, described (a leak check: tests end with none). */
    public static List<String> openRings() {
        return RingOwner.openRings();
    }

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

    /** The thread that owns the ring. */
    public Thread owner() {
        return owner.thread;
    }

    /** Operations that may be prepared or in flight at once (the submission queue's entries). */
    public int capacity() {
        return capacity;
    }

    /** Operations prepared and not yet submitted. */
    public int prepared() {
        return sq.prepared;
    }

    /** Operations prepared or submitted whose completion has not been delivered. */
    public int inFlight() {
        return ops.inFlight() + cq.stash.size();
    }

    /** Operations submitted to the kernel since the ring was built. */
    public long submitted() {
        return sq.submitted;
    }

    /** Completions delivered since the ring was built. */
    public long completed() {
        return cq.completed;
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
        return registrations.add(this, pool);
    }

    void forget(IoRegistration r) {
        registrations.forget(r);
    }

    /** The fixed-buffer table (its registrations add and remove their chunks' slots). */
    FixedBuffers buffers() {
        return buffers;
    }

    /** True on the owner thread. */
    boolean onOwner() {
        return owner.isCurrent();
    }

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
        checkOwner("readFixed");
        prep.rw(OP_READ_FIXED, file, buffer, offset, length, fileOffset, userData, "readFixed");
    }

    /** Prepares {@code WRITE_FIXED}: the mirror of {@link #readFixed}, from the buffer into the file. */
    public void writeFixed(IoFile file, PooledBuffer buffer, long offset, int length, long fileOffset, long userData) {
        checkOwner("writeFixed");
        prep.rw(OP_WRITE_FIXED, file, buffer, offset, length, fileOffset, userData, "writeFixed");
    }

    /**
     * Prepares a plain {@code READ} into the same memory without its fixed-buffer index (the kernel
     * pins the pages for each I/O); same rules as {@link #readFixed}: the buffer must be in a pool
     * registered with this ring, so that its memory outlives the I/O.
     */
    public void read(IoFile file, PooledBuffer buffer, long offset, int length, long fileOffset, long userData) {
        checkOwner("read");
        prep.rw(OP_READ, file, buffer, offset, length, fileOffset, userData, "read");
    }

    /** Prepares a plain {@code WRITE}: the mirror of {@link #read}. */
    public void write(IoFile file, PooledBuffer buffer, long offset, int length, long fileOffset, long userData) {
        checkOwner("write");
        prep.rw(OP_WRITE, file, buffer, offset, length, fileOffset, userData, "write");
    }

    /**
     * Prepares {@code fsync} of {@code file} ({@code fdatasync} when {@code dataOnly}).
     *
     * @throws RdmaException as {@link #readFixed} for the ring, the file and the queue
     */
    public void fsync(IoFile file, boolean dataOnly, long userData) {
        checkOwner("fsync");
        prep.fsync(file, dataOnly, userData);
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
        prep.nop(userData);
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
    int enter(int minComplete, int flags) {
        return closed ? 0 : sq.enter(minComplete, flags); // (closed by a handler of this very call: nothing to enter)
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
        return cq.poll(handler);
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
        return cq.await(minCompletions, handler);
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
        int n = prep.cancels(userData);
        if (n > 0) {
            enter(0, 0);
        }
        return n;
    }

    /**
     * A chunk left its pool while operations use it (owner): asks the kernel to cancel them, so that
     * the chunk's retirement ends soon; its memory is held until they completed.
     */
    void cancelOn(FixedSlot s) {
        if (prep.cancelsOn(s) > 0) {
            enter(0, 0);
        }
    }

    /** Waits for at least one completion of anything and reaps into the stash (the ring waiting for itself). */
    void waitInternally() {
        enter(1, ENTER_GETEVENTS);
        cq.reap(null);
    }

    private void checkOwner(String what) {
        owner.check(this, what);
    }

    void checkOwnerForClose(String what) {
        owner.checkForClose(this, what);
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
            cq.cancelAndAwaitAll(prep);
            buffers.runDeferred();
            registrations.closeAll();
            files.closeAll(true);
            while (buffers.awaitingTags() || buffers.retiring()) {
                waitInternally();
            }
            cq.stash.clear(); // completions nobody reaped before close are dropped, as documented
        }
        closed = true;
        for (int id = 0; id < capacity; id++) {
            ops.unpin(id); // owner gone: the kernel has no I/O of it left (on the owner, none is left anyway)
        }
        registrations.detachAll(); // owner gone: the kernel has no I/O of it left
        buffers.releaseDeferred();
        files.closeAll(false);
        unmapAndClose();
    }

    private void unmapAndClose() {
        mem.unmap(capture);
        closed = true;
        RingOwner.closed(this);
        arena.close();
    }

    @Override
    public String toString() {
        return "IoRing[fd " + fd + ", " + sq.entries + " entries" + (closed ? ", closed" : "") + "]";
    }
}
