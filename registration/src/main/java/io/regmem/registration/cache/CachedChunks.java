package io.regmem.registration.cache;

import io.regmem.core.Chunk;
import io.regmem.registration.ChunkRegistrar;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.ProtectionDomain;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * How {@link RegistrationCache#register(io.regmem.core.BufferPool, io.regmem.registration.Access...)}
 * registers a pool's chunks: each chunk is got from the cache once, at birth, and the acquisition
 * is held while the chunk lives; when the pool unmaps the chunk, its region is invalidated (its
 * keys die, no copy through it is in progress) and the acquisition given back.
 */
final class CachedChunks implements ChunkRegistrar {
    private final RegistrationCache cache;
    private final int access;
    private final Map<Chunk, CachedRegion> held = new ConcurrentHashMap<>();

    CachedChunks(RegistrationCache cache, int access) {
        this.cache = cache;
        this.access = access;
    }

    @Override
    public ProtectionDomain pd() {
        return cache.pd();
    }

    @Override
    public MemoryRegion register(Chunk chunk) {
        CachedRegion r = cache.get(chunk.segment(), access);
        held.put(chunk, r);
        return r.region();
    }

    @Override
    public void deregister(Chunk chunk, MemoryRegion region) {
        CachedRegion r = held.remove(chunk);
        cache.invalidate(chunk.address(), chunk.size());
        if (r != null) {
            r.close();
        }
    }
}
