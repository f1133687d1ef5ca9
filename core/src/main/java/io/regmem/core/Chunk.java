package io.regmem.core;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * One contiguous piece of off-heap memory reserved from a {@link ChunkSource}. A chunk's address
 * never changes while it is reserved: that is what lets a transport register it once.
 *
 * <p>A {@link BufferPool} carves its buffers out of chunks and gives a chunk back when it holds no
 * buffer and the pool {@linkplain BufferPool#trim() trims} (or its decay does), when the pool
 * closes, or, for a buffer larger than the largest size class, when that buffer is freed. Registration code attaches its per-chunk state through {@link #attachment()}.
 */
public final class Chunk {
    private final ChunkSource source;
    private final long address;
    private final long size;
    private final Object sourceToken;
    private volatile Object attachment;
    private volatile Object ioAttachment;
    /** Holds on the return of the memory while a release is under way; -1 when none is. */
    private final AtomicInteger releaseHolds = new AtomicInteger(-1);
    private volatile Runnable giveBack;
    private volatile MemorySegment segment;
    private volatile boolean uncheckedViews;
    /** A size-class chunk's slabs, in carve order (guarded by the pool's chunk lock; empty for a dedicated chunk). */
    final List<Slab> carved = new ArrayList<>(4);
    /** The decay's view: the sum of the slabs' {@link Slab#takes} it last saw, and since when (nanoTime) it has not changed. */
    long decayTakes;
    long decayStableSince;

    /**
     * Made by a {@link ChunkSource}.
     *
     * @param source      the source that owns the memory and will take it back
     * @param address     the first byte; must be non-zero
     * @param size        bytes, positive
     * @param sourceToken whatever the source needs to release the chunk (an {@link java.lang.foreign.Arena}, say); may be null
     */
    public Chunk(ChunkSource source, long address, long size, Object sourceToken) {
        this.source = Objects.requireNonNull(source, "source");
        if (address == 0 || size <= 0) {
            throw new RdmaException(Errno.EINVAL, "Chunk: address must be non-zero and size positive, got 0x"
                    + Long.toHexString(address) + " and " + size);
        }
        this.address = address;
        this.size = size;
        this.sourceToken = sourceToken;
    }

    /** The source this chunk came from. */
    public ChunkSource source() {
        return source;
    }

    /** The address of the chunk's first byte. */
    public long address() {
        return address;
    }

    /** The chunk's size in bytes. */
    public long size() {
        return size;
    }

    /** Whatever the source attached when it made the chunk. */
    public Object sourceToken() {
        return sourceToken;
    }

    /**
     * The chunk's memory as a segment in its pool's scope (it stops working when the pool, or for a
     * dedicated chunk its buffer, releases the chunk), or null before a pool adopted the chunk.
     */
    public MemorySegment segment() {
        return segment;
    }

    void segment(MemorySegment s) {
        this.segment = s;
    }

    /** State a consumer (a registration) attached to this chunk, or null. */
    public Object attachment() {
        return attachment;
    }

    /** Attaches consumer state (for example the chunk's memory registration). */
    public void attachment(Object value) {
        this.attachment = value;
    }

    /**
     * State a storage consumer (an io_uring fixed-buffer registration) attached to this chunk, or
     * null. Separate from {@link #attachment()} so that one chunk can be registered with an RDMA
     * protection domain and an I/O ring at once.
     */
    public Object ioAttachment() {
        return ioAttachment;
    }

    /** Attaches storage consumer state (for example the chunk's fixed-buffer slot). */
    public void ioAttachment(Object value) {
        this.ioAttachment = value;
    }

    /**
     * Delays the return of this chunk's memory to its source until the returned action runs: for a
     * {@link ChunkListener} whose consumer (the kernel, a device) may still write into the memory
     * when {@link ChunkListener#chunkRemoved} returns. The memory goes back when the pool and every
     * hold have let go; the pool's byte budget counts it until then.
     *
     * @return the action that lets go of this hold (running it again does nothing), or null when no
     *         release is under way (the chunk stays with its pool: a listener removed, an undo)
     */
    public Runnable holdRelease() {
        while (true) {
            int h = releaseHolds.get();
            if (h <= 0) {
                return null;
            }
            if (releaseHolds.compareAndSet(h, h + 1)) {
                AtomicBoolean done = new AtomicBoolean();
                return () -> {
                    if (done.compareAndSet(false, true)) {
                        dropHold();
                    }
                };
            }
        }
    }

    /** Starts a release: {@code action} gives the memory back once the pool's hold and every other are dropped. */
    void beginRelease(Runnable action) {
        giveBack = action;
        releaseHolds.set(1);
    }

    /** Drops one hold; the last one gives the memory back. */
    void dropHold() {
        if (releaseHolds.decrementAndGet() == 0) {
            Runnable r = giveBack;
            giveBack = null;
            r.run();
        }
    }

    /** True while a release waits for holds (the memory has not gone back yet). */
    public boolean releasePending() {
        return releaseHolds.get() > 0;
    }

    /**
     * True once a view that does not check its memory's lifetime (an Agrona buffer or a Chronicle
     * bytes store) was made over this chunk. Such a chunk is {@linkplain ChunkSource#retire retired}
     * rather than released, so that a view kept past the pool's close cannot crash the JVM.
     */
    public boolean hasUncheckedViews() {
        return uncheckedViews;
    }

    void markUncheckedViews() {
        if (!uncheckedViews) {
            uncheckedViews = true;
        }
    }

    @Override
    public String toString() {
        return "Chunk[0x" + Long.toHexString(address) + ", " + size + " bytes, " + source.name() + "]";
    }
}
