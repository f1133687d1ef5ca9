package io.regmem.core;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Size-class chunks a pool gave back while it runs: their memory decommitted
 * ({@link ChunkSource#decommit}), their address ranges kept mapped, so that a stale view over one
 * (a checked segment kept past its buffer's free, an unchecked Agrona view) reads zeros rather than
 * faulting, and reused, lowest address first, for the pool's next chunks. A pool's address space
 * is therefore its high-water mark; its memory is what it holds now. Everything goes to the source
 * when the pool closes. Its own lock, not the chunk lock: a listener's hold on a trimmed chunk may
 * end on any thread (an io_uring completion).
 */
final class RetainedChunks {
    private final String pool;
    private final ChunkSource source;
    /** The pool's reserved bytes (what {@code maxBytes} limits): a chunk's leave it when its memory goes back. */
    private final AtomicLong reserved;
    private final ReentrantLock lock = new ReentrantLock();
    private final List<Chunk> ranges = new ArrayList<>();
    private boolean closed;
    /** Chunks (and bytes) given back while the pool ran, since it was built. */
    final AtomicLong chunks = new AtomicLong();
    final AtomicLong bytes = new AtomicLong();

    RetainedChunks(String pool, ChunkSource source, AtomicLong reserved) {
        this.pool = pool;
        this.source = source;
        this.reserved = reserved;
    }

    /**
     * A trimmed chunk's memory goes back (its last hold ended): decommitted (unless a listener failed
     * to let go of it, then its pages stay as they are), its bytes off the budget, its range kept; or,
     * if the pool closed meanwhile, released to the source. Any thread.
     */
    void retain(Chunk c, boolean decommit) {
        PoolEvents.ChunkTrim event = new PoolEvents.ChunkTrim();
        event.begin();
        if (decommit) {
            source.decommit(c);
        }
        keep(c);
        reserved.addAndGet(-c.size());
        chunks.incrementAndGet();
        bytes.addAndGet(c.size());
        if (event.shouldCommit()) {
            event.pool = pool;
            event.address = c.address();
            event.size = c.size();
            event.decommitted = decommit;
            event.commit();
        }
    }

    /** Takes the lowest kept range, or null if none is kept. */
    Chunk takeLowest() {
        lock.lock();
        try {
            if (ranges.isEmpty()) {
                return null;
            }
            int low = 0;
            for (int i = 1; i < ranges.size(); i++) {
                if (Long.compareUnsigned(ranges.get(i).address(), ranges.get(low).address()) < 0) {
                    low = i;
                }
            }
            return ranges.remove(low);
        } finally {
            lock.unlock();
        }
    }

    /**
     * Keeps a range for reuse (a trimmed chunk's, or one {@link #takeLowest} took and could not use:
     * the budget refused it), or releases it to the source if the pool closed.
     */
    void keep(Chunk c) {
        lock.lock();
        try {
            if (closed) {
                releaseToSource(c);
            } else {
                ranges.add(c);
            }
        } finally {
            lock.unlock();
        }
    }

    /** Bytes of address space kept, with no memory behind them. */
    long bytesKept() {
        lock.lock();
        try {
            long n = 0;
            for (Chunk c : ranges) {
                n += c.size();
            }
            return n;
        } finally {
            lock.unlock();
        }
    }

    /** The pool closed: every kept range goes to the source, and so will those trimmed later. */
    void close() {
        lock.lock();
        try {
            closed = true;
            for (Chunk c : ranges) {
                releaseToSource(c);
            }
            ranges.clear();
        } finally {
            lock.unlock();
        }
    }

    /** Returns a chunk's memory to its source: retired if unchecked views were made over it, else released. */
    static boolean releaseToSource(Chunk chunk) {
        boolean retired = chunk.hasUncheckedViews();
        if (retired) {
            chunk.source().retire(chunk);
        } else {
            chunk.source().release(chunk);
        }
        return retired;
    }
}
