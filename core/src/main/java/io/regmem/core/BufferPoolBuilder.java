package io.regmem.core;

import java.time.Duration;
import java.util.Objects;

/**
 * Configures a {@link BufferPool}. Every setting has a default; {@link #build()} checks them
 * together and throws {@link RdmaException} ({@link Errno#EINVAL}) naming the bad one.
 */
public final class BufferPoolBuilder {
    String name;
    SafetyMode mode = SafetyMode.CHECKED;
    ChunkSource source = ChunkSource.mmap();
    long chunkSize = 4L << 20;
    long alignment = 64;
    long largestClass = 1L << 20;
    long maxBufferSize = 1L << 30;
    long maxBytes = Long.MAX_VALUE;
    long slabSize = 256L << 10;
    long threadCacheBytes = 1L << 20;
    boolean preTouch;
    Duration decayIdle = DEFAULT_DECAY_IDLE;
    long keepBytes;

    /** The decay's default idle time: a chunk nobody took a slot from for this long goes back. */
    public static final Duration DEFAULT_DECAY_IDLE = Duration.ofMillis(500);

    BufferPoolBuilder() {
    }

    /** A name for messages and reports. Default: {@code BufferPool-N}. */
    public BufferPoolBuilder name(String name) {
        this.name = name;
        return this;
    }

    /** Checks done on allocate and free. Default: {@link SafetyMode#CHECKED}. */
    public BufferPoolBuilder safetyMode(SafetyMode mode) {
        this.mode = Objects.requireNonNull(mode, "mode");
        return this;
    }

    /** Where chunks come from. Default: {@link ChunkSource#mmap()}. */
    public BufferPoolBuilder chunkSource(ChunkSource source) {
        this.source = Objects.requireNonNull(source, "source");
        return this;
    }

    /** Bytes per chunk for size classes: a multiple of the source's page size. Default: 4 MiB. */
    public BufferPoolBuilder chunkSize(long bytes) {
        this.chunkSize = bytes;
        return this;
    }

    /**
     * The alignment of every buffer's address and the granularity of size classes: a power of
     * two from 8 up to the source's page size. Default: 64 (a cache line). Use 4096 for page-aligned buffers.
     */
    public BufferPoolBuilder alignment(long bytes) {
        this.alignment = bytes;
        return this;
    }

    /** Page-aligned buffers: {@code alignment(source page size)}. */
    public BufferPoolBuilder pageAligned() {
        this.alignment = source.pageSize();
        return this;
    }

    /**
     * The largest size class: a power of two, at least 4 x alignment, at most the chunk size.
     * Larger buffers get a dedicated chunk each. Default: 1 MiB.
     */
    public BufferPoolBuilder largestClass(long bytes) {
        this.largestClass = bytes;
        return this;
    }

    /** The largest buffer {@link BufferPool#allocate} accepts. Default: 1 GiB. */
    public BufferPoolBuilder maxBufferSize(long bytes) {
        this.maxBufferSize = bytes;
        return this;
    }

    /**
     * The most chunk memory the pool may reserve, at least one chunk. Default: unlimited.
     * Going over it throws {@link PoolExhaustedException}.
     */
    public BufferPoolBuilder maxBytes(long bytes) {
        this.maxBytes = bytes;
        return this;
    }

    /** Chunk bytes carved at a time for one size class (at least one buffer). Default: 256 KiB. */
    public BufferPoolBuilder slabSize(long bytes) {
        this.slabSize = bytes;
        return this;
    }

    /**
     * Bytes per size class a thread may keep in its cache (between 2 and 512 buffers per class);
     * 0 disables thread caches. Default: 1 MiB.
     */
    public BufferPoolBuilder threadCacheBytes(long bytes) {
        this.threadCacheBytes = bytes;
        return this;
    }

    /**
     * Touches every page of a chunk when the pool takes it from its source, before its first buffer
     * is handed out, so that the first message into fresh memory does not wait for page faults
     * (Aeron's {@code pre-touch} in spirit). It asks the kernel to populate the pages writable
     * ({@code madvise(MADV_POPULATE_WRITE)}, Linux 5.14) and, where that is refused (an older kernel,
     * memory that is not a private mapping), writes each page's first byte back as it reads it. It
     * applies to every chunk (size classes' and large buffers'), huge-page sources included, and
     * costs the chunk's page faults at the first allocation that takes a new chunk. Default: off.
     */
    public BufferPoolBuilder preTouch(boolean touch) {
        this.preTouch = touch;
        return this;
    }

    /**
     * Gives idle memory back while the pool runs: a size-class chunk whose slots are all free (not
     * in a buffer, not held by a thread's cache) and from which no slot was handed out for
     * {@code idle} goes back, as long as the pool keeps at least {@code keepBytes} reserved. A class
     * nobody allocated from for {@code idle} also has its stash of free buffers dropped so that their
     * chunks can go. The check runs every quarter of {@code idle} on one daemon thread shared by the
     * JVM's pools ({@code regmem-decay}), never on the allocate or free path; each chunk goes as
     * {@link BufferPool#trim(long)} gives it back (listeners first, then its memory). Default: 500 ms
     * and 0 bytes: a server that peaked holds its peak for about half a second, and a later burst
     * pays page faults (and, when registered, a registration) per 4 MiB chunk again; set
     * {@code keepBytes} to the working set to keep it warm, or {@link #noDecay()}.
     *
     * @param idle      how long a chunk stays unused before it goes back: from 10 ms to one day
     * @param keepBytes reserved bytes the decay never goes below, at least 0
     */
    public BufferPoolBuilder decay(Duration idle, long keepBytes) {
        Objects.requireNonNull(idle, "idle");
        if (idle.compareTo(Duration.ofMillis(10)) < 0 || idle.compareTo(Duration.ofDays(1)) > 0) {
            throw new RdmaException(Errno.EINVAL, "BufferPoolBuilder: decay idle time " + idle + " must be in [10 ms, 1 day]");
        }
        if (keepBytes < 0) {
            throw new RdmaException(Errno.EINVAL, "BufferPoolBuilder: decay keepBytes " + keepBytes + " must not be negative");
        }
        this.decayIdle = idle;
        this.keepBytes = keepBytes;
        return this;
    }

    /**
     * No decay: the pool keeps the memory its size classes took until {@link BufferPool#trim()} or
     * its close, and starts no thread. For latency-critical pools that must never fault again.
     */
    public BufferPoolBuilder noDecay() {
        this.decayIdle = null;
        this.keepBytes = 0;
        return this;
    }

    /**
     * Builds the pool. Reserves no memory yet: the first allocation of each size class does.
     *
     * @throws RdmaException {@link Errno#EINVAL} naming the setting that breaks a rule
     */
    public BufferPool build() {
        String who = "BufferPoolBuilder" + (name != null ? "[" + name + "]" : "");
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
