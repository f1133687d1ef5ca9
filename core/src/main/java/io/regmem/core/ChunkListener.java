package io.regmem.core;

/**
 * Told when a {@link BufferPool} gains or loses a chunk, so that a transport can register each
 * chunk once, when it is born, and deregister it before its memory goes back to the source.
 * {@link BufferPool#addChunkListener} calls {@link #chunkAdded} for every chunk the pool already has.
 *
 * <p>Calls come on the thread that allocates (or frees, closes, or trims: {@link BufferPool#trim()}
 * on the caller's thread, the decay on the {@code regmem-decay} thread) and under the pool's chunk
 * lock: keep them short, and do not call back into the pool. A chunk given back by a trim is
 * removed once; its range may later come back as a new {@code Chunk} (a new {@link #chunkAdded}). If {@link #chunkAdded} throws, the
 * allocation that needed the chunk fails with that exception and the chunk is given back.
 */
public interface ChunkListener {

    /** A chunk was reserved; {@link Chunk#segment()} is its memory in the pool's scope. */
    void chunkAdded(Chunk chunk);

    /**
     * A chunk is about to be given back to its source; nothing may reach its memory afterwards. A
     * consumer that cannot stop at once (I/O in flight into the chunk) takes
     * {@link Chunk#holdRelease()} here and runs the hold's action when it has stopped. If this
     * throws, the other listeners are still told and the chunk's memory is kept, never given back
     * (the consumer may still use it): a trim rethrows the exception, a pool's close or a large
     * buffer's free completes and logs it.
     */
    void chunkRemoved(Chunk chunk);

    /**
     * The role this listener plays for the pool, or null (the default) for none: a pool takes at
     * most one listener of a role at a time, and {@link BufferPool#addChunkListener} refuses a second
     * with {@link Errno#EBUSY}, changing nothing. An RDMA registration ({@code "a protection domain"}: a
     * chunk has one region) and an io_uring registration ({@code "an io_uring ring"}) each claim theirs, so that one pool is
     * registered with one protection domain and one ring at a time.
     */
    default String role() {
        return null;
    }
}
