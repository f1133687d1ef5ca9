package io.regmem.core;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A zero-copy allocator of off-heap {@link PooledBuffer}s carved from large, never-moving chunks.
 *
 * <h2>Layout</h2>
 * <pre>
 *  ChunkSource ──mmap──▶ Chunk (chunkSize, e.g. 4 MiB; registered once by a transport)
 *                         ├─ slab for class 4 KiB: [buf][buf][buf]...  (slabSize, e.g. 256 KiB)
 *                         ├─ slab for class 64 B:  [b][b][b][b][b]...
 *                         └─ ... carved by a bump pointer, never returned until close
 *  size &gt; largest class ──▶ a dedicated chunk per buffer, unmapped when the buffer is freed
 * </pre>
 * Sizes from 1 byte to {@code largestClass} are rounded up to one of four size classes per
 * doubling (see {@link #classSizeFor(long)}); larger sizes up to {@code maxBufferSize} get a
 * dedicated chunk. Every buffer's address is a multiple of {@code alignment}.
 *
 * <h2>Fast path</h2>
 * Each platform thread has a cache per pool (a bounded stack per size class). Allocate pops from
 * it, free pushes onto it: no atomic instruction, no shared write, no garbage. A cache that runs
 * empty takes a batch from the class's shared lock-free free list (JCTools'
 * {@code MpmcUnboundedXaddArrayQueue}); one that overflows gives a batch back. A buffer freed on
 * another thread goes to that thread's cache and so back into circulation. Virtual threads bypass
 * the caches and use the shared lists directly. Caches of threads that died are reclaimed the next
 * time a size class runs out of memory.
 *
 * <h2>Ownership and limits</h2>
 * Memory given to a size class stays with it until the pool closes: a pool's footprint is its
 * high-water mark per class, bounded by {@code maxBytes}. {@link #close()} closes the scope of
 * every checked view, gives every chunk back and reports buffers still out.
 *
 * <h2>Safety</h2>
 * See {@link SafetyMode}. Whatever the caller does through this API, the JVM does not crash.
 */
public final class BufferPool implements AutoCloseable {
    /** The byte that {@link SafetyMode#PARANOID} writes over freed memory. */
    public static final byte POISON = (byte) 0xDB;

    private static final System.Logger LOG = System.getLogger(BufferPool.class.getName());
    private static final Set<BufferPool> OPEN = ConcurrentHashMap.newKeySet();
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
    private final boolean threadCaches;

    private final SizeClasses classes;
    private final SizeClass[] classState;
    private final ThreadLocal<ThreadCache> caches;
    private final List<ThreadCache> cacheRegistry = new ArrayList<>();
    private final ReentrantLock registryLock = new ReentrantLock();

    /** The scope of every pooled buffer's segment: closing it makes stale checked views throw. */
    private final Arena scope = Arena.ofShared();
    private final ReentrantLock chunkLock = new ReentrantLock();
    private final List<Chunk> chunks = new ArrayList<>();
    private MemorySegment current;
    private Chunk currentChunk;
    private long currentOffset;

    private final AtomicLong reserved = new AtomicLong();
    private final Set<PooledBuffer> largeLive = ConcurrentHashMap.newKeySet();
    private final AtomicLong largeAllocations = new AtomicLong();
    private final AtomicLong largeFrees = new AtomicLong();
    private final AtomicLong largeBytes = new AtomicLong();
    /** Counts of virtual threads, disabled caches and caches of dead threads, per class. */
    private final AtomicLongArray uncachedAllocations;
    private final AtomicLongArray uncachedFrees;
    private final AtomicLong uncachedMisses = new AtomicLong();

    private final Object closeLock = new Object();
    private volatile boolean closed;
    private LeakReport closeReport;

    private BufferPool(Builder b) {
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
        this.threadCaches = b.threadCacheBytes > 0;
        this.classes = new SizeClasses(Math.max(16, b.alignment), b.largestClass);
        this.classState = new SizeClass[classes.count()];
        for (int i = 0; i < classState.length; i++) {
            classState[i] = new SizeClass(i, classes.size(i), b.slabSize, b.threadCacheBytes);
        }
        this.caches = ThreadLocal.withInitial(this::newCache);
        this.uncachedAllocations = new AtomicLongArray(classState.length);
        this.uncachedFrees = new AtomicLongArray(classState.length);
        OPEN.add(this);
    }

    /** A builder with the documented defaults. */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * The names of pools built and not yet closed, in this JVM. Tests assert it is empty at the end,
     * so a pool nobody closed fails the test that made it.
     */
    public static List<String> openPools() {
        List<String> names = new ArrayList<>();
        for (BufferPool p : OPEN) {
            names.add(p.name);
        }
        return names;
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
        if (closed) {
            throw closedException("allocate");
        }
        if (size <= 0 || size > largestClass) {
            return allocateLarge(size);
        }
        SizeClass sc = classState[classes.indexOf(size)];
        PooledBuffer b;
        if (threadCaches && !Thread.currentThread().isVirtual()) {
            ThreadCache tc = caches.get();
            b = tc.pop(sc.index);
            if (b == null) {
                b = refill(tc, sc);
                tc.misses++;
            }
            tc.allocations[sc.index]++;
        } else {
            b = sc.free.poll();
            if (b == null) {
                b = carve(sc, null);
                uncachedMisses.incrementAndGet();
            }
            uncachedAllocations.incrementAndGet(sc.index);
        }
        b.onAllocate(size);
        if (paranoid) {
            b.allocationSite = new Throwable("allocated by " + Thread.currentThread().getName());
        }
        return b;
    }

    /**
     * Returns a buffer to this pool; the same as {@link PooledBuffer#close()}.
     *
     * @param buffer a live buffer of this pool
     * @throws RdmaException {@link Errno#EINVAL} for a buffer of another pool or a double free
     *                       (detected in checked modes, and always for buffers above the largest class);
     *                       {@link Errno#EBADF} if the pool is closed. The pool is unchanged.
     */
    public void free(PooledBuffer buffer) {
        if (buffer.pool != this) {
            throw new RdmaException(Errno.EINVAL, name + ": cannot free " + buffer + ": it belongs to pool "
                    + buffer.pool.name);
        }
        if (closed) {
            throw closedException("free");
        }
        if (buffer.sizeClass == PooledBuffer.LARGE_CLASS) {
            freeLarge(buffer);
            return;
        }
        if (checked) {
            if (!buffer.markFreeChecked()) {
                throw doubleFree(buffer);
            }
            if (paranoid) {
                buffer.allocationSite = null;
                buffer.segmentForPool().fill(POISON);
            }
        } else {
            buffer.markFreePlain();
        }
        int cls = buffer.sizeClass;
        if (threadCaches && !Thread.currentThread().isVirtual()) {
            ThreadCache tc = caches.get();
            tc.frees[cls]++;
            if (!tc.push(cls, buffer)) {
                flush(tc, classState[cls], buffer);
            }
        } else {
            classState[cls].free.offer(buffer);
            uncachedFrees.incrementAndGet(cls);
        }
    }

    /** Takes a batch from the shared free list into the cache and returns one buffer of it. */
    private PooledBuffer refill(ThreadCache tc, SizeClass sc) {
        PooledBuffer first = sc.free.poll();
        if (first == null) {
            return carve(sc, tc);
        }
        tc.ensureStack(sc.index, sc.cacheCapacity);
        for (int i = 1; i < sc.batch; i++) {
            PooledBuffer b = sc.free.poll();
            if (b == null) {
                break;
            }
            tc.push(sc.index, b);
        }
        return first;
    }

    /** The cache is full (or has no stack yet): give its oldest batch to the shared list, keep {@code b}. */
    private void flush(ThreadCache tc, SizeClass sc, PooledBuffer b) {
        int cls = sc.index;
        if (tc.stacks[cls].length == 0) {
            tc.ensureStack(cls, sc.cacheCapacity);
        } else {
            PooledBuffer[] stack = tc.stacks[cls];
            int n = Math.min(sc.batch, tc.tops[cls]);
            for (int i = 0; i < n; i++) {
                sc.free.offer(stack[i]);
            }
            System.arraycopy(stack, n, stack, 0, tc.tops[cls] - n);
            tc.tops[cls] -= n;
        }
        tc.push(cls, b);
    }

    /**
     * Carves a new slab for a class: one buffer for the caller, a batch into its cache, the rest
     * onto the shared list. Reclaims dead threads' caches first, since they may hold free buffers.
     */
    private PooledBuffer carve(SizeClass sc, ThreadCache tc) {
        sc.carveLock.lock();
        try {
            PooledBuffer b = sc.free.poll();
            if (b != null) {
                return b;
            }
            if (reclaimDeadCaches() > 0 && (b = sc.free.poll()) != null) {
                return b;
            }
            if (closed) {
                throw closedException("allocate");
            }
            PooledBuffer[] slab = carveSlab(sc);
            sc.slabs.add(slab);
            sc.slots += slab.length;
            int next = 1;
            if (tc != null) {
                tc.ensureStack(sc.index, sc.cacheCapacity);
                for (; next < slab.length && next < sc.batch; next++) {
                    tc.push(sc.index, slab[next]);
                }
            }
            for (; next < slab.length; next++) {
                sc.free.offer(slab[next]);
            }
            return slab[0];
        } finally {
            sc.carveLock.unlock();
        }
    }

    private PooledBuffer[] carveSlab(SizeClass sc) {
        chunkLock.lock();
        try {
            long remaining = currentChunk == null ? 0 : currentChunk.size() - currentOffset;
            if (remaining < sc.size) {
                newChunk();
                remaining = chunkSize;
            }
            long bytes = Math.min(sc.slabBytes, (remaining / sc.size) * sc.size);
            int n = (int) (bytes / sc.size);
            PooledBuffer[] slab = new PooledBuffer[n];
            for (int i = 0; i < n; i++) {
                MemorySegment slot = current.asSlice(currentOffset + i * sc.size, sc.size);
                slab[i] = new PooledBuffer(this, sc.index, currentChunk, slot, null);
            }
            currentOffset += bytes;
            return slab;
        } finally {
            chunkLock.unlock();
        }
    }

    /** Reserves and maps a new chunk for the size classes; the old chunk's tail stays unused. */
    private void newChunk() {
        reserve(chunkSize);
        Chunk chunk;
        try {
            chunk = source.allocate(chunkSize, source.pageSize());
        } catch (RuntimeException e) {
            reserved.addAndGet(-chunkSize);
            throw e;
        }
        chunks.add(chunk);
        currentChunk = chunk;
        current = MemorySegment.ofAddress(chunk.address()).reinterpret(chunkSize, scope, null);
        currentOffset = 0;
    }

    private PooledBuffer allocateLarge(long size) {
        if (size <= 0 || size > maxBufferSize) {
            throw new RdmaException(Errno.EINVAL, name + ": size " + size + " is not in [1, maxBufferSize="
                    + maxBufferSize + "]");
        }
        long page = source.pageSize();
        long bytes = (size + page - 1) & -page;
        reserve(bytes);
        Chunk chunk;
        try {
            chunk = source.allocate(bytes, page);
        } catch (RuntimeException e) {
            reserved.addAndGet(-bytes);
            throw e;
        }
        Arena arena = Arena.ofShared();
        MemorySegment segment = MemorySegment.ofAddress(chunk.address()).reinterpret(bytes, arena, null);
        PooledBuffer b = new PooledBuffer(this, PooledBuffer.LARGE_CLASS, chunk, segment, arena);
        largeLive.add(b);
        largeAllocations.incrementAndGet();
        largeBytes.addAndGet(bytes);
        b.onAllocate(size);
        if (paranoid) {
            b.allocationSite = new Throwable("allocated by " + Thread.currentThread().getName());
        }
        if (closed && largeLive.remove(b)) {
            // close() ran while we mapped: undo, so nothing outlives the pool.
            releaseLarge(b);
            throw closedException("allocate");
        }
        return b;
    }

    private void freeLarge(PooledBuffer b) {
        if (!b.markFreeChecked()) {
            throw doubleFree(b);
        }
        if (!largeLive.remove(b)) {
            return; // close() took it concurrently and released it
        }
        largeFrees.incrementAndGet();
        releaseLarge(b);
    }

    private void releaseLarge(PooledBuffer b) {
        b.largeArena.close();
        long bytes = b.chunk.size();
        largeBytes.addAndGet(-bytes);
        releaseChunk(b.chunk);
        reserved.addAndGet(-bytes);
    }

    private void releaseChunk(Chunk chunk) {
        if (chunk.hasUncheckedViews()) {
            source.retire(chunk);
        } else {
            source.release(chunk);
        }
    }

    private void reserve(long bytes) {
        while (true) {
            long r = reserved.get();
            long next = r + bytes;
            if (next > maxBytes || next < 0) {
                throw new PoolExhaustedException(name, maxBytes, r, inUseBytes(), bytes);
            }
            if (reserved.compareAndSet(r, next)) {
                return;
            }
        }
    }

    // ---- thread caches -------------------------------------------------------------------------

    private ThreadCache newCache() {
        ThreadCache tc = new ThreadCache(Thread.currentThread(), classState.length);
        registryLock.lock();
        try {
            cacheRegistry.add(tc);
        } finally {
            registryLock.unlock();
        }
        return tc;
    }

    /**
     * Gives every buffer in the calling thread's cache back to the shared free lists, so other
     * threads can use them. Call it before a thread stops allocating from this pool for a long time
     * (caches of threads that die are reclaimed automatically).
     */
    public void releaseThreadCache() {
        if (!threadCaches || Thread.currentThread().isVirtual()) {
            return;
        }
        ThreadCache tc = caches.get();
        for (int cls = 0; cls < classState.length; cls++) {
            drainStack(tc, cls);
        }
    }

    private void drainStack(ThreadCache tc, int cls) {
        PooledBuffer[] stack = tc.stacks[cls];
        int top = tc.tops[cls];
        for (int i = 0; i < top; i++) {
            classState[cls].free.offer(stack[i]);
        }
        tc.tops[cls] = 0;
    }

    /** Moves the cached buffers and counters of dead threads to the shared state; returns buffers moved. */
    private long reclaimDeadCaches() {
        long moved = 0;
        registryLock.lock();
        try {
            for (int i = cacheRegistry.size() - 1; i >= 0; i--) {
                ThreadCache tc = cacheRegistry.get(i);
                if (!tc.ownerDead()) {
                    continue;
                }
                moved += tc.cached();
                for (int cls = 0; cls < classState.length; cls++) {
                    drainStack(tc, cls);
                    uncachedAllocations.addAndGet(cls, tc.allocations[cls]);
                    uncachedFrees.addAndGet(cls, tc.frees[cls]);
                }
                uncachedMisses.addAndGet(tc.misses);
                cacheRegistry.remove(i);
            }
        } finally {
            registryLock.unlock();
        }
        return moved;
    }

    // ---- accounting ----------------------------------------------------------------------------

    /** A snapshot of the pool's accounting; see {@link PoolStats} for its precision. Allocates. */
    public PoolStats stats() {
        int n = classState.length;
        long[] allocs = new long[n];
        long[] frees = new long[n];
        long misses = uncachedMisses.get();
        for (int cls = 0; cls < n; cls++) {
            allocs[cls] = uncachedAllocations.get(cls);
            frees[cls] = uncachedFrees.get(cls);
        }
        registryLock.lock();
        try {
            for (ThreadCache tc : cacheRegistry) {
                for (int cls = 0; cls < n; cls++) {
                    allocs[cls] += tc.allocations[cls];
                    frees[cls] += tc.frees[cls];
                }
                misses += tc.misses;
            }
        } finally {
            registryLock.unlock();
        }
        long inUse = largeBytes.get();
        long large = largeLive.size();
        long live = large;
        long totalAllocs = largeAllocations.get();
        long totalFrees = largeFrees.get();
        List<PoolStats.ClassStats> perClass = new ArrayList<>();
        for (int cls = 0; cls < n; cls++) {
            long classLive = allocs[cls] - frees[cls];
            live += classLive;
            inUse += classLive * classState[cls].size;
            totalAllocs += allocs[cls];
            totalFrees += frees[cls];
            if (classState[cls].slots > 0) {
                perClass.add(new PoolStats.ClassStats(classState[cls].size, classState[cls].slots, classLive, allocs[cls]));
            }
        }
        int chunkCount;
        chunkLock.lock();
        try {
            chunkCount = chunks.size();
        } finally {
            chunkLock.unlock();
        }
        return new PoolStats(name, reserved.get(), inUse, live, chunkCount, large, totalAllocs, totalFrees,
                misses + largeAllocations.get(), List.copyOf(perClass));
    }

    private long inUseBytes() {
        return stats().inUseBytes();
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
            closed = true;
            LeakReport report = collectLeaks();
            try {
                scope.close();
            } catch (IllegalStateException e) {
                closed = false;
                throw new RdmaException(Errno.EBUSY, name + ": cannot close while another thread accesses one of its "
                        + "buffers", e);
            }
            chunkLock.lock();
            try {
                for (Chunk c : chunks) {
                    releaseChunk(c);
                }
                reserved.addAndGet(-chunks.size() * chunkSize);
                chunks.clear();
                current = null;
                currentChunk = null;
            } finally {
                chunkLock.unlock();
            }
            for (PooledBuffer b : largeLive) {
                if (largeLive.remove(b)) {
                    releaseLarge(b);
                }
            }
            caches.remove();
            OPEN.remove(this);
            closeReport = report;
            return report;
        }
    }

    /**
     * Closes the pool as {@link #closeAndReport()} does and logs a warning (System.Logger) if
     * buffers were still out.
     */
    @Override
    public void close() {
        LeakReport report = closeAndReport();
        if (!report.clean()) {
            LOG.log(System.Logger.Level.WARNING, report.describe());
        }
    }

    /** True once the pool is closed. */
    public boolean isClosed() {
        return closed;
    }

    private LeakReport collectLeaks() {
        long count = 0;
        long bytes = 0;
        List<LeakReport.Leak> listed = new ArrayList<>();
        for (SizeClass sc : classState) {
            sc.carveLock.lock();
            try {
                for (PooledBuffer[] slab : sc.slabs) {
                    for (PooledBuffer b : slab) {
                        if (b.isLive()) {
                            count++;
                            bytes += b.capacity();
                            if (listed.size() < LeakReport.MAX_LISTED) {
                                listed.add(new LeakReport.Leak(b.toString(), b.allocationSite));
                            }
                        }
                    }
                }
            } finally {
                sc.carveLock.unlock();
            }
        }
        for (PooledBuffer b : largeLive) {
            if (b.isLive()) {
                count++;
                bytes += b.capacity();
                if (listed.size() < LeakReport.MAX_LISTED) {
                    listed.add(new LeakReport.Leak(b.toString(), b.allocationSite));
                }
            }
        }
        return new LeakReport(name, count, bytes, List.copyOf(listed));
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
        if (size <= 0 || size > maxBufferSize) {
            throw new RdmaException(Errno.EINVAL, name + ": size " + size + " is not in [1, maxBufferSize="
                    + maxBufferSize + "]");
        }
        if (size <= largestClass) {
            return classes.size(classes.indexOf(size));
        }
        long page = source.pageSize();
        return (size + page - 1) & -page;
    }

    /**
     * The chunks reserved for size classes, in order (a snapshot). Registration code registers each
     * once; buffers above the largest class have their own chunk ({@link PooledBuffer#chunk()}).
     */
    public List<Chunk> chunks() {
        chunkLock.lock();
        try {
            return List.copyOf(chunks);
        } finally {
            chunkLock.unlock();
        }
    }

    private RdmaException closedException(String op) {
        return new RdmaException(Errno.EBADF, name + ": " + op + " after the pool was closed");
    }

    private RdmaException doubleFree(PooledBuffer b) {
        return new RdmaException(Errno.EINVAL, name + ": double free of " + b);
    }

    @Override
    public String toString() {
        return "BufferPool[" + name + ", " + mode + ", " + source.name() + "]";
    }

    /**
     * Configures a {@link BufferPool}. Every setting has a default; {@link #build()} checks them
     * together and throws {@link RdmaException} ({@link Errno#EINVAL}) naming the bad one.
     */
    public static final class Builder {
        private String name;
        private SafetyMode mode = SafetyMode.CHECKED;
        private ChunkSource source = ChunkSource.mmap();
        private long chunkSize = 4L << 20;
        private long alignment = 64;
        private long largestClass = 1L << 20;
        private long maxBufferSize = 1L << 30;
        private long maxBytes = Long.MAX_VALUE;
        private long slabSize = 256L << 10;
        private long threadCacheBytes = 1L << 20;

        private Builder() {
        }

        /** A name for messages and reports. Default: {@code BufferPool-N}. */
        public Builder name(String name) {
            this.name = name;
            return this;
        }

        /** Checks done on allocate and free. Default: {@link SafetyMode#CHECKED}. */
        public Builder safetyMode(SafetyMode mode) {
            this.mode = java.util.Objects.requireNonNull(mode, "mode");
            return this;
        }

        /** Where chunks come from. Default: {@link ChunkSource#mmap()}. */
        public Builder chunkSource(ChunkSource source) {
            this.source = java.util.Objects.requireNonNull(source, "source");
            return this;
        }

        /** Bytes per chunk for size classes: a multiple of the source's page size. Default: 4 MiB. */
        public Builder chunkSize(long bytes) {
            this.chunkSize = bytes;
            return this;
        }

        /**
         * The alignment of every buffer's address and the granularity of size classes: a power of
         * two from 8 up to the source's page size. Default: 64 (a cache line). Use 4096 for page-aligned buffers.
         */
        public Builder alignment(long bytes) {
            this.alignment = bytes;
            return this;
        }

        /** Page-aligned buffers: {@code alignment(source page size)}. */
        public Builder pageAligned() {
            this.alignment = source.pageSize();
            return this;
        }

        /**
         * The largest size class: a power of two, at least 4 x alignment, at most the chunk size.
         * Larger buffers get a dedicated chunk each. Default: 1 MiB.
         */
        public Builder largestClass(long bytes) {
            this.largestClass = bytes;
            return this;
        }

        /** The largest buffer {@link BufferPool#allocate} accepts. Default: 1 GiB. */
        public Builder maxBufferSize(long bytes) {
            this.maxBufferSize = bytes;
            return this;
        }

        /**
         * The most chunk memory the pool may reserve, at least one chunk. Default: unlimited.
         * Going over it throws {@link PoolExhaustedException}.
         */
        public Builder maxBytes(long bytes) {
            this.maxBytes = bytes;
            return this;
        }

        /** Chunk bytes carved at a time for one size class (at least one buffer). Default: 256 KiB. */
        public Builder slabSize(long bytes) {
            this.slabSize = bytes;
            return this;
        }

        /**
         * Bytes per size class a thread may keep in its cache (between 2 and 512 buffers per class);
         * 0 disables thread caches. Default: 1 MiB.
         */
        public Builder threadCacheBytes(long bytes) {
            this.threadCacheBytes = bytes;
            return this;
        }

        /**
         * Builds the pool. Reserves no memory yet: the first allocation of each size class does.
         *
         * @throws RdmaException {@link Errno#EINVAL} naming the setting that breaks a rule
         */
        public BufferPool build() {
            String who = "BufferPool.Builder" + (name != null ? "[" + name + "]" : "");
            long page = source.pageSize();
            if (Long.bitCount(alignment) != 1 || alignment < 8 || alignment > page) {
                throw new RdmaException(Errno.EINVAL, who + ": alignment " + alignment
                        + " must be a power of two in [8, " + page + "]");
            }
            if (chunkSize <= 0 || chunkSize % page != 0) {
                throw new RdmaException(Errno.EINVAL, who + ": chunkSize " + chunkSize
                        + " must be a positive multiple of the page size " + page);
            }
            long quantum = Math.max(16, alignment);
            if (Long.bitCount(largestClass) != 1 || largestClass < 4 * quantum || largestClass > chunkSize) {
                throw new RdmaException(Errno.EINVAL, who + ": largestClass " + largestClass
                        + " must be a power of two in [" + 4 * quantum + ", chunkSize=" + chunkSize + "]");
            }
            if (maxBufferSize < 1 || maxBufferSize > Long.MAX_VALUE - page) {
                throw new RdmaException(Errno.EINVAL, who + ": maxBufferSize " + maxBufferSize + " must be positive");
            }
            if (maxBytes < chunkSize) {
                throw new RdmaException(Errno.EINVAL, who + ": maxBytes " + maxBytes
                        + " must be at least one chunk (" + chunkSize + ")");
            }
            if (slabSize <= 0 || slabSize > chunkSize) {
                throw new RdmaException(Errno.EINVAL, who + ": slabSize " + slabSize + " must be in [1, chunkSize="
                        + chunkSize + "]");
            }
            if (threadCacheBytes < 0) {
                throw new RdmaException(Errno.EINVAL, who + ": threadCacheBytes " + threadCacheBytes
                        + " must not be negative");
            }
            return new BufferPool(this);
        }
    }
}
