package io.regmem.core;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/** Chunks from one shared {@link Arena} each: portable, and released by closing the arena. */
final class ArenaChunkSource implements ChunkSource {
    static final ArenaChunkSource INSTANCE = new ArenaChunkSource();

    private ArenaChunkSource() {
    }

    @Override
    public Chunk allocate(long size, long alignment) {
        if (size <= 0 || Long.bitCount(alignment) != 1) {
            throw new RdmaException(Errno.EINVAL, "ChunkSource[arena]: size " + size + " must be positive and alignment "
                    + alignment + " a power of two");
        }
        Arena arena = Arena.ofShared();
        try {
            MemorySegment segment = arena.allocate(size, Math.max(alignment, pageSize()));
            return new Chunk(this, segment.address(), size, arena);
        } catch (OutOfMemoryError e) {
            arena.close();
            throw new RdmaException(Errno.ENOMEM, "ChunkSource[arena]: cannot allocate " + size + " bytes", e);
        }
    }

    @Override
    public void release(Chunk chunk) {
        if (chunk.source() != this || !(chunk.sourceToken() instanceof Arena arena)) {
            throw new RdmaException(Errno.EINVAL, "ChunkSource[arena]: " + chunk + " belongs to another source");
        }
        arena.close();
    }

    @Override
    public void retire(Chunk chunk) {
        // An arena's memory cannot be replaced in place: keep it, so stale unchecked views stay harmless.
        if (chunk.source() != this) {
            throw new RdmaException(Errno.EINVAL, "ChunkSource[arena]: " + chunk + " belongs to another source");
        }
    }

    @Override
    public long pageSize() {
        return Native.PAGE_SIZE;
    }

    @Override
    public String name() {
        return "arena";
    }

    @Override
    public String toString() {
        return "ChunkSource[arena]";
    }
}
