package io.regmem.core;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * A buffer handed out by a {@link BufferPool}: {@link #capacity()} bytes of off-heap memory at a
 * fixed {@link #address()}, inside one of the pool's {@link Chunk}s.
 *
 * <p><b>Handles are reused.</b> A pool makes one handle per slot of memory, once, and hands the
 * same handle out again after it was freed; that is why allocating and freeing create no garbage.
 * A reference kept after {@link #close()} therefore may later name somebody else's buffer. Code
 * that must detect that keeps the {@link #generation()} it got and checks it with
 * {@link #checkGeneration(int)} or frees with {@link #close(int)}; in {@link SafetyMode#CHECKED}
 * and {@link SafetyMode#PARANOID} a stale generation throws {@link RdmaException} ({@link Errno#EBADF}).
 *
 * <p><b>Sizes.</b> {@link #length()} is the size that was asked for; {@link #capacity()} is the size
 * of the slot (the size class), at least {@code length()}. {@link #segment()} and all views span
 * {@code capacity()}.
 *
 * <p><b>Threads.</b> A buffer has one owner at a time; it may be freed on any thread (the pool
 * takes it back into that thread's cache). Handing a buffer to another thread needs the usual
 * happens-before edge (a concurrent queue, say).
 *
 * <p><b>Lifetime and safety.</b> {@link #segment()} and {@link #asByteBuffer()} are checked views:
 * after the pool closes (or, for a buffer above the largest size class, after it is freed) any
 * access through them throws {@link IllegalStateException}. {@link #asDirectBuffer()} and
 * {@link #asBytesStore()} are unchecked raw-address views (that is how Agrona and Chronicle work):
 * a chunk that ever had one is retired rather than unmapped when released, so a view kept too
 * long reads stale or zeroed memory but can never crash the JVM.
 */
public final class PooledBuffer implements AutoCloseable {
    static final int FREE = 0;
    static final int LIVE = 1;
    /** What each {@link #pin()} adds to the state: a live buffer's state is {@code LIVE + PIN * pins}. */
    static final int PIN = 2;
    static final int LARGE_CLASS = -1;

    private static final VarHandle STATE;

    static {
        try {
            STATE = MethodHandles.lookup().findVarHandle(PooledBuffer.class, "state", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    final BufferPool pool;
    final int sizeClass;
    final Chunk chunk;
    private final MemorySegment segment;
    private final long address;
    private final long capacity;
    /** Used only by large buffers: closes the scope of {@link #segment}. */
    final Arena largeArena;

    @SuppressWarnings("unused") // accessed through STATE
    private volatile int state;
    private int generation;
    private long length;
    Throwable allocationSite;

    private ByteBuffer byteBuffer;
    private UnsafeBuffer directBuffer;
    private Object bytesStore;

    PooledBuffer(BufferPool pool, int sizeClass, Chunk chunk, MemorySegment segment, Arena largeArena) {
        this.pool = pool;
        this.sizeClass = sizeClass;
        this.chunk = chunk;
        this.segment = segment;
        this.address = segment.address();
        this.capacity = segment.byteSize();
        this.largeArena = largeArena;
    }

    // ---- lifecycle, called by the pool -------------------------------------------------------

    /** Marks the handle live for a new owner; plain stores, published by the hand-off to the caller. */
    void onAllocate(long requested) {
        generation++;
        length = requested;
        STATE.setOpaque(this, LIVE);
        ByteBuffer bb = byteBuffer;
        if (bb != null) {
            bb.clear();
        }
    }

    /** FAST mode: records the free without checking (but a pinned buffer: {@link #refuseFreeWhilePinned}). */
    void markFreePlain() {
        STATE.setOpaque(this, FREE);
    }

    /** FAST mode's one check: true if the buffer is pinned (a plain read of the state). */
    boolean pinnedPlain() {
        return (int) STATE.getOpaque(this) > LIVE;
    }

    /**
     * CHECKED modes: moves the handle from live and unpinned to free; returns the state found
     * ({@link #LIVE} when this call freed it, {@link #FREE} on a double free, above {@code LIVE}
     * while pinned).
     */
    int markFreeChecked() {
        return (int) STATE.compareAndExchange(this, LIVE, FREE);
    }

    /** The exception of a free refused because the buffer is pinned: nothing changes. */
    RdmaException pinnedException(String pool) {
        int pins = (int) STATE.getOpaque(this) >>> 1;
        return new RdmaException(Errno.EBUSY, pool + ": cannot free " + this + ": " + pins + " I/O operation(s) still use "
                + "its memory (pinned); free it after their completions");
    }

    /** The slot's segment without the liveness check, for the pool's own use (poisoning). */
    MemorySegment segmentForPool() {
        return segment;
    }

    boolean isLive() {
        return ((int) STATE.getOpaque(this) & LIVE) != 0;
    }

    // ---- public face -------------------------------------------------------------------------

    /**
     * The buffer's memory as a bounds-checked segment of {@link #capacity()} bytes. The same
     * segment object is returned for the life of the slot, so this allocates nothing.
     *
     * @throws RdmaException {@link Errno#EBADF} if the buffer was freed (checked modes)
     */
    public MemorySegment segment() {
        checkLive();
        return segment;
    }

    /** The address of the first byte; stable for the life of the pool. */
    public long address() {
        checkLive();
        return address;
    }

    /** Usable bytes: the size class, at least the size asked for. */
    public long capacity() {
        return capacity;
    }

    /** The size that was asked for when this buffer was allocated. */
    public long length() {
        return length;
    }

    /**
     * The generation of this handle: it grows by one each time the handle is handed out. Keep it
     * to detect a stale reference later with {@link #checkGeneration(int)} or {@link #close(int)}.
     */
    public int generation() {
        return generation;
    }

    /** The chunk this buffer was carved from (registration code reads its attachment). */
    public Chunk chunk() {
        return chunk;
    }

    /** The pool this buffer belongs to. */
    public BufferPool pool() {
        return pool;
    }

    /**
     * Throws unless this handle is live and still in the given generation.
     *
     * @param expected a value {@link #generation()} returned earlier
     * @throws RdmaException {@link Errno#EBADF} naming both generations, if the handle was freed or reused since
     */
    public void checkGeneration(int expected) {
        if (!isLive() || generation != expected) {
            throw new RdmaException(Errno.EBADF, pool.name() + ": stale PooledBuffer handle at 0x"
                    + Long.toHexString(address) + ": generation " + expected + " was freed"
                    + (isLive() ? ", the slot now belongs to generation " + generation : ""));
        }
    }

    /**
     * Returns the buffer to its pool. The buffer must not be used afterwards.
     *
     * @throws RdmaException {@link Errno#EINVAL} on a double free (checked modes, and always for
     *                       buffers above the largest size class); {@link Errno#EBUSY} while it is
     *                       {@linkplain #pin() pinned} (an I/O in flight uses it; every mode); {@link
     *                       Errno#EBADF} if the pool is closed. A refused close changes nothing.
     */
    @Override
    public void close() {
        pool.free(this);
    }

    /**
     * Returns the buffer to its pool if it is still in {@code expectedGeneration}: the safe way to
     * free through a reference that might be stale.
     *
     * @throws RdmaException {@link Errno#EBADF} if the handle was freed or reused since
     */
    public void close(int expectedGeneration) {
        checkGeneration(expectedGeneration);
        pool.free(this);
    }

    /**
     * Marks the buffer's memory as in use by an I/O engine (the kernel, a device) until
     * {@link #unpin()}: while it is pinned, {@link #close()} is refused with {@link Errno#EBUSY}
     * and changes nothing, so the memory is never handed to a new owner while the engine may still
     * read or write it. Pins count: each {@code pin()} needs its own {@code unpin()}. io_uring
     * operations ({@code IoRing}) pin their buffers from prepare to completion; an application
     * may pin a buffer for as long as a posted work request uses it. One compare-and-set.
     *
     * @throws RdmaException {@link Errno#EBADF} if the buffer is free
     */
    public void pin() {
        int s;
        do {
            s = (int) STATE.getVolatile(this);
            if ((s & LIVE) == 0) {
                throw new RdmaException(Errno.EBADF, pool.name() + ": pin of a freed " + this);
            }
        } while (!STATE.compareAndSet(this, s, s + PIN));
    }

    /**
     * Ends one {@link #pin()}.
     *
     * @throws RdmaException {@link Errno#EINVAL} if the buffer is not pinned (nothing changes)
     */
    public void unpin() {
        int s;
        do {
            s = (int) STATE.getVolatile(this);
            if (s < LIVE + PIN) {
                throw new RdmaException(Errno.EINVAL, pool.name() + ": unpin of " + this + ", which is not pinned");
            }
        } while (!STATE.compareAndSet(this, s, s - PIN));
    }

    /** How many pins the buffer holds now (0 when free). */
    public int pins() {
        return (int) STATE.getOpaque(this) >>> 1;
    }

    /**
     * A {@link ByteBuffer} over the whole capacity, position 0 and limit {@code capacity()} at each
     * allocation. One object per slot, reused; not thread-safe (like any ByteBuffer).
     *
     * @throws RdmaException {@link Errno#ERANGE} if the capacity exceeds {@code Integer.MAX_VALUE}
     */
    public ByteBuffer asByteBuffer() {
        checkLive();
        ByteBuffer bb = byteBuffer;
        if (bb == null) {
            requireIntCapacity("asByteBuffer");
            bb = segment.asByteBuffer();
            byteBuffer = bb;
        }
        return bb;
    }

    /**
     * An Agrona {@link UnsafeBuffer} over the whole capacity, zero-copy. One object per slot, reused.
     * Unchecked: see the class comment. Agrona 2.x reaches {@code jdk.internal.misc.Unsafe}, so the
     * JVM must run with {@code --add-exports java.base/jdk.internal.misc=ALL-UNNAMED} (on the module
     * path {@code =org.agrona}).
     *
     * @throws RdmaException {@link Errno#ERANGE} if the capacity exceeds {@code Integer.MAX_VALUE};
     *                       {@link Errno#EOPNOTSUPP}, naming the flag, if {@code jdk.internal.misc} is
     *                       not exported to Agrona (nothing is made)
     */
    public UnsafeBuffer asDirectBuffer() {
        checkLive();
        UnsafeBuffer ub = directBuffer;
        if (ub == null) {
            requireIntCapacity("asDirectBuffer");
            if (!AgronaAccess.USABLE) {
                throw new RdmaException(Errno.EOPNOTSUPP, this + ": asDirectBuffer needs the JVM flag "
                        + AgronaAccess.FLAG + " (Agrona's UnsafeBuffer uses the Unsafe of jdk.internal.misc)");
            }
            chunk.markUncheckedViews();
            ub = new UnsafeBuffer(address, (int) capacity);
            directBuffer = ub;
        }
        return ub;
    }

    /**
     * A Chronicle Bytes {@code BytesStore} over the whole capacity, zero-copy; needs
     * {@code net.openhft:chronicle-bytes} on the class path (an optional dependency) and the
     * {@code --add-opens} flags Chronicle documents for JDK 25. One object per slot, reused.
     * Unchecked: see the class comment.
     *
     * @return a Chronicle bytes store over this buffer's memory
     * @throws RdmaException {@link Errno#EOPNOTSUPP} if Chronicle Bytes is not on the class path
     */
    @SuppressWarnings("exports") // Chronicle is optional: a caller of this method has it, others need not
    public net.openhft.chronicle.bytes.BytesStore<?, ?> asBytesStore() {
        checkLive();
        Object store = bytesStore;
        if (store == null) {
            requireIntCapacity("asBytesStore");
            ChronicleViews.requirePresent(pool.name());
            chunk.markUncheckedViews();
            store = ChronicleViews.wrap(address, capacity);
            bytesStore = store;
        }
        return (net.openhft.chronicle.bytes.BytesStore<?, ?>) store;
    }

    private void requireIntCapacity(String view) {
        if (capacity > Integer.MAX_VALUE) {
            throw new RdmaException(Errno.ERANGE, pool.name() + ": " + view + " needs a capacity of at most "
                    + Integer.MAX_VALUE + " bytes, this buffer has " + capacity);
        }
    }

    private void checkLive() {
        if (pool.checked && !isLive()) {
            throw new RdmaException(Errno.EBADF, pool.name() + ": PooledBuffer at 0x" + Long.toHexString(address)
                    + " used after free (generation " + generation + ")");
        }
    }

    @Override
    public String toString() {
        return "PooledBuffer[0x" + Long.toHexString(address) + ", length " + length + ", capacity " + capacity
                + ", generation " + generation + (isLive() ? "" : ", free") + (pins() > 0 ? ", pinned" : "") + "]";
    }
}
