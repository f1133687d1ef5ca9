package io.regmem.registration;

import io.regmem.core.Chunk;
import io.regmem.core.ChunkSource;
import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

/**
 * A {@link ChunkSource} whose chunks are registered at birth: each chunk a pool gets from it is
 * already a {@link MemoryRegion} of the protection domain (attached to the chunk, so a
 * {@link io.regmem.core.PooledBuffer}'s keys are {@code ((MemoryRegion) buffer.chunk().attachment()).lkey()},
 * with no lookup), and is deregistered before its memory goes back. The provider-allocated memory
 * of the design (UCX's {@code UCP_MEM_MAP_ALLOCATE}) will take this shape; on the soft provider the
 * memory comes from another source (mmap by default).
 *
 * <p>The region reaches the chunk through a segment of its own (the pool's scoped segment does not
 * exist yet when the chunk is made); that is safe because this source deregisters the region
 * before it lets the memory go, in {@link #release} and {@link #retire} alike.
 */
public final class RegisteredChunkSource implements ChunkSource {
    private final ProtectionDomain pd;
    private final int access;
    private final ChunkSource memory;

    /**
     * @param pd     the protection domain every chunk is registered with
     * @param memory where the memory itself comes from (e.g. {@link ChunkSource#mmap()})
     * @param access the rights of every chunk's region
     * @throws RdmaException {@link Errno#EINVAL} for bad rights
     */
    public RegisteredChunkSource(ProtectionDomain pd, ChunkSource memory, Access... access) {
        this.pd = Objects.requireNonNull(pd, "pd");
        this.memory = Objects.requireNonNull(memory, "memory");
        this.access = Access.mask(access);
        Access.validate(this.access, "RegisteredChunkSource(" + pd + ")");
    }

    @Override
    public Chunk allocate(long size, long alignment) {
        Chunk raw = memory.allocate(size, alignment);
        MemoryRegion region;
        try {
            region = pd.register(MemorySegment.ofAddress(raw.address()).reinterpret(size), access);
        } catch (RuntimeException e) {
            memory.release(raw);
            throw e;
        }
        Chunk chunk = new Chunk(this, raw.address(), size, raw);
        chunk.attachment(region);
        return chunk;
    }

    @Override
    public void release(Chunk chunk) {
        memory.release(unwrap(chunk));
    }

    @Override
    public void retire(Chunk chunk) {
        memory.retire(unwrap(chunk));
    }

    /** Deregisters the chunk's region and returns the inner chunk the memory source made. */
    private Chunk unwrap(Chunk chunk) {
        if (chunk.source() != this || !(chunk.sourceToken() instanceof Chunk raw)) {
            throw new RdmaException(Errno.EINVAL, this + ": " + chunk + " belongs to another source");
        }
        if (chunk.attachment() instanceof MemoryRegion region && !region.isDestroyed()) {
            region.close();
        }
        chunk.attachment(null);
        return raw;
    }

    /** The region of a chunk this source made. */
    public static MemoryRegion region(Chunk chunk) {
        if (!(chunk.source() instanceof RegisteredChunkSource) || !(chunk.attachment() instanceof MemoryRegion r)) {
            throw new RdmaException(Errno.EINVAL, chunk + " was not made by a RegisteredChunkSource");
        }
        return r;
    }

    @Override
    public long pageSize() {
        return memory.pageSize();
    }

    @Override
    public String name() {
        return "registered(" + memory.name() + ")";
    }

    @Override
    public String toString() {
        return "RegisteredChunkSource[" + pd + ", " + memory.name() + "]";
    }
}
