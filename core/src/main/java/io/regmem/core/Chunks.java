package io.regmem.core;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.LongSupplier;

/**
 * A pool's chunk memory: the {@code maxBytes} budget, the chunks reserved for size classes (carved
 * into slabs by a bump pointer under {@link #lock}), and the release of chunks to their source.
 * Every method here is on a slow path.
 */
final class Chunks {
    private static final System.Logger LOG = System.getLogger(BufferPool.class.getName());
    private final String pool;
    private final ChunkSource source;
    private final long chunkSize;
    private final long maxBytes;
    /** The scope of every pooled buffer's segment: closing it makes stale checked views throw. */
    private final Arena scope = Arena.ofShared();
    private final ReentrantLock lock = new ReentrantLock();
    private final List<Chunk> chunks = new ArrayList<>();
    private final AtomicLong reserved = new AtomicLong();
    /** Allocations refused because they would exceed {@code maxBytes}. */
    final LongAdder exhausted = new LongAdder();
    private final List<ChunkListener> listeners = new CopyOnWriteArrayList<>();
    /** Live dedicated chunks of large buffers, for listeners that join later. Guarded by {@link #lock}. */
    private final Set<Chunk> dedicated = new LinkedHashSet<>();
    private MemorySegment current;
    private Chunk currentChunk;
    private long currentOffset;
    /** Size-class chunks given back while the pool runs, their ranges kept for reuse. */
    final RetainedChunks retained;

    /** Touch every page of a chunk when it is taken ({@link BufferPoolBuilder#preTouch}). */
    private final boolean preTouch;

    Chunks(String pool, ChunkSource source, long chunkSize, long maxBytes, boolean preTouch) {
        this.pool = pool;
        this.source = source;
        this.chunkSize = chunkSize;
        this.maxBytes = maxBytes;
        this.preTouch = preTouch;
        this.retained = new RetainedChunks(pool, source, reserved);
    }

    /**
     * Counts {@code bytes} against {@code maxBytes}.
     *
     * @param inUse computes the bytes in live buffers, only for the exception's message
     * @throws PoolExhaustedException when the budget would be exceeded; nothing is counted then
     */
    void reserve(long bytes, LongSupplier inUse) {
        while (true) {
            long r = reserved.get();
            long next = r + bytes;
            if (next > maxBytes || next < 0) {
                long used = inUse.getAsLong();
                PoolEvents.Exhausted event = new PoolEvents.Exhausted();
                if (event.shouldCommit()) {
                    event.pool = pool;
                    event.limit = maxBytes;
                    event.reserved = r;
                    event.inUse = used;
                    event.requested = bytes;
                    event.commit();
                }
                exhausted.increment();
                throw new PoolExhaustedException(pool, maxBytes, r, used, bytes);
            }
            if (reserved.compareAndSet(r, next)) {
                return;
            }
        }
    }

    /** Reserves budget and a chunk of {@code bytes} from the source; undoes the budget if the source fails. */
    Chunk allocate(long bytes, LongSupplier inUse) {
        reserve(bytes, inUse);
        PoolEvents.ChunkMap event = new PoolEvents.ChunkMap();
        event.begin();
        Chunk chunk;
        try {
            chunk = source.allocate(bytes, source.pageSize());
        } catch (RuntimeException e) {
            reserved.addAndGet(-bytes);
            throw e;
        }
        if (preTouch) {
            Native.populate(chunk.address(), chunk.size());
        }
        if (event.shouldCommit()) {
            event.pool = pool;
            event.address = chunk.address();
            event.size = chunk.size();
            event.dedicated = bytes != chunkSize;
            event.commit();
        }
        return chunk;
    }

