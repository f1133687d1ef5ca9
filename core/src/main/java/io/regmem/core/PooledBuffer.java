package io.regmem.core;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * A buffer handed out by a {@link BufferPool}: {@link #capacity()} bytes of off-heap memory at a
 * fixed {@link #address()}, inside one of the pool's {@link Chunk}s.
 *
 * <p><b>Handles are reused.</b> A handle belongs to one slot of memory for its whole life, and the
 * pool hands the same handle out again after it was freed while it keeps it among its free
 * buffers (the thread caches and a bounded stash per size class); that is why allocating and
 * freeing create no garbage. Beyond those, a freed slot keeps no object (a bit marks it idle) and
 * its handle is dropped: a later allocation of the slot makes a new one. A reference kept after
 * {@link #close()} therefore may later name somebody else's buffer (or a dropped handle, which
 * stays free for ever). Code
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

    // Seven 4-byte fields, one long and the header: 48 bytes with compressed oops, the whole heap
    // cost of a live buffer. The pool is the slab's too: kept here, where the header's padding has
    // room for it, so that a free and a checked access do not wait for the slab's line.
    final BufferPool pool;
    final Slab slab;
    /** The slot's number in its slab (high 24 bits) and the size class's index (low 8; 0xFF: a large buffer). */
    private final int slotAndClass;
    /** The slot's segment, made on first use and kept while the handle lives. */
    private MemorySegment segment;
    /** The views and the PARANOID allocation site, made on first use. */
    private Views views;

    /**
     * {@link #FREE}, or {@link #LIVE} plus {@link #PIN} per pin. Plain reads and writes where a thread
     * reads what it wrote itself (allocation, the liveness check of the owner's accesses), so that the
     * compiler can fold a check that follows an allocation and keep what it loaded across it; every
     * transition another thread may race with (free, pin, unpin) is a compare-and-set through
     * {@link #STATE}, and reads for other threads are opaque.
     */
    private int state;
    private int generation;
    private long length;

    /** What few buffers need, kept out of the handle so that the handle stays small. */
    private static final class Views {
        ByteBuffer byteBuffer;
        /** The generation {@link #byteBuffer} was last reset for (position 0, limit capacity). */
        int byteBufferGeneration;
        UnsafeBuffer directBuffer;
        Object bytesStore;
        Throwable allocationSite;
        Object attachment;
    }

    PooledBuffer(Slab slab, int slot) {
        this.pool = slab.pool;
        this.slab = slab;
        this.slotAndClass = slot << 8 | (slab.sizeClass & 0xFF);
    }

    /** The slot's number in its slab. */
    int slot() {
        return slotAndClass >>> 8;
    }

    /** The size class's index, or {@link #LARGE_CLASS} (one load: a free needs it first). */
    int sizeClass() {
        int c = slotAndClass & 0xFF;
        return c == 0xFF ? LARGE_CLASS : c;
    }

    private Views views() {
        Views v = views;
        if (v == null) {
            v = new Views();
            views = v;
        }
        return v;
    }

    Throwable allocationSite() {
        Views v = views;
        return v == null ? null : v.allocationSite;
    }

    void allocationSite(Throwable site) {
        if (site != null || views != null) {
            views().allocationSite = site;
        }
    }

    private MemorySegment slotSegment() {
        MemorySegment s = segment;
        if (s == null) {
            s = slab.slice(slot());
            segment = s;
        }
        return s;
    }

    // ---- lifecycle, called by the pool -------------------------------------------------------

    /**
     * Marks the handle live for a new owner: plain stores, published to other threads by whatever
     * hands the buffer over (the caller's own hand-off, or the stash's release and acquire).
     */
    void onAllocate(long requested) {
        generation++;
        length = requested;
        state = LIVE;
    }

    /** FAST mode: records the free without checking (but a pinned buffer: {@link #pinnedPlain}). */
    void markFreePlain() {
        state = FREE;
    }

    /** FAST mode's one check: true if the buffer is pinned (a plain read of the state). */
    boolean pinnedPlain() {
        return state > LIVE;
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
        return slotSegment();
    }

    boolean isLive() {
        return ((int) STATE.getOpaque(this) & LIVE) != 0;
    }

    // ---- public face -------------------------------------------------------------------------

    /**
     * The buffer's memory as a bounds-checked segment of {@link #capacity()} bytes. The segment object
     * is made on the handle's first call and the same one returned for the handle's life, so this
     * allocates nothing in the steady state.
     *
     * @throws RdmaException {@link Errno#EBADF} if the buffer was freed (checked modes)
     */
    public MemorySegment segment() {
        checkLive();
        return slotSegment();
    }

    /** The address of the first byte; stable for the life of the pool. */
    public long address() {
        checkLive();
        MemorySegment s = segment;
        return s != null ? s.address() : slab.address(slot());
    }

    /**
     * The address of the first byte, for code that will access the memory by address with no
     * lifetime check of its own ({@code Unsafe}-based libraries such as Netty, native code): as
     * {@link #asDirectBuffer()} does, it marks the buffer's chunk so that the chunk is
     * {@linkplain ChunkSource#retire retired} rather than unmapped when the pool gives it back (for a
     * buffer above the largest size class: when the buffer is freed), so an address kept too long
     * reads stale or zeroed memory but never faults. {@link #address()} does not mark: use it for
     * checked uses (building segments, work requests).
     *
     * @throws RdmaException {@link Errno#EBADF} if the buffer was freed (checked modes)
     */
    public long uncheckedAddress() {
        checkLive();
        slab.chunk.markUncheckedViews();
        return slab.address(slot());
    }

    /**
     * The object a library built on the pool keeps with this handle across its allocations, or null:
     * a wrapper made once per handle and reused each time the pool hands the handle out again, which
     * is how a wrapper costs no garbage ({@code regmem-netty} keeps its ByteBuf here). The pool never
     * reads it; only the buffer's owner should use it, as any field of a buffer.
     *
     * @throws RdmaException {@link Errno#EBADF} if the buffer was freed (checked modes)
     */
    public Object attachment() {
        checkLive();
        Views v = views;
        return v == null ? null : v.attachment;
    }

    /**
     * Sets the handle's {@link #attachment()}; it stays with the handle (not with one allocation) until set again.
     *
     * @throws RdmaException {@link Errno#EBADF} if the buffer was freed (checked modes)
     */
    public void attachment(Object attachment) {
        checkLive();
        if (attachment != null || views != null) {
            views().attachment = attachment;
        }
    }

    /** Usable bytes: the size class, at least the size asked for. */
    public long capacity() {
        return slab.slotSize;
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
        return slab.chunk;
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
            throw new RdmaException(Errno.EBADF, slab.pool.name() + ": stale PooledBuffer handle at 0x"
                    + Long.toHexString(slab.address(slot())) + ": generation " + expected + " was freed"
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
                throw new RdmaException(Errno.EBADF, slab.pool.name() + ": pin of a freed " + this);
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
                throw new RdmaException(Errno.EINVAL, slab.pool.name() + ": unpin of " + this + ", which is not pinned");
            }
        } while (!STATE.compareAndSet(this, s, s - PIN));
    }

    /** How many pins the buffer holds now (0 when free). */
    public int pins() {
        return (int) STATE.getOpaque(this) >>> 1;
    }

    /**
     * A {@link ByteBuffer} over the whole capacity, position 0 and limit {@code capacity()} at each
     * allocation. One object per handle, reused; not thread-safe (like any ByteBuffer).
     *
     * @throws RdmaException {@link Errno#ERANGE} if the capacity exceeds {@code Integer.MAX_VALUE}
     */
    public ByteBuffer asByteBuffer() {
        checkLive();
        Views v = views();
        ByteBuffer bb = v.byteBuffer;
        if (bb == null) {
            requireIntCapacity("asByteBuffer");
            bb = slotSegment().asByteBuffer();
            v.byteBuffer = bb;
        } else if (v.byteBufferGeneration != generation) {
            bb.clear(); // first call since this allocation: what the last owner left is not this one's
        }
        v.byteBufferGeneration = generation;
        return bb;
    }

    /**
     * An Agrona {@link UnsafeBuffer} over the whole capacity, zero-copy. One object per handle, reused.
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
        Views v = views();
        UnsafeBuffer ub = v.directBuffer;
        if (ub == null) {
            requireIntCapacity("asDirectBuffer");
            if (!AgronaAccess.USABLE) {
                throw new RdmaException(Errno.EOPNOTSUPP, this + ": asDirectBuffer needs the JVM flag "
                        + AgronaAccess.FLAG + " (Agrona's UnsafeBuffer uses the Unsafe of jdk.internal.misc)");
            }
            slab.chunk.markUncheckedViews();
            ub = new UnsafeBuffer(slab.address(slot()), (int) slab.slotSize);
            v.directBuffer = ub;
        }
        return ub;
    }

    /**
     * A Chronicle Bytes {@code BytesStore} over the whole capacity, zero-copy; needs
     * {@code net.openhft:chronicle-bytes} on the class path (an optional dependency) and the
     * {@code --add-opens} flags Chronicle documents for JDK 25. One object per handle, reused.
     * Unchecked: see the class comment.
     *
     * @return a Chronicle bytes store over this buffer's memory
     * @throws RdmaException {@link Errno#EOPNOTSUPP} if Chronicle Bytes is not on the class path
     */
    @SuppressWarnings("exports") // Chronicle is optional: a caller of this method has it, others need not
    public net.openhft.chronicle.bytes.BytesStore<?, ?> asBytesStore() {
        checkLive();
        Views v = views();
        Object store = v.bytesStore;
        if (store == null) {
            requireIntCapacity("asBytesStore");
            ChronicleViews.requirePresent(slab.pool.name());
            slab.chunk.markUncheckedViews();
            store = ChronicleViews.wrap(slab.address(slot()), slab.slotSize);
            v.bytesStore = store;
        }
        return (net.openhft.chronicle.bytes.BytesStore<?, ?>) store;
    }

    private void requireIntCapacity(String view) {
        if (slab.slotSize > Integer.MAX_VALUE) {
            throw new RdmaException(Errno.ERANGE, slab.pool.name() + ": " + view + " needs a capacity of at most "
                    + Integer.MAX_VALUE + " bytes, this buffer has " + slab.slotSize);
        }
    }

    /** The owner's check: a plain read (see {@link #state}); the pool's mode only when it fails. */
    private void checkLive() {
        if ((state & LIVE) == 0 && pool.checked) {
            throw new RdmaException(Errno.EBADF, slab.pool.name() + ": PooledBuffer at 0x" + Long.toHexString(slab.address(slot()))
                    + " used after free (generation " + generation + ")");
        }
    }

    @Override
    public String toString() {
        return "PooledBuffer[0x" + Long.toHexString(slab.address(slot())) + ", length " + length + ", capacity " + slab.slotSize
                + ", generation " + generation + (isLive() ? "" : ", free") + (pins() > 0 ? ", pinned" : "") + "]";
    }
}
