package io.regmem.registration.rpc;

import io.regmem.core.BufferPool;
import io.regmem.core.Errno;
import io.regmem.core.PooledBuffer;
import io.regmem.core.RdmaException;
import io.regmem.registration.DmaDirection;
import io.regmem.registration.DmaMapping;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.RdmaDevice;
import java.lang.foreign.MemorySegment;

/**
 * A registered buffer ({@code struct rpcrdma_regbuf}): pooled memory of a given length and DMA
 * direction that is mapped for a device lazily, on first use, and can be reallocated.
 *
 * <ul>
 * <li>{@link #alloc} takes memory from a pool and maps nothing.</li>
 * <li>{@link #dmaMap} maps it once for the PD's device (SGEs then use the PD's local DMA lkey); a
 * {@link DmaDirection#NONE} buffer never maps; a failed mapping leaves it unmapped.</li>
 * <li>{@link #realloc} takes the new memory first: on failure the buffer, its contents and its
 * mapping are untouched; on success the old mapping and memory go, the buffer has the new length
 * and is unmapped until its next use. Contents are not copied unless asked.</li>
 * <li>{@link #unmap} and {@link #free} are idempotent ({@link #free(RegBuf)} also takes null).</li>
 * </ul>
 * Invariant: mapped if and only if {@link #device()} is non-null. One owner at a time.
 */
public final class RegBuf {
    private final BufferPool pool;
    private final DmaDirection direction;
    private PooledBuffer data;
    private long length;
    private RdmaDevice device;
    private DmaMapping mapping;
    private int lkey;
    private boolean freed;

    private RegBuf(BufferPool pool, PooledBuffer data, long length, DmaDirection direction) {
        this.pool = pool;
        this.data = data;
        this.length = length;
        this.direction = direction;
    }

    /**
     * A buffer of {@code size} bytes from {@code pool}, unmapped ({@code rpcrdma_regbuf_alloc}).
     *
     * @throws RdmaException {@link Errno#EINVAL} for a size below 1 or a null direction;
     *                       {@link Errno#ENOMEM} when the pool cannot supply it (no emergency reserve)
     */
    public static RegBuf alloc(BufferPool pool, long size, DmaDirection direction) {
        if (pool == null || size < 1 || direction == null) {
            throw new RdmaException(Errno.EINVAL, "RegBuf.alloc: a pool, a size >= 1 (got " + size + ") and a "
                    + "direction are required");
        }
        return new RegBuf(pool, pool.allocate(size), size, direction);
    }

    /**
     * Maps the buffer for {@code pd}'s device if it is not mapped yet ({@code rpcrdma_regbuf_dma_map}).
     *
     * @return true if mapped (now or before); false for a {@link DmaDirection#NONE} buffer, or when the
     *         device refused the mapping (the buffer stays unmapped)
     * @throws RdmaException {@link Errno#EBADF} after {@link #free}; {@link Errno#EINVAL} if mapped for
     *                       another device (a reconnect must {@link #unmap} first)
     */
    public boolean dmaMap(ProtectionDomain pd) {
        checkLive("dmaMap");
        if (device != null) {
            if (device != pd.device()) {
                throw new RdmaException(Errno.EINVAL, this + ": mapped for " + device.name() + ", asked for "
                        + pd.device().name() + "; unmap it first");
            }
            return true;
        }
        if (direction == DmaDirection.NONE) {
            return false;
        }
        DmaMapping m;
        try {
            m = pd.device().dmaMap(data.segment().asSlice(0, length));
        } catch (RdmaException e) {
            return false; // unmapped, as before
        }
        mapping = m;
        lkey = pd.localDmaLkey();
        device = pd.device();
        return true;
    }

    /** Whether the buffer is mapped for a device. */
    public boolean isMapped() {
        return device != null;
    }

    /** Unmaps if mapped ({@code rpcrdma_regbuf_dma_unmap}); a no-op otherwise. */
    public void unmap() {
        if (device != null) {
            mapping.close();
            mapping = null;
            device = null;
            lkey = 0;
        }
    }

    /**
     * Gives the buffer {@code size} bytes of new memory ({@code rpcrdma_regbuf_realloc}).
     *
     * @param copy copy the old contents (up to the smaller length) into the new memory
     * @return false if the pool could not supply the memory: then nothing changed (contents,
     *         length and mapping are as before); true otherwise, and the buffer is unmapped
     * @throws RdmaException {@link Errno#EINVAL} for a size below 1; {@link Errno#EBADF} after {@link #free}
     */
    public boolean realloc(long size, boolean copy) {
        checkLive("realloc");
        if (size < 1) {
            throw new RdmaException(Errno.EINVAL, this + ": realloc to " + size + " bytes");
        }
        PooledBuffer fresh;
        try {
            fresh = pool.allocate(size);
        } catch (RdmaException e) {
            return false;
        }
        if (copy) {
            MemorySegment.copy(data.segment(), 0, fresh.segment(), 0, Math.min(length, size));
        }
        unmap();
        data.close();
        data = fresh;
        length = size;
        return true;
    }

    /** Unmaps and gives the memory back; idempotent ({@code rpcrdma_regbuf_free}). */
    public void free() {
        if (!freed) {
            unmap();
            data.close();
            data = null;
            freed = true;
        }
    }

    /** {@link #free()} that also takes null. */
    public static void free(RegBuf buffer) {
        if (buffer != null) {
            buffer.free();
        }
    }

    /**
     * Makes the first {@code bytes} visible to the device before a Send ({@code ib_dma_sync_single_for_device}).
     * Soft devices share the CPU's coherent memory, so this checks and does nothing else.
     *
     * @throws RdmaException {@link Errno#EINVAL} if not mapped or {@code bytes} exceeds the length
     */
    public void syncForDevice(long bytes) {
        checkSync(bytes, "syncForDevice");
    }

    /** Makes the first {@code bytes} a receive wrote visible to the CPU ({@code ib_dma_sync_single_for_cpu}). */
    public void syncForCpu(long bytes) {
        checkSync(bytes, "syncForCpu");
    }

    private void checkSync(long bytes, String who) {
        if (device == null || bytes < 0 || bytes > length) {
            throw new RdmaException(Errno.EINVAL, this + ": " + who + "(" + bytes + ") needs a mapped buffer and at most "
                    + length + " bytes");
        }
    }

    private void checkLive(String who) {
        if (freed) {
            throw new RdmaException(Errno.EBADF, "RegBuf." + who + ": the buffer was freed");
        }
    }

    /** The memory ({@code length()} bytes). */
    public MemorySegment segment() {
        checkLive("segment");
        return data.segment().asSlice(0, length);
    }

    /** The first byte's address. */
    public long address() {
        checkLive("address");
        return data.address();
    }

    /** Bytes usable. */
    public long length() {
        return length;
    }

    /** The local DMA key SGEs over the buffer use while it is mapped (0 otherwise). */
    public int lkey() {
        return lkey;
    }

    /** The device it is mapped for, or null. */
    public RdmaDevice device() {
        return device;
    }

    /** The direction it was allocated for. */
    public DmaDirection direction() {
        return direction;
    }

    /** Whether {@link #free} ran. */
    public boolean isFreed() {
        return freed;
    }

    @Override
    public String toString() {
        return "RegBuf[" + length + " B, " + direction + (device == null ? ", unmapped" : ", mapped on " + device.name())
                + (freed ? ", freed" : "") + "]";
    }
}