    /**
     * Tells the listeners about a new chunk; if one refuses, tells those already told that it is
     * gone, gives the chunk back and rethrows. Called under {@link #lock}.
     */
    private void adopt(Chunk chunk, boolean isDedicated) {
        int told = 0;
        try {
            for (ChunkListener l : listeners) {
                l.chunkAdded(chunk);
                told++;
            }
        } catch (RuntimeException e) {
            chunk.beginRelease(isDedicated || !source.canDecommit() ? () -> giveBack(chunk)
                    : () -> retained.retain(chunk, true)); // a size-class chunk's range may have stale views: kept
            try {
                for (int i = 0; i < told; i++) {
                    listeners.get(i).chunkRemoved(chunk);
                }
            } finally {
                chunk.dropHold();
            }
            throw e;
        }
        if (isDedicated) {
            dedicated.add(chunk);
        }
    }

    /** Adopts a dedicated chunk (a large buffer's), whose segment is already set. */
    void adoptDedicated(Chunk chunk) {
        lock.lock();
        try {
            adopt(chunk, true);
        } finally {
            lock.unlock();
        }
    }

    /** Adds a listener and tells it about every chunk the pool has now, atomically. */
    void addListener(ChunkListener l) {
        lock.lock();
        try {
            String role = l.role();
            if (role != null) {
                for (ChunkListener other : listeners) {
                    if (role.equals(other.role())) {
                        throw new RdmaException(Errno.EBUSY, pool + ": already registered with " + role + " ("
                                + other + "); a pool registers with one at a time: close that registration first");
                    }
                }
            }
            List<Chunk> all = new ArrayList<>(chunks);
            all.addAll(dedicated);
            int told = 0;
            try {
                for (Chunk c : all) {
                    l.chunkAdded(c);
                    told++;
                }
            } catch (RuntimeException e) {
                for (int i = 0; i < told; i++) {
                    l.chunkRemoved(all.get(i)); // undo: a failed add leaves nothing behind
                }
                throw e;
            }
            listeners.add(l);
        } finally {
            lock.unlock();
        }
    }

    void removeListener(ChunkListener l) {
        lock.lock();
        try {
            listeners.remove(l);
        } finally {
            lock.unlock();
        }
    }

    /** Gives a size-class chunk back (pool close): listeners first, then the source. */
    void release(Chunk chunk) {
        release(chunk, null);
    }

    /**
     * Gives a chunk back: tells the listeners (so registrations end while the memory is still
     * there), ends {@code scope} if given (a dedicated chunk's own arena), then returns the memory to
     * the source (retired if unchecked views were made) and its bytes to the budget, at once or,
     * when a listener took a {@linkplain Chunk#holdRelease() hold}, when the last hold is dropped. A
     * listener that throws is logged and the rest go on; that chunk's memory then stays mapped (and
     * counted).
     */
    void release(Chunk chunk, Arena scopeToClose) {
        chunk.beginRelease(() -> giveBack(chunk));
        boolean failed = false;
        lock.lock();
        try {
            dedicated.remove(chunk);
            for (ChunkListener l : listeners) {
                try {
                    l.chunkRemoved(chunk);
                } catch (RuntimeException e) {
                    // The others are still told and the close (or free) completes; the memory is kept,
                    // mapped, since the failed listener may still use it.
                    failed = true;
                    LOG.log(System.Logger.Level.WARNING, pool + ": " + l + " failed to let go of " + chunk
                            + "; its memory stays mapped", e);
                }
            }
        } finally {
            lock.unlock();
        }
        if (scopeToClose != null) {
            scopeToClose.close();
        }
        if (!failed) {
            chunk.dropHold(); // the pool's hold: the memory goes back now unless a listener holds it
        }
    }

    private void giveBack(Chunk chunk) {
        PoolEvents.ChunkUnmap event = new PoolEvents.ChunkUnmap();
        event.begin();
        boolean retired = RetainedChunks.releaseToSource(chunk);
        reserved.addAndGet(-chunk.size());
        if (event.shouldCommit()) {
            event.pool = pool;
            event.address = chunk.address();
            event.size = chunk.size();
            event.retired = retired;
            event.commit();
        }
    }

