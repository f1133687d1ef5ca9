package io.regmem.core;

import io.regmem.core.internal.PoolLifecycle;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A zero-copy allocator of off-heap {@link PooledBuffer}s carved from large, never-moving chunks.
 *
 * <h2>Layout</h2>
 * <pre>
 *  ChunkSource ──mmap──▶ Chunk (chunkSize, e.g. 4 MiB; registered once by a transport)
 *                         ├─ slab for class 4 KiB: [buf][buf][buf]...  (slabSize, e.g. 256 KiB)
 *                         ├─ slab for class 64 B:  [b][b][b][b][b]...
 *                         └─ ... carved by a bump pointer; the chunk goes back when all of it is idle
 *  size &gt; largest class ──▶ a dedicated chunk per buffer, unmapped when the buffer is freed
 * </pre>
 * Sizes from 1 byte to {@code largestClass} are rounded up to one of four size classes per
 * doubling (see {@link #classSizeFor(long)}); larger sizes up to {@code maxBufferSize} get a
 * dedicated chunk. Every buffer's address is a multiple of {@code alignment}.
 *
 * <h2>Fast path</h2>
 * Each platform thread has, per pool and size class it uses, a {@link Magazine}: a bounded stack of
 * free buffers that only it touches, found with one load from the pool's table (indexed by size
 * class and thread id, see {@link ThreadCaches}). Allocate pops, free pushes: no shared write, no
 * lock, no garbage; a checked free is one compare-and-set on the buffer's own state. A magazine that
 * runs empty takes a batch from the class's stash (JCTools' {@code MpmcArrayQueue} of free handles);
 * one that overflows gives a batch back. Beyond the stash a free slot is idle, a bit in its slab
 * with no object, and binding idle slots (lowest address first) is the slow path. Virtual threads
 * use the stash directly; magazines of threads that died are reclaimed. A closed pool's table is
 * empty, so the fast path reads no {@code closed} flag. docs/allocator.md has the costs.
 *
 * <h2>Ownership and limits</h2>
 * A chunk whose slots are all idle goes back while the pool runs: on {@link #trim()}, or by the
 * decay ({@link BufferPoolBuilder#decay}): its listeners let go of it first (registrations end),
 * then its memory is decommitted and its address range kept for the next chunk. Reserved memory is
 * bounded by {@code maxBytes}. {@link #close()} closes the scope of every checked view, gives every
 * chunk back and reports buffers still out.
 *
 * <h2>Safety</h2>
 * See {@link SafetyMode}. Whatever the caller does through this API, the JVM does not crash.
 */
public final class BufferPool implements AutoCloseable {
    /** The byte that {@link SafetyMode#PARANOID} writes over freed memory. */
    public static final byte POISON = (byte) 0xDB;

    private static final System.Logger LOG = System.getLogger(BufferPool.class.getName());
    private static final AtomicInteger NAMES = new AtomicInteger();

    private final String name;
    private final SafetyMode mode;
    /** True in CHECKED and PARANOID: read on every free and every checked view access. */
    final boolean checked;
    private final boolean paranoid;
    private final ChunkSource source;
    private final long chunkSize;
    private final long alignment;
    private final long largestClass;
    private final long maxBufferSize;
    private final long maxBytes;
    /** {@link SizeClasses#quantumShift()}, one load closer. */
    private final int quantumShift;

    private final SizeClasses classes;
    private final SizeClass[] classState;
    private final ThreadCaches caches;
    /** {@link ThreadCaches#fast}, one load closer. */
    private final Magazine[] fast;
    private final Chunks chunks;
    private final LargeBuffers large;
    private final PoolTrim trim;
    private final Misses misses;

    private final Object closeLock = new Object();
    /** PARANOID only: the live buffers, for the leak report's allocation sites. */
    private final Set<PooledBuffer> liveParanoid = ConcurrentHashMap.newKeySet();
    private volatile boolean closed;
    private LeakReport closeReport;

    BufferPool(BufferPoolBuilder b) {
        this.name = b.name != null ? b.name : "BufferPool-" + NAMES.incrementAndGet();
        this.mode = b.mode;
        this.checked = b.mode != SafetyMode.FAST;
        this.paranoid = b.mode == SafetyMode.PARANOID;
        this.source = b.source;
        this.chunkSize = b.chunkSize;
        this.alignment = b.alignment;
        this.largestClass = b.largestClass;
        this.maxBufferSize = b.maxBufferSize;
        this.maxBytes = b.maxBytes;
        this.classes = new SizeClasses(Math.max(16, b.alignment), b.largestClass);
        this.quantumShift = classes.quantumShift();
        if (classes.count() >= 0xFF) { // a handle keeps its class's index in 8 bits (0xFF: a large buffer)
            throw new RdmaException(Errno.EINVAL, name + ": " + classes.count() + " size classes; at most 254");
        }
        this.classState = new SizeClass[classes.count()];
        for (int i = 0; i < classState.length; i++) {
            classState[i] = new SizeClass(i, classes.size(i), b.slabSize, b.threadCacheBytes);
        }
        this.caches = new ThreadCaches(classState, b.threadCacheBytes > 0);
        this.fast = caches.fast;
        this.chunks = new Chunks(name, source, chunkSize, maxBytes, b.preTouch);
        this.large = new LargeBuffers(chunks);
        this.misses = new Misses(this, classState, caches, chunks);
        this.trim = new PoolTrim(this, classState, caches, chunks, b.decayIdle, b.keepBytes);
        PoolLifecycle.opened(this);
        trim.start();
    }

    /** A builder with the documented defaults. */
    public static BufferPoolBuilder builder() {
        return new BufferPoolBuilder();
    }

    /**
     * The names of pools built and not yet closed, in this JVM. Tests assert it is empty at the end,
     * so a pool nobody closed fails the test that made it.
     */
    public static List<String> openPools() {
        return PoolLifecycle.open().stream().map(p -> ((BufferPool) p).name()).toList();
    }

    // ---- allocate and free ---------------------------------------------------------------------

    /**
     * Allocates a buffer of at least {@code size} bytes. Sizes up to the largest size class come
     * from the calling thread's cache (no atomics, no garbage) or a shared free list; larger ones
     * get a dedicated chunk (an mmap call).
     *
     * @param size bytes, in [1, maxBufferSize]
     * @return a live buffer owned by the caller, who must {@link PooledBuffer#close() close} it
     * @throws RdmaException          {@link Errno#EINVAL} for a size out of range,
     *                                {@link Errno#EBADF} if the pool is closed
     * @throws PoolExhaustedException when the memory would exceed {@code maxBytes} or the source refuses it
     */
    public PooledBuffer allocate(long size) {
        if (size <= 0 || size > largestClass) {
            return allocateLarge(size);
        }
        int cls = SizeClasses.indexOf(size, quantumShift);
        // The fast path: the calling thread's magazine of the class, one load from the table. No
        // read of `closed`: a closed pool's table is empty (see ThreadCaches), so the miss path refuses.
        long id = Thread.currentThread().threadId();
        Magazine m = fast[ThreadCaches.index(cls, id)];
        PooledBuffer b;
        if (m != null && m.threadId == id && m.top > 0) {
            m.allocations++;
            b = m.pop();
        } else {
            b = misses.allocate(cls);
        }
        handOut(b, size);
        return b;
    }

    private void handOut(PooledBuffer b, long size) {
        b.onAllocate(size);
        if (paranoid) {
            b.allocationSite(new Throwable("allocated by " + Thread.currentThread().getName()));
            if (b.sizeClass() != PooledBuffer.LARGE_CLASS) {
                liveParanoid.add(b); // large buffers are listed by LargeBuffers
            }
        }
    }

    /**
     * Returns a buffer to this pool; the same as {@link PooledBuffer#close()}.
     *
     * @param buffer a live buffer of this pool
     * @throws RdmaException {@link Errno#EINVAL} for a buffer of another pool or a double free
     *                       (detected in checked modes, and always for buffers above the largest class);
     *                       {@link Errno#EBUSY} for a {@linkplain PooledBuffer#pin() pinned} buffer (every
     *                       mode); {@link Errno#EBADF} if the pool is closed. The pool is unchanged.
     */
    public void free(PooledBuffer buffer) {
        if (buffer.pool != this) {
            throw new RdmaException(Errno.EINVAL, name + ": cannot free " + buffer + ": it belongs to pool "
                    + buffer.pool.name);
        }
        int cls = buffer.sizeClass();
        if (cls == PooledBuffer.LARGE_CLASS) {
            if (closed) {
                throw closedException("free");
            }
            large.free(buffer, name);
            return;
        }
        long id = Thread.currentThread().threadId();
        Magazine m = fast[ThreadCaches.index(cls, id)];
        if (m == null || m.threadId != id) {
            m = misses.magazine(cls, "free"); // not in the table, or the thread has none (null): the slow path
        }
        markFree(buffer);
        if (m == null) {
            classState[cls].release(buffer);
        } else if (!m.push(buffer)) {
            classState[cls].flush(m, buffer);
        }
    }

    /** The checks of a free and the move to FREE; throws (changing nothing) if the free is refused. */
    private void markFree(PooledBuffer buffer) {
        if (checked) {
            int was = buffer.markFreeChecked();
            if (was != PooledBuffer.LIVE) {
                throw was == PooledBuffer.FREE ? new RdmaException(Errno.EINVAL, name + ": double free of " + buffer)
                        : buffer.pinnedException(name);
            }
            if (paranoid) {
                buffer.allocationSite(null);
                liveParanoid.remove(buffer);
                buffer.segmentForPool().fill(POISON);
            }
        } else {
            if (buffer.pinnedPlain()) {
                throw buffer.pinnedException(name); // even FAST never hands out memory an I/O still uses
            }
            buffer.markFreePlain();
        }
    }

    private PooledBuffer allocateLarge(long size) {
        if (closed) {
            throw closedException("allocate");
        }
        checkSize(size);
        PooledBuffer b = large.allocate(this, size, source.pageSize(), this::inUseBytes);
        handOut(b, size);
        if (closed && large.releaseIfLive(b)) {
            // close() ran while we mapped: undo, so nothing outlives the pool.
            throw closedException("allocate");
        }
        return b;
    }

    private void checkSize(long size) {
        if (size <= 0 || size > maxBufferSize) {
            throw new RdmaException(Errno.EINVAL, name + ": size " + size + " is not in [1, maxBufferSize="
                    + maxBufferSize + "]");
        }
    }

    /**
     * Gives every buffer in the calling thread's cache back to the shared free lists, so other
     * threads can use them. Call it before a thread stops allocating from this pool for a long time
     * (caches of threads that die are reclaimed automatically).
     */
    public void releaseThreadCache() {
        caches.releaseCurrent();
    }

    /**
     * Gives back every size-class chunk that holds no live buffer: {@code trim(0)}.
     *
     * @return bytes given back
     */
    public long trim() {
        return trim(0);
    }

    /**
     * Gives back the size-class chunks that hold no live buffer, highest address first, while the
     * pool keeps at least {@code keepBytes} reserved. First the calling thread's cache and every
     * class's stash are made idle (their handles dropped) and the caches of dead threads reclaimed;
     * other live threads' caches keep their buffers, and so their chunks. Each chunk's listeners let
     * go of it first (a registration ends, waiting for copies in flight; an io_uring registration
     * retires it, its memory going back when its I/O completed), then its memory is decommitted and
     * its address range kept for the pool's next chunk. Nothing changes for live buffers; it runs on
     * the caller's thread and takes the classes' locks, not the fast path's. A source that cannot
     * {@linkplain ChunkSource#canDecommit() decommit} gives nothing back.
     *
     * @param keepBytes reserved bytes to keep, at least 0
     * @return bytes given back (counted off {@code reservedBytes} once their listeners let go)
     * @throws RdmaException {@link Errno#EINVAL} for a negative {@code keepBytes}, {@link Errno#EBADF}
     *                       if the pool is closed, or what a listener threw (its chunk keeps its pages)
     */
    public long trim(long keepBytes) {
        if (keepBytes < 0) {
            throw new RdmaException(Errno.EINVAL, name + ": trim(" + keepBytes + "): keepBytes must not be negative");
        }
        return trim.trim(keepBytes);
    }

    // ---- accounting ----------------------------------------------------------------------------

    /**
     * A snapshot of the pool's accounting; see {@link PoolStats} for its precision. Taken between two
     * rounds of the decay (which moves free buffers between caches, stashes and idle slots), so it is
     * exact whenever the application's threads neither allocate nor free. Allocates.
     */
    public PoolStats stats() {
        trim.lock.lock();
        try {
            return PoolStats.collect(name, classState, caches, chunks, large);
        } finally {
            trim.lock.unlock();
        }
    }

    /** In-use bytes for an exhaustion's message: read without the decay's lock (the caller may hold a class's). */
    long inUseBytes() {
        return PoolStats.collect(name, classState, caches, chunks, large).inUseBytes();
    }

    // ---- close ---------------------------------------------------------------------------------

    /**
     * Closes the pool: the scope of every checked view ends, every chunk goes back to the source
     * (retired instead where unchecked views were made), and buffers still out are reported.
     * Idempotent: a second call returns the first report.
     *
     * @return what was still allocated
     * @throws RdmaException {@link Errno#EBUSY} if another thread is inside an access to a checked
     *                       view right now; the pool then stays open and unchanged
     */
    public LeakReport closeAndReport() {
        synchronized (closeLock) {
            if (closeReport != null) {
                return closeReport;
            }
            trim.lock.lock(); // no trim or decay round runs while the pool closes
            try {
                return closeLocked();
            } finally {
                trim.lock.unlock();
            }
        }
    }

    private LeakReport closeLocked() {
        closed = true;
        caches.clearTable(); // from here every allocate and free takes the slow path, which refuses
        LeakReport report = LeakCollector.collect(name, paranoid ? liveParanoid : null, classState, caches, large);
        if (!chunks.closeAll()) {
            closed = false;
            throw new RdmaException(Errno.EBUSY, name + ": cannot close while another thread accesses one of its "
                    + "buffers");
        }
        large.releaseAll();
        trim.stop();
        caches.removeCurrent();
        PoolLifecycle.closed(this);
        closeReport = report;
        PoolEvents.leak(name, report);
        return report;
    }

    /**
     * Closes the pool as {@link #closeAndReport()} does and logs a warning (System.Logger) if
     * buffers were still out. Only the call that closes the pool logs; later calls do nothing.
     */
    @Override
    public void close() {
        boolean wasOpen;
        LeakReport report;
        synchronized (closeLock) {
            wasOpen = closeReport == null;
            report = closeAndReport();
        }
        if (wasOpen && !report.clean()) {
            LOG.log(System.Logger.Level.WARNING, report.describe());
        }
    }

    /** True once the pool is closed. */
    public boolean isClosed() {
        return closed;
    }

    // ---- description ---------------------------------------------------------------------------

    /** The pool's name, used in every message. */
    public String name() {
        return name;
    }

    /** The pool's safety mode. */
    public SafetyMode safetyMode() {
        return mode;
    }

    /** The chunk source. */
    public ChunkSource chunkSource() {
        return source;
    }

    /** Bytes per chunk reserved for size classes. */
    public long chunkSize() {
        return chunkSize;
    }

    /** The alignment of every buffer's address. */
    public long alignment() {
        return alignment;
    }

    /** The largest size class; larger buffers get a dedicated chunk. */
    public long largestClass() {
        return largestClass;
    }

    /** The largest size {@link #allocate} accepts. */
    public long maxBufferSize() {
        return maxBufferSize;
    }

    /** The limit on reserved bytes. */
    public long maxBytes() {
        return maxBytes;
    }

    /**
     * The capacity a buffer of {@code size} bytes gets: its size class, or the size rounded up to
     * the source's page size above the largest class.
     *
     * @throws RdmaException {@link Errno#EINVAL} for a size out of [1, maxBufferSize]
     */
    public long classSizeFor(long size) {
        checkSize(size);
        if (size <= largestClass) {
            return classes.size(classes.indexOf(size));
        }
        long page = source.pageSize();
        return (size + page - 1) & -page;
    }

    /**
     * Adds a listener told of every chunk the pool has now and of every chunk it gains or gives
     * back later, size-class chunks and large buffers' dedicated chunks alike: the hook a transport
     * uses to register each chunk once, at birth.
     *
     * @throws RdmaException {@link Errno#EBADF} if the pool is closed; {@link Errno#EBUSY} if a listener
     *                       of the same {@linkplain ChunkListener#role() role} is there already; or
     *                       whatever the listener throws for an existing chunk (then it is not added)
     */
    public void addChunkListener(ChunkListener listener) {
        if (closed) {
            throw closedException("addChunkListener");
        }
        chunks.addListener(Objects.requireNonNull(listener, "listener"));
    }

    /** Removes a listener; it is told nothing more. */
    public void removeChunkListener(ChunkListener listener) {
        chunks.removeListener(listener);
    }

    /**
     * The chunks reserved for size classes, in order (a snapshot). Registration code registers each
     * once; buffers above the largest class have their own chunk ({@link PooledBuffer#chunk()}).
     */
    public List<Chunk> chunks() {
        return chunks.snapshot();
    }

    RdmaException closedException(String op) {
        return new RdmaException(Errno.EBADF, name + ": " + op + " after the pool was closed");
    }

    @Override
    public String toString() {
        return "BufferPool[" + name + ", " + mode + ", " + source.name() + "]";
    }
}
