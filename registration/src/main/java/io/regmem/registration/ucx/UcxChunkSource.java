package io.regmem.registration.ucx;

import io.regmem.core.Chunk;
import io.regmem.core.ChunkSource;
import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.lang.foreign.MemorySegment;

/**
 * Chunks that UCX allocates and registers itself ({@code ucp_mem_map} with
 * {@code UCP_MEM_MAP_ALLOCATE}; UCX picks shared memory where it can, which a peer on the same host
 * can reach without the owner's CPU). A region registered over such a chunk reuses its registration
 * ({@link UcxDevice#registerMemory}): no {@code ucp_mem_map} per region. Chunks are zero-filled when
 * handed out. {@link #retire} keeps a chunk's memory until the device closes (an unchecked view may
 * still read it); {@link #release} gives it back at once. A chunk must be released before its
 * device closes, which frees what is left.
 */
final class UcxChunkSource implements ChunkSource {
    private static final long PAGE = 4096;
    private final UcxDevice device;

    UcxChunkSource(UcxDevice device) {
        this.device = device;
    }

    @Override
    public Chunk allocate(long size, long alignment) {
        if (size <= 0 || size % PAGE != 0 || Long.bitCount(alignment) != 1 || alignment > PAGE) {
            throw new RdmaException(Errno.EINVAL, this + ": allocate(" + size + ", " + alignment + "): size must be a "
                    + "positive multiple of " + PAGE + " and alignment a power of two up to " + PAGE);
        }
        UcxDevice.Allocation a = device.allocate(size);
        MemorySegment.NULL.reinterpret(Long.MAX_VALUE).asSlice(a.address(), size).fill((byte) 0);
        return new Chunk(this, a.address(), size, a);
    }

    @Override
    public void release(Chunk chunk) {
        device.free(allocation(chunk), false);
    }

    @Override
    public void retire(Chunk chunk) {
        device.free(allocation(chunk), true);
    }

    private UcxDevice.Allocation allocation(Chunk chunk) {
        if (chunk.source() != this || !(chunk.sourceToken() instanceof UcxDevice.Allocation a)) {
            throw new RdmaException(Errno.EINVAL, this + ": " + chunk + " belongs to another source");
        }
        return a;
    }

    @Override
    public long pageSize() {
        return PAGE;
    }

    @Override
    public String name() {
        return "ucx";
    }

    @Override
    public String toString() {
        return "UcxChunkSource[" + device + "]";
    }
}
