package io.regmem.registration;

import io.regmem.core.Chunk;

/**
 * How a {@link PoolRegistration} registers a pool's chunks: directly with a protection domain
 * (the default), or through a registration cache, which then also invalidates a chunk's region
 * when the chunk is unmapped.
 */
public interface ChunkRegistrar {

    /** The protection domain the regions belong to. */
    ProtectionDomain pd();

    /**
     * Registers a new chunk's memory ({@link Chunk#segment()}).
     *
     * @return the region covering the whole chunk
     */
    MemoryRegion register(Chunk chunk);

    /** The chunk is about to be unmapped: end its region's keys and give the registration back. */
    void deregister(Chunk chunk, MemoryRegion region);
}
