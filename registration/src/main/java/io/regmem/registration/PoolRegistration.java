package io.regmem.registration;

import io.regmem.core.BufferPool;
import io.regmem.core.Chunk;
import io.regmem.core.ChunkListener;
import io.regmem.core.Errno;
import io.regmem.core.PooledBuffer;
import io.regmem.core.RdmaException;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A {@link BufferPool} registered with a protection domain: every chunk of the pool, present and
 * future (large buffers' dedicated chunks too), is registered once, when it is born, as its own
 * {@link MemoryRegion}, which is attached to the chunk. A buffer's keys are then a field read away:
 * {@link #lkey(PooledBuffer)} does no lookup. A chunk's region is deregistered before the chunk's
 * memory goes back (a large buffer freed, the pool closed), so its rkey stops working first.
 *
 * <p>A pool can be registered with one PD at a time (the chunk attachment is the registration).
 * {@link #close()} deregisters every chunk and stops listening.
 */
public final class PoolRegistration implements ChunkListener, AutoCloseable {
    private final ProtectionDomain pd;
    private final BufferPool pool;
    private final ChunkRegistrar registrar;
    private final Set<Chunk> registered = ConcurrentHashMap.newKeySet();
    private volatile boolean closed;

    private PoolRegistration(BufferPool pool, ChunkRegistrar registrar) {
        this.pd = registrar.pd();
        this.pool = pool;
        this.registrar = registrar;
    }

    static PoolRegistration register(ProtectionDomain pd, BufferPool pool, int access) {
        Access.validate(access, pd + ".register(" + pool.name() + ")");
        return register(pool, new ChunkRegistrar() {
            @Override
            public ProtectionDomain pd() {
                return pd;
            }

            @Override
            public MemoryRegion register(Chunk chunk) {
                return pd.register(chunk.segment(), access);
            }

            @Override
            public void deregister(Chunk chunk, MemoryRegion region) {
                if (!region.isDestroyed()) {
                    region.close();
                }
            }
        });
    }

    /**
     * Registers every chunk of {@code pool}, present and future, with {@code registrar} (for
     * example a registration cache's), once, at birth.
     *
     * @throws RdmaException {@link Errno#EBUSY} if the pool is registered already
     */
    public static PoolRegistration register(BufferPool pool, ChunkRegistrar registrar) {
        PoolRegistration r = new PoolRegistration(pool, registrar);
        pool.addChunkListener(r);
        return r;
    }

    /** One RDMA registration per pool at a time: a second {@code register} of the pool is {@code EBUSY}. */
    @Override
    public String role() {
        return "a protection domain";
    }

    @Override
    public String toString() {
        return "PoolRegistration[" + pool.name() + " with " + pd + (closed ? ", closed]" : "]");
    }

    @Override
    public void chunkAdded(Chunk chunk) {
        if (chunk.attachment() != null) {
            throw new RdmaException(Errno.EBUSY, pd + ": " + chunk + " of pool " + pool.name()
                    + " is already registered (a pool registers with one PD at a time)");
        }
        chunk.attachment(registrar.register(chunk));
        registered.add(chunk);
    }

    @Override
    public void chunkRemoved(Chunk chunk) {
        if (registered.remove(chunk) && chunk.attachment() instanceof MemoryRegion mr) {
            chunk.attachment(null);
            registrar.deregister(chunk, mr);
        }
    }

    /**
     * The region covering a buffer of the registered pool.
     *
     * @throws RdmaException {@link Errno#EINVAL} for a buffer of another pool or after {@link #close()}
     */
    public MemoryRegion region(PooledBuffer buffer) {
        if (buffer.pool() != pool || closed || !(buffer.chunk().attachment() instanceof MemoryRegion mr)) {
            throw new RdmaException(Errno.EINVAL, pd + ": " + buffer + " is not in registered pool " + pool.name());
        }
        return mr;
    }

    /** The lkey for SGEs over {@code buffer}: one field read, no lookup. */
    public int lkey(PooledBuffer buffer) {
        return region(buffer).lkey();
    }

    /** The rkey a peer uses to reach {@code buffer}. */
    public int rkey(PooledBuffer buffer) {
        return region(buffer).rkey();
    }

    /**
     * The exported remote key of the chunk holding {@code buffer} ({@link MemoryRegion#exportRemoteKey()}):
     * a peer imports it once per chunk, since a chunk stays registered for its whole life.
     */
    public byte[] exportRemoteKey(PooledBuffer buffer) {
        return region(buffer).exportRemoteKey();
    }

    /** The protection domain. */
    public ProtectionDomain pd() {
        return pd;
    }

    /** The registered pool. */
    public BufferPool pool() {
        return pool;
    }

    /** Chunks registered now. */
    public int chunkCount() {
        return registered.size();
    }

    /** Deregisters every chunk and stops registering new ones. Idempotent. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        pool.removeChunkListener(this);
        for (Chunk c : registered) {
            chunkRemoved(c);
        }
    }
}
