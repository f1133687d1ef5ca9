package io.regmem.netty;

import io.netty.buffer.AbstractByteBufAllocator;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.ByteBufAllocatorMetric;
import io.netty.buffer.ByteBufAllocatorMetricProvider;
import io.netty.util.IllegalReferenceCountException;
import io.regmem.core.BufferPool;
import io.regmem.core.Errno;
import io.regmem.core.PoolExhaustedException;
import io.regmem.core.PooledBuffer;
import io.regmem.core.RdmaException;
import io.regmem.registration.PoolRegistration;
import java.util.Objects;
import java.util.concurrent.atomic.LongAdder;

/**
 * A Netty {@link ByteBufAllocator} whose direct buffers are buffers of a regmem {@link BufferPool}:
 * pooled, zero-copy, at stable addresses, and, when the allocator is built over a
 * {@link PoolRegistration}, registered memory with keys. Give it to Netty as any allocator:
 * <pre>{@code
 * bootstrap.option(ChannelOption.ALLOCATOR, alloc).childOption(ChannelOption.ALLOCATOR, alloc);
 * }</pre>
 *
 * <ul>
 *   <li><b>Direct buffers</b> ({@code buffer()}, {@code directBuffer()}, {@code ioBuffer()}: the
 *   allocator prefers direct) are pool buffers: {@code hasMemoryAddress()} is true,
 *   {@link #isDirectBufferPooled()} is true, so Netty's native transports read and write them in
 *   place. {@code release()} to zero frees the pool buffer exactly once; the ByteBuf object stays
 *   with the pool's buffer handle and serves its next allocation, so allocate, write and release
 *   create no garbage in the steady state, on any thread.</li>
 *   <li><b>Growth</b> ({@code capacity(int)}, a write past the capacity) stays inside the slot while
 *   it fits (a size class is at least the size asked for) and otherwise takes a larger buffer from
 *   the same pool, copies and frees the old one; it never allocates JDK direct memory. A buffer's
 *   maximum capacity is at most the pool's {@code maxBufferSize}.</li>
 *   <li><b>Heap buffers</b> are Netty's own, from the heap allocator given (Netty's default
 *   unless another is given).</li>
 *   <li><b>Leak detection</b> is Netty's: every direct buffer goes through
 *   {@code toLeakAwareBuffer}, at the level set with {@code ResourceLeakDetector.setLevel} or
 *   {@code -Dio.netty.leakDetection.level}.</li>
 *   <li><b>From a ByteBuf to registered memory</b>: {@link #pooledBuffer(ByteBuf)} gives the
 *   {@link PooledBuffer} under a buffer this allocator handed out (or a slice, duplicate or
 *   leak-aware wrapper of it), and {@link #lkey(ByteBuf)}, {@link #rkey(ByteBuf)} and
 *   {@link #exportRemoteKey(ByteBuf)} its keys, so an application can post an RDMA SEND or an
 *   io_uring fixed-buffer write straight from what its pipeline allocated.</li>
 * </ul>
 *
 * <p><b>Failures.</b> When the pool is out of memory ({@code maxBytes}) an allocation throws
 * {@link PoolExhaustedException}, which a Netty pipeline sees as any exception thrown by a read.
 * Netty reaches these buffers' memory by address ({@code memoryAddress()}), so a chunk whose address
 * was handed to Netty is retired (address space kept, memory given back) instead of unmapped when
 * the pool gives it back: a buffer kept past the pool's close reads zeros, it never crashes the JVM.
 * Buffers above the pool's largest size class have a chunk each, retired the same way when freed:
 * size the pool's {@code largestClass} for the largest message the pipeline holds.
 */
public final class RegmemByteBufAllocator extends AbstractByteBufAllocator implements ByteBufAllocatorMetricProvider {
    private static final int MAX_UNWRAPS = 64;

