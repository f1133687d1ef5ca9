package io.regmem.registration.uring;

import static io.regmem.registration.uring.UringLayout.*;

import io.regmem.core.BufferPool;
import io.regmem.core.Chunk;
import io.regmem.core.Errno;
import io.regmem.core.PooledBuffer;
import io.regmem.core.RdmaException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicLong;

/**
 * An io_uring instance: a submission queue and a completion queue shared with the kernel, a
 * fixed-buffer table for pool chunks ({@link #register(BufferPool)}) and a fixed-file table
 * ({@link #openFile(Path, IoFile.Mode...)}).
 *
 * <h2>One thread</h2>
 * A ring belongs to the thread that built it, its owner, as the kernel's
 * {@code IORING_SETUP_SINGLE_ISSUER} makes it: only the owner prepares, submits, reaps, opens and
 * closes files and registers pools. Any other thread gets {@link Errno#EPERM} before anything
 * happens. Run one ring per I/O thread. A registered pool may still be used from any thread:
 * chunks its other threads add are registered by the owner at its next call, and chunks they
 * release are retired by the owner (see {@link IoRegistration}).
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
    private static final long TAG_BASE = 1L << 62;
    /** The user data of the ring's own cancel request at close. */
    private static final long CANCEL_USER_DATA = 1L << 61;

    private final Thread owner;
    private final int fd;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment capture;
    private final MemorySegment scratch;
    private final long sqMapAddr;
    private final long sqMapLen;
    private final long cqMapAddr;
    private final long cqMapLen;
    private final long sqesMapAddr;
    private final long sqesMapLen;
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
    private final int setupFlags;
    private final int features;
    private final boolean taskrunFlag;
    private int sqTail;
    private int cqHead;
    private int cqTailSeen;

    // operations: an id per prepared or in-flight operation (the SQE's user data)
    private final int capacity;
    private final long[] opUserData;
    private final FixedSlot[] opSlot;
    private final int[] freeOps;
    private int freeTop;
    private int inFlight;
    private int prepared;
    // completions reaped while the ring waited for itself (a chunk retiring), delivered first by poll
    private final long[] stashData;
    private final int[] stashRes;
    private int stashHead;
    private int stashCount;

    // fixed buffers and files
    private final int maxBuffers;
    private final BitSet usedBuffers = new BitSet();
    private final AtomicLong nextTag = new AtomicLong(1);
    private final Map<Long, FixedSlot> awaitingTags = new HashMap<>();
    private final int maxFiles;
    private final BitSet usedFiles = new BitSet();
    private final List<IoFile> files = new ArrayList<>();
    private final List<IoRegistration> registrations = new java.util.concurrent.CopyOnWriteArrayList<>();
    /** Work other threads left for the owner: chunks to register or retire. */
    private final ConcurrentLinkedQueue<Deferred> deferred = new ConcurrentLinkedQueue<>();
    private volatile boolean hasDeferred;
    private volatile boolean closed;
    private long submitted;
    private long completed;

    /** Rings open in this JVM, for {@link #openRings()}. */
    private static final java.util.Set<IoRing> OPEN = java.util.concurrent.ConcurrentHashMap.newKeySet();

    private record Deferred(FixedSlot slot, Runnable hold, boolean add) {
    }

    private IoRing(Builder b) {
        Sys.requireBound();
        this.owner = Thread.currentThread();
        this.capture = arena.allocate(Sys.CAPTURE);
        this.scratch = arena.allocate(256, 8);
        MemorySegment params = arena.allocate(PARAMS_SIZE, 8);
        int[] attempts = b.singleIssuer
                ? new int[] {SETUP_SINGLE_ISSUER | SETUP_DEFER_TASKRUN | SETUP_TASKRUN_FLAG | SETUP_SUBMIT_ALL,
                        SETUP_COOP_TASKRUN | SETUP_TASKRUN_FLAG | SETUP_SUBMIT_ALL, 0}
                : new int[] {SETUP_COOP_TASKRUN | SETUP_TASKRUN_FLAG | SETUP_SUBMIT_ALL, 0};
        long rc = -1;
        int errno = 0;
        int flags = 0;
        for (int extra : attempts) {
            params.fill((byte) 0);
            flags = extra | SETUP_CQSIZE | SETUP_CLAMP;
            params.set(ValueLayout.JAVA_INT, PARAMS_FLAGS, flags);
            params.set(ValueLayout.JAVA_INT, PARAMS_CQ_ENTRIES, b.entries * 2);
            rc = Sys.syscall(capture, SYS_IO_URING_SETUP, b.entries, params.address(), 0, 0, 0, 0);
            if (rc >= 0) {
                break;
            }
            errno = Sys.errno(capture);
            if (errno != Errno.EINVAL.value()) {
                break;
            }
        }
        if (rc < 0) {
            arena.close();
            throw setupFailure(errno, b.entries);
        }
        this.fd = (int) rc;
        this.setupFlags = flags;
        this.taskrunFlag = (flags & SETUP_TASKRUN_FLAG) != 0;
        this.features = params.get(ValueLayout.JAVA_INT, PARAMS_FEATURES);
        this.sqEntries = params.get(ValueLayout.JAVA_INT, PARAMS_SQ_ENTRIES);
        int cqEntries = params.get(ValueLayout.JAVA_INT, PARAMS_CQ_ENTRIES);
        long sqOff = PARAMS_SQ_OFF;
        long cqOff = PARAMS_CQ_OFF;
        long sqRingBytes = params.get(ValueLayout.JAVA_INT, sqOff + SQ_OFF_ARRAY) + 4L * sqEntries;
        long cqRingBytes = params.get(ValueLayout.JAVA_INT, cqOff + CQ_OFF_CQES) + CQE_SIZE * cqEntries;
        boolean single = (features & FEAT_SINGLE_MMAP) != 0;
        long sqLen = single ? Math.max(sqRingBytes, cqRingBytes) : sqRingBytes;
        long sqAddr = mapOrClose(sqLen, OFF_SQ_RING, 0, 0);
        long cqAddr = sqAddr;
        long cqLen = 0;
        if (!single) {
            cqLen = cqRingBytes;
            cqAddr = mapOrClose(cqLen, OFF_CQ_RING, sqAddr, sqLen);
        }
        long sqesLen = SQE_SIZE * sqEntries;
        long sqesAddr = mapOrClose(sqesLen, OFF_SQES, sqAddr, sqLen);
        this.sqMapAddr = sqAddr;
        this.sqMapLen = sqLen;
        this.cqMapAddr = single ? 0 : cqAddr;
        this.cqMapLen = cqLen;
        this.sqesMapAddr = sqesAddr;
        this.sqesMapLen = sqesLen;
        this.sq = MemorySegment.ofAddress(sqAddr).reinterpret(sqLen);
        this.cq = MemorySegment.ofAddress(cqAddr).reinterpret(single ? sqLen : cqLen);
        this.sqes = MemorySegment.ofAddress(sqesAddr).reinterpret(sqesLen);
        this.sqHeadOff = params.get(ValueLayout.JAVA_INT, sqOff + SQ_OFF_HEAD);
        this.sqTailOff = params.get(ValueLayout.JAVA_INT, sqOff + SQ_OFF_TAIL);
        this.sqFlagsOff = params.get(ValueLayout.JAVA_INT, sqOff + SQ_OFF_FLAGS);
        this.sqMask = sq.get(ValueLayout.JAVA_INT, params.get(ValueLayout.JAVA_INT, sqOff + SQ_OFF_RING_MASK));
        this.cqHeadOff = params.get(ValueLayout.JAVA_INT, cqOff + CQ_OFF_HEAD);
        this.cqTailOff = params.get(ValueLayout.JAVA_INT, cqOff + CQ_OFF_TAIL);
        this.cqesOff = params.get(ValueLayout.JAVA_INT, cqOff + CQ_OFF_CQES);
        this.cqMask = cq.get(ValueLayout.JAVA_INT, params.get(ValueLayout.JAVA_INT, cqOff + CQ_OFF_RING_MASK));
        // the SQ array maps ring positions to SQE indexes: identity, written once
        long array = params.get(ValueLayout.JAVA_INT, sqOff + SQ_OFF_ARRAY);
        for (int i = 0; i < sqEntries; i++) {
            sq.set(ValueLayout.JAVA_INT, array + 4L * i, i);
        }
        this.sqTail = (int) INT.getAcquire(sq, sqTailOff);
        this.cqHead = (int) INT.getAcquire(cq, cqHeadOff);
        this.cqTailSeen = cqHead;
        this.capacity = sqEntries;
        this.opUserData = new long[capacity];
        this.opSlot = new FixedSlot[capacity];
        this.freeOps = new int[capacity];
        for (int i = 0; i < capacity; i++) {
            freeOps[i] = capacity - 1 - i;
        }
        this.freeTop = capacity;
        this.stashData = new long[capacity];
        this.stashRes = new int[capacity];
        this.maxBuffers = b.fixedBuffers;
        this.maxFiles = b.fixedFiles;
        try {
            registerSparse(REGISTER_BUFFERS2, maxBuffers, "fixed-buffer table");
            registerSparse(REGISTER_FILES2, maxFiles, "fixed-file table");
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

    private long mapOrClose(long length, long offset, long undoAddr, long undoLen) {
        long a = Sys.mmap(capture, length, Sys.PROT_READ | Sys.PROT_WRITE, Sys.MAP_SHARED | Sys.MAP_POPULATE, fd, offset);
        if (a == -1L) {
            int errno = Sys.errno(capture);
            if (undoAddr != 0) {
                Sys.munmap(capture, undoAddr, undoLen);
            }
            Sys.close(capture, fd);
            arena.close();
            throw new RdmaException(Errno.of(errno), "IoRing: mmap of the ring (" + length + " bytes at offset 0x"
                    + Long.toHexString(offset) + ") failed with errno " + errno);
        }
        return a;
    }

    static RdmaException setupFailure(int errno, int entries) {
        if (errno == Errno.ENOSYS.value()) {
            return new RdmaException(Errno.ENOSYS, "io_uring is not available: io_uring_setup failed with ENOSYS"
                    + " (kernel without io_uring, kernel.io_uring_disabled=2, or a seccomp filter such as Docker's default)");
        }
        if (errno == Errno.EPERM.value()) {
            return new RdmaException(Errno.EPERM, "io_uring is not permitted here: io_uring_setup failed with EPERM"
                    + " (kernel.io_uring_disabled=1 without the io_uring group, or a seccomp filter)");
        }
        if (errno == Errno.ENOMEM.value()) {
            return memlock("io_uring_setup of " + entries + " entries", -1);
        }
        return new RdmaException(Errno.of(errno), "IoRing: io_uring_setup(" + entries + ") failed with errno " + errno);
    }

    static RdmaException memlock(String what, long bytes) {
        long limit = Sys.memlockLimit();
        return new RdmaException(Errno.ENOMEM, "IoRing: " + what + " failed with ENOMEM: the locked-memory limit "
                + "RLIMIT_MEMLOCK is " + Sys.describeLimit(limit)
                + (bytes >= 0 ? " and this asked to pin " + bytes + " bytes more" : "")
                + " (pinned pages are charged per ring, and released asynchronously after a ring closes);"
                + " raise it (ulimit -l, LimitMEMLOCK=, docker --ulimit memlock=) or grant CAP_IPC_LOCK");
    }

    private void registerSparse(int opcode, int n, String what) {
        MemorySegment r = scratch;
        r.fill((byte) 0);
        r.set(ValueLayout.JAVA_INT, RSRC_REGISTER_NR, n);
        r.set(ValueLayout.JAVA_INT, RSRC_REGISTER_FLAGS, RSRC_REGISTER_SPARSE);
        long rc = Sys.syscall(capture, SYS_IO_URING_REGISTER, fd, opcode, r.address(), RSRC_REGISTER_SIZE, 0, 0);
        if (rc < 0) {
            int errno = Sys.errno(capture);
            if (errno == Errno.ENOMEM.value()) {
                throw memlock("registering a sparse " + what + " of " + n + " slots", -1);
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
        return inFlight + stashCount;
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
        StringBuilder s = new StringBuilder();
        String[] names = {"SINGLE_ISSUER", "DEFER_TASKRUN", "COOP_TASKRUN", "TASKRUN_FLAG", "SUBMIT_ALL", "CQSIZE"};
        int[] bits = {SETUP_SINGLE_ISSUER, SETUP_DEFER_TASKRUN, SETUP_COOP_TASKRUN, SETUP_TASKRUN_FLAG, SETUP_SUBMIT_ALL,
                SETUP_CQSIZE};
        for (int i = 0; i < bits.length; i++) {
            if ((setupFlags & bits[i]) != 0) {
                s.append(s.isEmpty() ? "" : "|").append(names[i]);
            }
        }
        return s.toString();
    }

    /** Fixed-buffer slots in use (one per registered chunk, plus chunks whose tag is awaited). */
    public int fixedBuffersInUse() {
        synchronized (usedBuffers) {
            return usedBuffers.cardinality();
        }
    }

    /** Files open on this ring. */
    public int openFiles() {
        return files.size();
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
     * Opens a file and registers it in the fixed-file table.
     *
     * @param modes at least one of {@link IoFile.Mode#READ} and {@link IoFile.Mode#WRITE}
     * @throws RdmaException {@link Errno#EINVAL} for modes without READ or WRITE, or {@code DIRECT}
     *                       on a file system without {@code O_DIRECT}; the errno of {@code open}
     *                       ({@link Errno#ENOENT}, {@link Errno#EACCES}...); {@link Errno#ENOMEM}
     *                       when every fixed-file slot is taken
     */
    public IoFile openFile(Path path, IoFile.Mode... modes) {
        checkOwner("openFile");
        java.util.EnumSet<IoFile.Mode> m = java.util.EnumSet.noneOf(IoFile.Mode.class);
        m.addAll(java.util.Arrays.asList(modes));
        boolean rd = m.contains(IoFile.Mode.READ);
        boolean wr = m.contains(IoFile.Mode.WRITE);
        if (!rd && !wr) {
            throw new RdmaException(Errno.EINVAL, this + ".openFile(" + path + "): modes " + m + " have neither READ nor WRITE");
        }
        int flags = (rd && wr ? Sys.O_RDWR : wr ? Sys.O_WRONLY : Sys.O_RDONLY) | Sys.O_CLOEXEC
                | (m.contains(IoFile.Mode.CREATE) ? Sys.O_CREAT : 0) | (m.contains(IoFile.Mode.TRUNCATE) ? Sys.O_TRUNC : 0)
                | (m.contains(IoFile.Mode.DIRECT) ? Sys.O_DIRECT : 0) | (m.contains(IoFile.Mode.DSYNC) ? Sys.O_DSYNC : 0);
        String p = path.toAbsolutePath().toString();
        int newFd = Sys.open(capture, p, flags);
        if (newFd < 0) {
            int errno = Sys.errno(capture);
            throw new RdmaException(Errno.of(errno), this + ".openFile(" + path + ", " + m + "): open failed with errno " + errno
                    + (errno == Errno.EINVAL.value() && m.contains(IoFile.Mode.DIRECT) ? " (O_DIRECT not supported here?)" : ""));
        }
        int memAlign = 1;
        int offAlign = 1;
        if (m.contains(IoFile.Mode.DIRECT)) {
            MemorySegment st = arena.allocate(STATX_SIZE, 8);
            int rc = Sys.statx(capture, p, STATX_BASIC_STATS | STATX_DIOALIGN, st);
            int mask = rc == 0 ? st.get(ValueLayout.JAVA_INT, STATX_MASK) : 0;
            if ((mask & STATX_DIOALIGN) != 0) {
                memAlign = st.get(ValueLayout.JAVA_INT, STATX_DIO_MEM_ALIGN);
                offAlign = st.get(ValueLayout.JAVA_INT, STATX_DIO_OFFSET_ALIGN);
            } else {
                memAlign = 4096; // the file system does not say: the strictest common rule
                offAlign = 4096;
            }
            if (memAlign == 0 || offAlign == 0) {
                Sys.close(capture, newFd);
                throw new RdmaException(Errno.EINVAL, this + ".openFile(" + path + "): the file system does not support "
                        + "O_DIRECT for this file (STATX_DIOALIGN is 0)");
            }
        }
        int index;
        synchronized (usedFiles) {
            index = usedFiles.nextClearBit(0);
            if (index >= maxFiles) {
                Sys.close(capture, newFd);
                throw new RdmaException(Errno.ENOMEM, this + ".openFile(" + path + "): all " + maxFiles
                        + " fixed-file slots are taken (IoRing.Builder.fixedFiles)");
            }
            usedFiles.set(index);
        }
        long rc = updateFile(index, newFd);
        if (rc < 0) {
            int errno = (int) -rc;
            Sys.close(capture, newFd);
            synchronized (usedFiles) {
                usedFiles.clear(index);
            }
            throw new RdmaException(Errno.of(errno), this + ".openFile(" + path + "): registering the file failed with errno " + errno);
        }
        IoFile f = new IoFile(this, path, newFd, index, rd, wr, m.contains(IoFile.Mode.DIRECT), memAlign, offAlign);
        files.add(f);
        return f;
    }

    /** Sets a fixed-file slot to {@code fileFd} (-1 clears it); 1, or -errno. */
    private long updateFile(int index, int fileFd) {
        MemorySegment u = scratch;
        u.fill((byte) 0);
        u.set(ValueLayout.JAVA_INT, 64, fileFd);
        u.set(ValueLayout.JAVA_INT, RSRC_UPDATE2_OFFSET, index);
        u.set(ValueLayout.JAVA_LONG, RSRC_UPDATE2_DATA, u.address() + 64);
        u.set(ValueLayout.JAVA_INT, RSRC_UPDATE2_NR, 1);
        long rc = Sys.syscall(capture, SYS_IO_URING_REGISTER, fd, REGISTER_FILES_UPDATE2, u.address(), RSRC_UPDATE2_SIZE, 0, 0);
        return rc < 0 ? -Sys.errno(capture) : rc;
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
        updateFile(f.index, -1);
        Sys.close(capture, f.fd);
        synchronized (usedFiles) {
            usedFiles.clear(f.index);
        }
        files.remove(f);
        f.closed = true;
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

    /** A new chunk of a registered pool (any thread): a slot now, the kernel's table on the owner. */
    FixedSlot addChunk(IoRegistration reg, Chunk chunk) {
        if (closed) {
            throw new RdmaException(Errno.EBADF, this + ": closed; " + chunk + " of pool " + reg.pool().name()
                    + " cannot be registered");
        }
        if (chunk.size() > MAX_FIXED_BUFFER_BYTES) {
            throw new RdmaException(Errno.EINVAL, this + ": " + chunk + " of pool " + reg.pool().name() + " is larger than "
                    + "io_uring's 1 GiB per fixed buffer (build the pool with a smaller chunk size and maximum class)");
        }
        int index;
        synchronized (usedBuffers) {
            index = usedBuffers.nextClearBit(0);
            if (index >= maxBuffers) {
                throw new RdmaException(Errno.ENOMEM, this + ": all " + maxBuffers + " fixed-buffer slots are taken; "
                        + chunk + " of pool " + reg.pool().name() + " cannot be registered (IoRing.Builder.fixedBuffers)");
            }
            usedBuffers.set(index);
        }
        FixedSlot s = new FixedSlot(this, reg, chunk, index, TAG_BASE | nextTag.getAndIncrement());
        if (Thread.currentThread() == owner) {
            try {
                registerSlot(s);
            } catch (RuntimeException e) {
                freeIndex(index);
                throw e;
            }
        } else {
            defer(new Deferred(s, null, true));
        }
        return s;
    }

    private void registerSlot(FixedSlot s) {
        MemorySegment u = scratch;
        u.fill((byte) 0);
        long iov = u.address() + 64;
        long tag = u.address() + 80;
        u.set(ValueLayout.JAVA_LONG, 64, s.start);
        u.set(ValueLayout.JAVA_LONG, 72, s.end - s.start);
        u.set(ValueLayout.JAVA_LONG, 80, s.tag);
        u.set(ValueLayout.JAVA_INT, RSRC_UPDATE2_OFFSET, s.index);
        u.set(ValueLayout.JAVA_LONG, RSRC_UPDATE2_DATA, iov);
        u.set(ValueLayout.JAVA_LONG, RSRC_UPDATE2_TAGS, tag);
        u.set(ValueLayout.JAVA_INT, RSRC_UPDATE2_NR, 1);
        long rc = Sys.syscall(capture, SYS_IO_URING_REGISTER, fd, REGISTER_BUFFERS_UPDATE, u.address(), RSRC_UPDATE2_SIZE, 0, 0);
        if (rc < 0) {
            int errno = Sys.errno(capture);
            String what = "registering " + s.chunk + " as fixed buffer " + s.index;
            if (errno == Errno.ENOMEM.value()) {
                throw memlock(what, s.end - s.start);
            }
            if (errno == Errno.EFAULT.value()) {
                throw new RdmaException(Errno.EFAULT, this + ": " + what + " failed with EFAULT: the kernel cannot pin this "
                        + "memory (file-backed shared mappings such as FileChannel.map cannot be fixed buffers)");
            }
            throw new RdmaException(Errno.of(errno), this + ": " + what + " failed with errno " + errno);
        }
        s.registered = true;
    }

    /** Clears a slot in the kernel's table; its tag completion follows once nothing uses the chunk. */
    private void clearSlot(FixedSlot s) {
        MemorySegment u = scratch;
        u.fill((byte) 0);
        u.set(ValueLayout.JAVA_INT, RSRC_UPDATE2_OFFSET, s.index);
        u.set(ValueLayout.JAVA_LONG, RSRC_UPDATE2_DATA, u.address() + 64); // an empty iovec: the slot becomes sparse
        u.set(ValueLayout.JAVA_LONG, RSRC_UPDATE2_TAGS, u.address() + 80); // tag 0 for the empty slot
        u.set(ValueLayout.JAVA_INT, RSRC_UPDATE2_NR, 1);
        long rc = Sys.syscall(capture, SYS_IO_URING_REGISTER, fd, REGISTER_BUFFERS_UPDATE, u.address(), RSRC_UPDATE2_SIZE, 0, 0);
        if (rc < 0) {
            int errno = Sys.errno(capture);
            throw new RdmaException(Errno.of(errno), this + ": clearing " + s + " failed with errno " + errno);
        }
        s.cleared = true;
        awaitingTags.put(s.tag, s);
    }

    /** A chunk leaves (any thread): no new operation may use it; the owner clears it and lets go when quiet. */
    void removeChunk(FixedSlot s, Runnable hold) {
        s.removed = true;
        if (closed) {
            if (hold != null) {
                hold.run();
            }
            return;
        }
        if (Thread.currentThread() == owner) {
            retire(s, hold);
        } else {
            defer(new Deferred(s, hold, false));
        }
    }

    /** On the owner: clears the slot and waits until the kernel and every operation are done with it. */
    private void retire(FixedSlot s, Runnable hold) {
        s.hold = hold;
        if (s.registered && !s.cleared) {
            clearSlot(s);
        }
        while (!s.quiet()) {
            waitInternally();
        }
        finish(s);
    }

    private void finish(FixedSlot s) {
        freeIndex(s.index);
        Runnable h = s.hold;
        s.hold = null;
        if (h != null) {
            h.run();
        }
    }

    private void freeIndex(int index) {
        synchronized (usedBuffers) {
            usedBuffers.clear(index);
        }
    }

    private void defer(Deferred d) {
        deferred.add(d);
        hasDeferred = true;
    }

    /** The owner's part of what other threads left: registrations and retirements. */
    private void runDeferred() {
        hasDeferred = false;
        Deferred d;
        while ((d = deferred.poll()) != null) {
            FixedSlot s = d.slot();
            if (d.add()) {
                if (s.removed) {
                    continue; // gone before it was registered: its retirement follows in the queue
                }
                try {
                    registerSlot(s);
                } catch (RdmaException e) {
                    s.failure = e;
                    s.removed = true;
                }
            } else {
                retire(s, d.hold());
            }
        }
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
        writeSqe(sqe, OP_FSYNC, file.index, 0, 0, 0, dataOnly ? FSYNC_DATASYNC : 0, id, 0);
        commit(id, userData, null);
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
        if (offset < 0 || length <= 0 || offset > buffer.capacity() - length) {
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
        boolean fixed = op == OP_READ_FIXED || op == OP_WRITE_FIXED;
        writeSqe(sqe, op, file.index, fileOffset, address, length, 0, id, fixed ? s.index : 0);
        commit(id, userData, s);
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
            runDeferred(); // registered by another thread's allocation: do it now
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
        if (freeTop == 0) {
            throw new RdmaException(Errno.EBUSY, this + "." + what + ": " + capacity + " operations are prepared or in flight"
                    + " (the queue is full): submit and reap completions first");
        }
        return freeOps[freeTop - 1];
    }

    private long nextSqe() {
        int head = (int) INT.getAcquire(sq, sqHeadOff);
        if (sqTail - head >= sqEntries) {
            throw new RdmaException(Errno.EBUSY, this + ": the submission queue is full (" + sqEntries + " entries); submit() first");
        }
        return (long) (sqTail & sqMask) * SQE_SIZE;
    }

    private void writeSqe(long o, byte op, int fileIndex, long off, long addr, int len, int rwFlags, int id, int bufIndex) {
        MemorySegment q = sqes;
        q.set(ValueLayout.JAVA_LONG, o, 0L);
        q.set(ValueLayout.JAVA_LONG, o + 40, 0L);
        q.set(ValueLayout.JAVA_LONG, o + 48, 0L);
        q.set(ValueLayout.JAVA_LONG, o + 56, 0L);
        q.set(ValueLayout.JAVA_BYTE, o + SQE_OPCODE, op);
        q.set(ValueLayout.JAVA_BYTE, o + SQE_FLAGS, SQE_FIXED_FILE);
        q.set(ValueLayout.JAVA_INT, o + SQE_FD, fileIndex);
        q.set(ValueLayout.JAVA_LONG, o + SQE_OFF, off);
        q.set(ValueLayout.JAVA_LONG, o + SQE_ADDR, addr);
        q.set(ValueLayout.JAVA_INT, o + SQE_LEN, len);
        q.set(ValueLayout.JAVA_INT, o + SQE_RW_FLAGS, rwFlags);
        q.set(ValueLayout.JAVA_LONG, o + SQE_USER_DATA, id);
        q.set(ValueLayout.JAVA_SHORT, o + SQE_BUF_INDEX, (short) bufIndex);
    }

    private void commit(int id, long userData, FixedSlot s) {
        freeTop--;
        opUserData[id] = userData;
        opSlot[id] = s;
        if (s != null) {
            s.inFlight++;
        }
        inFlight++;
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
        if (hasDeferred) {
            runDeferred();
        }
        return enter(0, 0);
    }

    /** Publishes the prepared entries and enters the kernel; returns the entries it consumed. */
    private int enter(int minComplete, int flags) {
        int toSubmit = prepared;
        if (toSubmit > 0) {
            INT.setRelease(sq, sqTailOff, sqTail);
        } else if (minComplete == 0 && flags == 0) {
            return 0;
        }
        while (true) {
            long rc = Sys.syscall(capture, SYS_IO_URING_ENTER, fd, toSubmit, minComplete, flags, 0, 0);
            if (rc >= 0) {
                int n = (int) rc;
                prepared -= n;
                submitted += n;
                return n;
            }
            int errno = Sys.errno(capture);
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
        if (hasDeferred) {
            runDeferred();
        }
        int n = drainStash(handler);
        n += reap(handler);
        if (n == 0 && inFlight > prepared && kernelHasWork()) {
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
        if (hasDeferred) {
            runDeferred();
        }
        int n = drainStash(handler);
        n += reap(handler);
        while (n < minCompletions && inFlight > 0) {
            int want = Math.min(minCompletions - n, inFlight);
            enter(want, ENTER_GETEVENTS);
            n += reap(handler);
        }
        if (prepared > 0) {
            enter(0, 0);
        }
        return n;
    }

    private boolean kernelHasWork() {
        if (!taskrunFlag) {
            return true;
        }
        int f = (int) INT.getAcquire(sq, sqFlagsOff);
        return (f & (SQ_TASKRUN | SQ_CQ_OVERFLOW)) != 0;
    }

    private int drainStash(IoCompletionHandler handler) {
        int n = 0;
        while (stashCount > 0) {
            long ud = stashData[stashHead];
            int res = stashRes[stashHead];
            stashHead = (stashHead + 1) % stashData.length;
            stashCount--;
            completed++;
            n++;
            handler.onComplete(ud, res);
        }
        return n;
    }

    /** Reaps the completion queue; operations go to {@code handler}, or to the stash when it is null. */
    private int reap(IoCompletionHandler handler) {
        int n = 0;
        while (true) {
            // fields, not locals: a handler (or a chunk retiring inside one) may reap in between
            int head = cqHead;
            if (head == cqTailSeen) {
                cqTailSeen = (int) INT.getAcquire(cq, cqTailOff);
                if (head == cqTailSeen) {
                    return n;
                }
            }
            long o = cqesOff + (long) (head & cqMask) * CQE_SIZE;
            long ud = cq.get(ValueLayout.JAVA_LONG, o + CQE_USER_DATA);
            int res = cq.get(ValueLayout.JAVA_INT, o + CQE_RES);
            cqHead = head + 1;
            INT.setRelease(cq, cqHeadOff, head + 1);
            if (ud >= CANCEL_USER_DATA) {
                if (ud >= TAG_BASE) {
                    tagArrived(ud);
                }
                continue;
            }
            int id = (int) ud;
            long userData = opUserData[id];
            FixedSlot s = opSlot[id];
            opSlot[id] = null;
            freeOps[freeTop++] = id;
            inFlight--;
            if (s != null) {
                s.inFlight--;
            }
            if (handler == null) {
                int at = (stashHead + stashCount) % stashData.length;
                stashData[at] = userData;
                stashRes[at] = res;
                stashCount++;
            } else {
                completed++;
                n++;
                handler.onComplete(userData, res);
            }
        }
    }

    private void tagArrived(long tag) {
        FixedSlot s = awaitingTags.remove(tag);
        if (s != null) {
            s.tagSeen = true;
        }
    }

    /** Waits for at least one completion of anything and reaps into the stash (the ring waiting for itself). */
    private void waitInternally() {
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
        boolean onOwner = Thread.currentThread() == owner;
        if (onOwner) {
            dropPrepared();
            if (inFlight > 0) {
                cancelAll();
                while (inFlight > 0) {
                    waitInternally();
                }
            }
            runDeferred();
            for (IoRegistration r : registrations) {
                r.close();
            }
            for (IoFile f : List.copyOf(files)) {
                closeFile(f);
            }
            while (!awaitingTags.isEmpty()) {
                waitInternally();
            }
            stashCount = 0; // completions nobody reaped before close are dropped, as documented
        }
        closed = true;
        for (IoRegistration r : registrations) {
            r.detachAll(); // owner gone: the kernel has no I/O of it left
        }
        registrations.clear();
        Deferred d;
        while ((d = deferred.poll()) != null) {
            if (!d.add() && d.hold() != null) {
                d.hold().run();
            }
        }
        for (IoFile f : files) {
            Sys.close(capture, f.fd);
            f.closed = true;
        }
        files.clear();
        unmapAndClose();
    }

    /** Takes back the operations prepared and never submitted (their entries are still ours). */
    private void dropPrepared() {
        while (prepared > 0) {
            sqTail--;
            prepared--;
            long o = (long) (sqTail & sqMask) * SQE_SIZE;
            int id = (int) sqes.get(ValueLayout.JAVA_LONG, o + SQE_USER_DATA);
            FixedSlot s = opSlot[id];
            opSlot[id] = null;
            if (s != null) {
                s.inFlight--;
            }
            freeOps[freeTop++] = id;
            inFlight--;
        }
    }

    private void cancelAll() {
        int head = (int) INT.getAcquire(sq, sqHeadOff);
        if (sqTail - head >= sqEntries) {
            return;
        }
        long o = (long) (sqTail & sqMask) * SQE_SIZE;
        writeSqe(o, OP_ASYNC_CANCEL, 0, 0, 0, 0, ASYNC_CANCEL_ANY, 0, 0);
        sqes.set(ValueLayout.JAVA_BYTE, o + SQE_FLAGS, (byte) 0);
        sqes.set(ValueLayout.JAVA_INT, o + SQE_FD, -1);
        sqes.set(ValueLayout.JAVA_LONG, o + SQE_USER_DATA, CANCEL_USER_DATA);
        sqTail++;
        prepared++;
        enter(0, 0);
        prepared = 0;
    }

    private void unmapAndClose() {
        Sys.munmap(capture, sqesMapAddr, sqesMapLen);
        if (cqMapAddr != 0) {
            Sys.munmap(capture, cqMapAddr, cqMapLen);
        }
        Sys.munmap(capture, sqMapAddr, sqMapLen);
        Sys.close(capture, fd);
        closed = true;
        OPEN.remove(this);
        arena.close();
    }

    @Override
    public String toString() {
        return "IoRing[fd " + fd + ", " + sqEntries + " entries" + (closed ? ", closed" : "") + "]";
    }
}
