package io.regmem.registration.uring;

import io.regmem.core.BufferPool;
import io.regmem.core.Chunk;
import io.regmem.core.ChunkListener;
import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A {@link BufferPool} registered with an {@link IoRing}: every chunk of the pool, present and
 * future, takes a slot of the ring's fixed-buffer table when it is born, so any buffer of the pool
 * can be the memory of {@code READ_FIXED}/{@code WRITE_FIXED} and finds its buffer index with a
 * field read. Made by {@link IoRing#register(BufferPool)}.
 *
 * <p>A chunk leaving the pool (the pool closes, a large buffer is freed) is cleared from the table
 * and its memory goes back to the pool's source only after the kernel's tag completion for the
 * slot has arrived and every operation on it has completed: an I/O in flight while the pool closes
 * lands in memory that is still there and is reported normally. On the ring's owner thread the
 * pool's {@code close()} waits for that; on another thread the ring finishes it at its next call.
 *
 * <p>Chunks born on another thread (a pool shared by several threads) are registered by the owner
 * at its next call on the ring, or at once when an operation needs them. The same pool may also be
 * registered with an RDMA protection domain ({@code PoolRegistration}): the two attachments are
 * separate. {@link #close()} clears every slot and stops listening; the pool stays usable.
 */
public final class IoRegistration implements ChunkListener, AutoCloseable {
    private final IoRing ring;
    private final BufferPool pool;
    private final Set<FixedSlot> slots = ConcurrentHashMap.newKeySet();
    private volatile boolean closed;

    IoRegistration(IoRing ring, BufferPool pool) {
        this.ring = ring;
        this.pool = pool;
    }

    /** The pool. */
    public BufferPool pool() {
        return pool;
    }

    /** The ring. */
    public IoRing ring() {
        return ring;
    }

    /** Chunks of the pool in the ring's table now. */
    public int chunks() {
        return slots.size();
    }

    /**
     * The fixed-buffer index of a chunk of this pool, or -1 if the chunk is not registered here.
     */
    public int bufferIndex(Chunk chunk) {
        return chunk.ioAttachment() instanceof FixedSlot s && s.registration == this && !s.removed ? s.index : -1;
    }

    /** One ring per pool at a time: a second {@code register} of the pool is {@code EBUSY}. */
    @Override
    public String role() {
        return "an io_uring ring";
    }

    @Override
    public void chunkAdded(Chunk chunk) {
        if (closed) {
            return;
        }
        if (chunk.ioAttachment() != null) {
            throw new RdmaException(Errno.EBUSY, ring + ": " + chunk + " of pool " + pool.name()
                    + " is already registered with an io_uring (a pool registers with one ring at a time)");
        }
        FixedSlot s = ring.buffers().add(this, chunk);
        slots.add(s);
        chunk.ioAttachment(s);
    }

    @Override
    public void chunkRemoved(Chunk chunk) {
        if (chunk.ioAttachment() instanceof FixedSlot s && s.registration == this && slots.remove(s)) {
            chunk.ioAttachment(null);
            ring.buffers().remove(s, chunk.holdRelease());
        }
    }

    /**
     * Clears every chunk of the pool from the ring's table and stops listening to the pool. Closing
     * twice does nothing.
     *
     * @throws RdmaException {@link Errno#EPERM} on a thread other than the ring's owner (while the
     *                       owner lives)
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        ring.checkOwnerForClose("IoRegistration.close");
        closed = true;
        pool.removeChunkListener(this);
        for (FixedSlot s : slots.toArray(FixedSlot[]::new)) {
            chunkRemoved(s.chunk);
        }
        ring.forget(this);
    }

    /** The ring closed without its owner: stop listening and let every chunk go (no system calls). */
    void detachAll() {
        closed = true;
        pool.removeChunkListener(this);
        for (FixedSlot s : slots.toArray(FixedSlot[]::new)) {
            if (slots.remove(s)) {
                s.removed = true;
                if (s.chunk.ioAttachment() == s) {
                    s.chunk.ioAttachment(null);
                }
            }
        }
    }

    boolean isClosed() {
        return closed;
    }

    @Override
    public String toString() {
        return "IoRegistration[" + pool.name() + " on " + ring + ", " + slots.size() + " chunk(s)]";
    }
}