    /**
     * Carves the next slab for a size class out of the current chunk, mapping a new chunk when
     * fewer than one buffer's worth is left (the old chunk's tail, under one buffer, stays unused).
     * The slab's slots start idle: their handles are made when they are first taken, their segments
     * (in the pool's scope) when first asked for.
     */
    Slab carveSlab(BufferPool owner, SizeClass sc, LongSupplier inUse) {
        lock.lock();
        try {
            long remaining = currentChunk == null ? 0 : currentChunk.size() - currentOffset;
            if (remaining < sc.size) {
                Chunk chunk = reuseRetained(inUse);
                if (chunk == null) {
                    chunk = allocate(chunkSize, inUse);
                }
                MemorySegment seg = MemorySegment.ofAddress(chunk.address()).reinterpret(chunkSize, scope, null);
                chunk.segment(seg);
                adopt(chunk, false);
                chunk.decayStableSince = System.nanoTime();
                chunks.add(chunk);
                currentChunk = chunk;
                current = seg;
                currentOffset = 0;
                remaining = chunkSize;
            }
            long bytes = Math.min(sc.slabBytes, (remaining / sc.size) * sc.size);
            int n = (int) (bytes / sc.size);
            Slab slab = new Slab(owner, currentChunk, sc.index, currentOffset, sc.size, n);
            currentChunk.carved.add(slab);
            currentOffset += bytes;
            return slab;
        } finally {
            lock.unlock();
        }
    }

    /**
     * Ends the scope of every pooled segment, then gives every size-class chunk back.
     *
     * @return false (and nothing changed) if another thread is accessing a segment right now
     */
    boolean closeAll() {
        try {
            scope.close();
        } catch (IllegalStateException busy) {
            return false;
        }
        lock.lock();
        try {
            for (Chunk c : chunks) {
                release(c);
            }
            chunks.clear();
            current = null;
            currentChunk = null;
        } finally {
            lock.unlock();
        }
        retained.close(); // and a trimmed chunk whose hold ends later goes to the source then
        return true;
    }

    // ---- giving memory back while the pool runs ----------------------------------------------

    /** True if this pool's chunks can go back while it runs ({@link ChunkSource#canDecommit()}). */
    boolean canTrim() {
        return source.canDecommit();
    }

    /**
     * The size-class chunks whose slabs all look idle now (read without the classes' locks: a trim
     * checks again under them), highest address first. With {@code idleNanos} above zero, only
     * those whose slabs none of their classes took a slot from for that long (the decay), which
     * this call also keeps track of.
     */
    List<Chunk> candidates(long now, long idleNanos) {
        List<Chunk> found = new ArrayList<>();
        lock.lock();
        try {
            for (Chunk c : chunks) {
                long takes = 0;
                boolean idle = true;
                for (Slab s : c.carved) {
                    takes += s.takes;
                    idle &= s.idle == s.slots;
                }
                if (takes != c.decayTakes) {
                    c.decayTakes = takes;
                    c.decayStableSince = now;
                }
                if (idle && (idleNanos <= 0 || now - c.decayStableSince >= idleNanos)) {
                    found.add(c);
                }
            }
        } finally {
            lock.unlock();
        }
        found.sort((a, b) -> Long.compareUnsigned(b.address(), a.address()));
        return found;
    }