    private final BufferPool pool;
    private final PoolRegistration registration;
    private final ByteBufAllocator heap;
    private final int maxCapacity;
    /** Bytes of the pool's slots held by this allocator's buffers now (capacity of each slot). */
    private final LongAdder directBytes = new LongAdder();
    private final ByteBufAllocatorMetric metric = new ByteBufAllocatorMetric() {
        @Override
        public long usedHeapMemory() {
            return heap instanceof ByteBufAllocatorMetricProvider p ? p.metric().usedHeapMemory() : -1;
        }

        @Override
        public long usedDirectMemory() {
            return directBytes.sum();
        }

        @Override
        public String toString() {
            return "RegmemByteBufAllocatorMetric[usedDirectMemory: " + usedDirectMemory() + "; usedHeapMemory: "
                    + usedHeapMemory() + "]";
        }
    };

    /**
     * An allocator over {@code pool}, with Netty's default allocator for heap buffers. Its buffers
     * have no keys ({@link #lkey(ByteBuf)} is refused); see {@link #RegmemByteBufAllocator(PoolRegistration)}.
     */
    public RegmemByteBufAllocator(BufferPool pool) {
        this(pool, null, ByteBufAllocator.DEFAULT);
    }

    /** An allocator over the registered pool of {@code registration}: its buffers carry keys. */
    public RegmemByteBufAllocator(PoolRegistration registration) {
        this(registration.pool(), registration, ByteBufAllocator.DEFAULT);
    }

    /**
     * An allocator over {@code pool}, its keys from {@code registration} (null: none), heap buffers
     * from {@code heapAllocator}.
     *
     * @throws RdmaException {@link Errno#EINVAL} if the registration is of another pool, or the pool is closed
     */
    public RegmemByteBufAllocator(BufferPool pool, PoolRegistration registration, ByteBufAllocator heapAllocator) {
        super(true);
        Objects.requireNonNull(pool, "pool");
        Objects.requireNonNull(heapAllocator, "heapAllocator");
        if (registration != null && registration.pool() != pool) {
            throw new RdmaException(Errno.EINVAL, "RegmemByteBufAllocator: " + registration + " registers pool "
                    + registration.pool().name() + ", not " + pool.name());
        }
        if (pool.isClosed()) {
            throw new RdmaException(Errno.EINVAL, "RegmemByteBufAllocator: pool " + pool.name() + " is closed");
        }
        if (heapAllocator instanceof RegmemByteBufAllocator) {
            throw new RdmaException(Errno.EINVAL, "RegmemByteBufAllocator: the heap allocator must be Netty's, not "
                    + "another RegmemByteBufAllocator");
        }
        this.pool = pool;
        this.registration = registration;
        this.heap = heapAllocator;
        this.maxCapacity = (int) Math.min(Integer.MAX_VALUE, pool.maxBufferSize());
    }

    @Override
    protected ByteBuf newHeapBuffer(int initialCapacity, int maxCapacity) {
        return heap.heapBuffer(initialCapacity, maxCapacity);
    }

    @Override
    protected ByteBuf newDirectBuffer(int initialCapacity, int maxCapacity) {
        int max = Math.min(maxCapacity, this.maxCapacity);
        if (initialCapacity > max) {
            throw new IllegalArgumentException("initialCapacity: " + initialCapacity + " is more than pool "
                    + pool.name() + "'s maxBufferSize " + this.maxCapacity);
        }
        PooledBuffer b = allocatePooled(Math.max(1, initialCapacity));
        return toLeakAwareBuffer(RegmemByteBuf.newInstance(this, b, initialCapacity, max));
    }

    /** A buffer of the pool, its slot counted in the metric. */
    PooledBuffer allocatePooled(int size) {
        PooledBuffer b = pool.allocate(size);
        directBytes.add(b.capacity());
        return b;
    }

    /**
     * Gives a buffer back to the pool; throws (counting nothing) if the pool refuses it (a pinned
     * buffer: {@code EBUSY}). A buffer released after its pool closed has nothing to go back to (the
     * pool's close reported it still out): that release does nothing more, so that a pipeline shutting
     * down after the pool does not fail on it.
     */
    void free(PooledBuffer b) {
        long capacity = b.capacity();
        try {
            pool.free(b);
        } catch (RdmaException e) {
            if (e.errno() != Errno.EBADF || !pool.isClosed()) {
                throw e;
            }
        }
        directBytes.add(-capacity);
    }

