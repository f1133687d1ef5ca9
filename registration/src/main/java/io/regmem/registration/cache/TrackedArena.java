package io.regmem.registration.cache;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * An arena whose close first invalidates every region of a cache over its memory, then closes the
 * arena it wraps ({@link RegistrationCache#track(Arena)}): when the memory goes, no key of it works
 * and no copy through it is in progress.
 */
final class TrackedArena implements Arena {
    private final RegistrationCache cache;
    private final Arena arena;

    TrackedArena(RegistrationCache cache, Arena arena) {
        this.cache = cache;
        this.arena = arena;
    }

    @Override
    public MemorySegment allocate(long byteSize, long byteAlignment) {
        return arena.allocate(byteSize, byteAlignment);
    }

    @Override
    public MemorySegment.Scope scope() {
        return arena.scope();
    }

    @Override
    public void close() {
        cache.invalidate(arena.scope());
        arena.close();
    }
}