    /**
     * Gives a size-class chunk back if every slot of it is idle: under the locks of its slabs'
     * classes (in index order, then {@link #lock}) its slabs leave their classes, so no slot of it
     * can be bound again; then every listener is told (registrations end, waiting for copies in
     * flight; I/O rings retire the chunk, holding its release until their I/O into it completed);
     * then, when the last hold ends, its memory is decommitted and its range kept for reuse.
     *
     * @return false (nothing changed) if the chunk is gone already or a slot of it is not idle
     */
    boolean trim(Chunk c, SizeClass[] classState) {
        int[] cls;
        lock.lock();
        try {
            if (!chunks.contains(c)) {
                return false;
            }
            cls = c.carved.stream().mapToInt(s -> s.sizeClass).distinct().sorted().toArray();
        } finally {
            lock.unlock();
        }
        int locked = 0;
        boolean chunkLocked = false;
        boolean unlinked = false;
        try {
            for (; locked < cls.length; locked++) {
                classState[cls[locked]].lock.lock();
            }
            lock.lock();
            chunkLocked = true;
            if (!chunks.contains(c) || !idleUnder(c, cls)) {
                return false;
            }
            Map<Integer, List<Slab>> byClass = new HashMap<>();
            for (Slab s : c.carved) {
                byClass.computeIfAbsent(s.sizeClass, k -> new ArrayList<>()).add(s);
            }
            byClass.forEach((k, slabs) -> classState[k].unlink(slabs));
            c.carved.clear(); // the slabs are garbage now (a dropped handle's stale reference aside)
            chunks.remove(c);
            if (c == currentChunk) {
                currentChunk = null; // the bump pointer starts a new chunk; this one's tail goes with it
                current = null;
            }
            unlinked = true;
        } finally {
            for (int i = locked - 1; i >= 0; i--) {
                classState[cls[i]].lock.unlock();
            }
            if (chunkLocked && !unlinked) {
                lock.unlock();
            }
        }
        // Still under the chunk lock (as every listener call is): the listeners let go of it.
        RuntimeException failed = null;
        AtomicBoolean keepPages = new AtomicBoolean(); // a listener failed: it may still use the memory
        c.beginRelease(() -> retained.retain(c, !keepPages.get()));
        try {
            for (ChunkListener l : listeners) {
                try {
                    l.chunkRemoved(c);
                } catch (RuntimeException e) {
                    keepPages.set(true);
                    if (failed == null) {
                        failed = e;
                    } else {
                        failed.addSuppressed(e);
                    }
                }
            }
        } finally {
            lock.unlock();
        }
        c.dropHold();
        if (failed != null) {
            throw failed;
        }
        return true;
    }

    /** True if the chunk's slabs are all of the locked classes and all idle (those locks and {@link #lock} held). */
    private static boolean idleUnder(Chunk c, int[] cls) {
        for (Slab s : c.carved) {
            if (Arrays.binarySearch(cls, s.sizeClass) < 0 || s.idle != s.slots) {
                return false;
            }
        }
        return true;
    }

    /**
     * The lowest retained range as a new chunk (budget reserved, its pages touched if asked), or
     * null if none is kept. Under {@link #lock}.
     */
    private Chunk reuseRetained(LongSupplier inUse) {
        Chunk old = retained.takeLowest();
        if (old == null) {
            return null;
        }
        try {
            reserve(old.size(), inUse);
        } catch (RuntimeException e) {
            retained.keep(old);
            throw e;
        }
        // A new Chunk over the same range: what listeners attached to the old one, and a stale
        // buffer's chunk(), stay with the old object.
        Chunk chunk = new Chunk(old.source(), old.address(), old.size(), old.sourceToken());
        if (old.hasUncheckedViews()) {
            chunk.markUncheckedViews(); // a view of its old life may still read it: retire it at close
        }
        if (preTouch) {
            Native.populate(chunk.address(), chunk.size());
        }
        PoolEvents.ChunkMap event = new PoolEvents.ChunkMap();
        if (event.shouldCommit()) {
            event.pool = pool;
            event.address = chunk.address();
            event.size = chunk.size();
            event.reused = true;
            event.commit();
        }
        return chunk;
    }

    /** Bytes counted against {@code maxBytes} now. */
    long reserved() {
        return reserved.get();
    }

    /** A snapshot of the size-class chunks, in order. */
    List<Chunk> snapshot() {
        lock.lock();
        try {
            return List.copyOf(chunks);
        } finally {
            lock.unlock();
        }
    }
}