    /** True: direct buffers are pooled, so Netty's transports use them in place rather than copying. */
    @Override
    public boolean isDirectBufferPooled() {
        return true;
    }

    /** What Netty's metric readers (Micrometer's Netty allocator metrics among them) read. Allocates nothing. */
    @Override
    public ByteBufAllocatorMetric metric() {
        return metric;
    }

    /** The pool this allocator's direct buffers come from. */
    public BufferPool pool() {
        return pool;
    }

    /** The registration that gives the buffers keys, or null. */
    public PoolRegistration registration() {
        return registration;
    }

    /**
     * The pool buffer under {@code buf}, a buffer this allocator handed out or a slice, duplicate or
     * wrapper of one. The bytes of {@code buf} start {@code buf.memoryAddress() - pooledBuffer(buf).address()}
     * bytes into it. The result stays valid until {@code buf} is released or its capacity grows past
     * the slot (then the ByteBuf moves to a new pool buffer); pin it ({@link PooledBuffer#pin()}) for
     * as long as an I/O uses it, so that a release in between is refused rather than handing the
     * memory to a new owner.
     *
     * @throws RdmaException {@link Errno#EINVAL} if {@code buf} is not this allocator's
     * @throws IllegalReferenceCountException if {@code buf} was released
     */
    public PooledBuffer pooledBuffer(ByteBuf buf) {
        if (buf.refCnt() == 0) {
            throw new IllegalReferenceCountException(0);
        }
        ByteBuf b = buf;
        for (int i = 0; b != null && i < MAX_UNWRAPS; i++) {
            if (b instanceof RegmemByteBuf r) {
                if (r.owner() != this) {
                    break;
                }
                return r.pooledBuffer();
            }
            b = b.unwrap();
        }
        throw new RdmaException(Errno.EINVAL, "RegmemByteBufAllocator over pool " + pool.name() + ": "
                + buf.getClass().getSimpleName() + " is not a buffer of this allocator");
    }

    /**
     * True if {@code buf} (or what it wraps) is a live buffer of this allocator, registered, contiguous
     * at {@code memoryAddress()}: one an I/O can read in place. Never throws; allocates nothing.
     */
    boolean registered(ByteBuf buf) {
        if (registration == null || buf.refCnt() == 0 || !buf.hasMemoryAddress() || !buf.isContiguous()) {
            return false;
        }
        ByteBuf b = buf;
        for (int i = 0; b != null && i < MAX_UNWRAPS; i++) {
            if (b instanceof RegmemByteBuf r) {
                return r.owner() == this;
            }
            b = b.unwrap();
        }
        return false;
    }

    /**
     * The local key for SGEs over {@code buf}'s memory (address {@code buf.memoryAddress()}).
     *
     * @throws RdmaException {@link Errno#EINVAL} if the allocator has no registration or {@code buf} is not its own
     */
    public int lkey(ByteBuf buf) {
        return requireRegistration("lkey").lkey(pooledBuffer(buf));
    }

    /** The remote key a peer uses to reach {@code buf}'s memory; as {@link #lkey(ByteBuf)}. */
    public int rkey(ByteBuf buf) {
        return requireRegistration("rkey").rkey(pooledBuffer(buf));
    }

    /** The exported remote key of the chunk holding {@code buf} ({@link PoolRegistration#exportRemoteKey}). */
    public byte[] exportRemoteKey(ByteBuf buf) {
        return requireRegistration("exportRemoteKey").exportRemoteKey(pooledBuffer(buf));
    }

    private PoolRegistration requireRegistration(String what) {
        if (registration == null) {
            throw new RdmaException(Errno.EINVAL, "RegmemByteBufAllocator over pool " + pool.name() + ": " + what
                    + " needs an allocator built over a PoolRegistration");
        }
        return registration;
    }

    @Override
    public String toString() {
        return "RegmemByteBufAllocator[pool " + pool.name() + (registration != null ? ", registered" : "")
                + ", directBytes " + directBytes.sum() + "]";
    }
}
