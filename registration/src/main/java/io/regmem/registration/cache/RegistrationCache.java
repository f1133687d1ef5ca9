package io.regmem.registration.cache;

import io.regmem.core.BufferPool;
import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.Access;
import io.regmem.registration.CacheStats;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.PoolRegistration;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.internal.CacheStatsBridge;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;
import java.util.function.Predicate;

/**
 * A registration cache for one protection domain: {@link #get} returns a region covering the
 * asked range with at least the asked rights, registering only on a miss; {@link CachedRegion#close()}
 * gives it back. Registering is the slow part of every RDMA stack; a hit here is a binary search
 * and one compare-and-set, lock-free and allocation-free.
 *
 * <h2>Index</h2>
 * Non-overlapping regions sorted by address in an immutable two-level structure
 * ({@link RegionIndex}: leaves of at most 64 entries under a top array), published through a
 * volatile field: hits read it without a lock; misses, evictions and invalidations build a new one
 * under the cache's lock, copying only the leaves they change (copy-on-write). A region that a new
 * registration overlaps leaves the index (without {@code merge}), or is merged into it (with
 * {@code merge}, when both have the same rights and the same memory scope).
 *
 * <h2>Hints</h2>
 * Before searching, a hit looks in a small direct-mapped table of hints indexed by the asked
 * address's page (two to four slots per {@code maxRegions}, at most 65,536): the region a search last
 * found for that page. A hint is only a guess (it is read and written without synchronization; a
 * region's bounds and rights are final fields, safe to read through a racy reference): it is used
 * only if it covers the range, has the rights, can be acquired and is still indexed, exactly the
 * checks a searched region passes; otherwise the search runs. A region leaving the index clears
 * the hints that name it. Programs that reuse their buffers (the common case) then hit without a
 * search; programs that never ask twice for the same page can turn hints off
 * ({@link Builder#hints(boolean)}).
 *
 * <h2>Lifetime</h2>
 * Membership in the index counts as one reference. A hit takes a reference and a lease (the slot
 * of a pooled {@link CachedRegion} handle) with one CAS that fails at zero, then checks the region
 * is still indexed (else gives it back and misses). Every acquisition gets its own handle, and a
 * handle is given back once: a second {@code close()} of the same acquisition is refused with
 * {@link Errno#EINVAL} and changes nothing, so a holder cannot drop another holder's reference. A
 * region that leaves the index drops the index's reference; whoever drops the last deregisters it,
 * outside any lock of the cache.
 *
 * <h2>Eviction</h2>
 * When the index holds more than {@code maxRegions} regions or {@code maxBytes} bytes, idle regions
 * (held by nobody but the index) are evicted in CLOCK order, the usual approximation of least
 * recently used: a hit sets the region's reference bit, the sweeping hand clears it, and a region
 * found idle with a clear bit goes. A region in use is never evicted. Once a limit is crossed,
 * eviction goes on to 1/64 below it (caches of 64 regions or more evict in batches).
 *
 * <h2>Invalidation</h2>
 * {@link #invalidate(long, long)} (memory unmapped), {@link #track(Arena)} (an arena closing) and a
 * hit that finds a region's memory scope dead: every overlapping region leaves the index before
 * the call returns, and its keys are revoked at once ({@link MemoryRegion#revoke()}), so a peer's
 * next access with its rkey fails, even while local users still hold the region; when the call
 * returns, no copy through any of them is in progress. That includes regions that had already left
 * the index because an overlapping registration replaced them while users held them. No other state
 * is kept for invalidated regions: nothing grows over any number of map/unmap cycles.
 */
public final class RegistrationCache implements AutoCloseable {
    private final ProtectionDomain pd;
    private final ClockEviction eviction;
    private final boolean merge;
    private volatile RegionIndex index = RegionIndex.EMPTY;
    /** replace()'s working space, used under the lock. */
    private final RegionIndex.Scratch scratch = new RegionIndex.Scratch();
    /** Hints by page (see the class comment); racy by design, checked on use. */
    private final HintTable hints;
    /**
     * Regions that left the index without being revoked (an overlapping registration replaced them)
     * while users still hold them: an invalidation of their memory revokes them too. Changed on
     * misses and releases only, never on hits.
     */
    private final Set<CacheEntry> outside = ConcurrentHashMap.newKeySet();
    private boolean closed;
    /** Detaches this cache's counters from its PD's {@link ProtectionDomain#cacheStats()}, on close. */
    private final Runnable detachStats;

    private final CacheCounters counters = new CacheCounters();

    private RegistrationCache(Builder b) {
        this.pd = b.pd;
        this.eviction = new ClockEviction(b.maxRegions, b.maxBytes);
        this.merge = b.merge;
        this.hints = new HintTable(b.maxRegions, b.hints);
        this.detachStats = CacheStatsBridge.attach(pd, this::stats);
    }

    /** A builder for a cache over {@code pd}, with the documented defaults. */
    public static Builder builder(ProtectionDomain pd) {
        return new Builder(pd);
    }

    /** A cache over {@code pd} with the defaults: 1024 regions, no byte limit, no merging. */
    public static RegistrationCache of(ProtectionDomain pd) {
        return builder(pd).build();
    }

    /**
     * A region covering all of {@code segment} with at least the given rights.
     *
     * @see #get(MemorySegment, int)
     */
    public CachedRegion get(MemorySegment segment, Access... access) {
        return get(segment, Access.mask(access));
    }

    /**
     * A region covering all of {@code segment} with at least {@code accessMask}'s rights: from the
     * index when one is there (lock-free, allocation-free), else newly registered.
     *
     * @return a held region; the caller closes it once
     * @throws RdmaException as {@link ProtectionDomain#register(MemorySegment, int)} on a miss;
     *                       {@link Errno#EBADF} once the cache is closed
     */
    public CachedRegion get(MemorySegment segment, int accessMask) {
        CachedRegion hit = lookup(segment, accessMask);
        return hit != null ? hit : miss(segment, accessMask);
    }

    /**
     * The lock-free hit path: the page's hint, else a search; then acquire (counting the hit in the
     * same CAS) and confirm still indexed and alive.
     */
    private CachedRegion lookup(MemorySegment segment, int accessMask) {
        long address = segment.address();
        long end = address + segment.byteSize();
        int slot = hints.slot(address);
        CacheEntry e = hints.get(slot);
        if (e != null && e.start <= address && e.end >= end) {
            CachedRegion got = acquire(e, accessMask);
            if (got != null) {
                return got;
            }
        }
        e = index.floorRegion(address);
        if (e == null || e.end < end) {
            return null;
        }
        CachedRegion got = acquire(e, accessMask);
        if (got != null) {
            hints.remember(slot, e);
        }
        return got;
    }

    /**
     * Takes a hit's reference on a covering region if it has the rights and is still indexed and
     * alive. A region acquired and then refused counts as a refused hit, which the stats subtract.
     */
    private CachedRegion acquire(CacheEntry e, int accessMask) {
        if ((e.access & accessMask) != accessMask) {
            return null;
        }
        int lease = e.acquire(true);
        if (lease == CacheEntry.REFUSED) {
            return null;
        }
        if (!e.indexed || !e.scope.isAlive()) {
            counters.refusedHits.increment();
            e.giveBack(lease); // the lease too: a refused hit must not keep a handle out
            return null;
        }
        e.touch();
        return e.handle(lease);
    }

    private CachedRegion miss(MemorySegment segment, int accessMask) {
        List<CacheEntry> dropped = new ArrayList<>();
        CacheEntry created;
        CachedRegion handle;
        synchronized (this) {
            if (closed) {
                throw new RdmaException(Errno.EBADF, this + ": get after close");
            }
            CachedRegion again = lookup(segment, accessMask);
            if (again != null) {
                return again;
            }
            counters.misses.increment();
            CacheEvents.Miss missEvent = new CacheEvents.Miss();
            missEvent.begin();
            RegionIndex ix = index;
            long lo = segment.address();
            long hi = lo + segment.byteSize();
            MemorySegment target = segment;
            List<CacheEntry> overlapping = ix.overlapping(lo, hi, merge);
            for (CacheEntry e : overlapping) {
                if (merge && e.access == accessMask && e.scope.isAlive() && e.scope.equals(segment.scope())) {
                    lo = Math.min(lo, e.start);
                    hi = Math.max(hi, e.end);
                    counters.merges.increment();
                }
            }
            if (lo != segment.address() || hi != segment.address() + segment.byteSize()) {
                // Every byte of [lo, hi) lies in the asked segment or an adjacent or overlapping one of
                // the same scope, so one segment of that scope may span it.
                MemorySegment first = segment.address() == lo ? segment : CacheEntry.lowest(overlapping, lo);
                target = first.reinterpret(hi - lo);
            }
            // Leaving: what the new region overlaps, merged or not; a merely adjacent region that
            // was not merged (other rights or scope) stays.
            List<CacheEntry> leaving = new ArrayList<>(overlapping.size());
            for (CacheEntry e : overlapping) {
                if (e.end > lo && e.start < hi) {
                    leaving.add(e);
                }
            }
            MemoryRegion region = pd.register(target, accessMask); // throws: nothing changed
            if (missEvent.shouldCommit()) {
                missEvent.cache = toString();
                missEvent.address = segment.address();
                missEvent.length = segment.byteSize();
                missEvent.registered = target.byteSize();
                missEvent.commit();
            }
            created = new CacheEntry(this, region, target, accessMask);
            handle = created.handle(created.acquire(false)); // the caller's reference (not a hit)
            for (CacheEntry e : leaving) {
                // regions over dead memory also lose their keys
                unindex(e, !e.scope.isAlive(), dropped);
            }
            // Evict before publishing (no reader sees the index over its limits), and publish once.
            List<CacheEntry> gone = eviction.victims(ix, ix.size() - leaving.size() + 1,
                    ix.bytes() - CacheEntry.bytesOf(leaving) + (created.end - created.start), e -> {
                        leftIndex(e);
                        counters.evictions.increment();
                        CacheEvents.evicted(this, e);
                        dropped.add(e); // its count is already zero: disposeDropped deregisters it
                    });
            gone.addAll(leaving);
            index = ix.replace(gone, created, scratch);
        }
        disposeDropped(dropped);
        return handle;
    }

    /**
     * Gives an acquisition back: the same as {@link CachedRegion#close()}.
     *
     * @throws RdmaException {@link Errno#EINVAL} for a region of another cache or an acquisition given back already
     *                       (nothing changes)
     */
    public void put(CachedRegion region) {
        if (region.entry.cache != this) {
            throw new RdmaException(Errno.EINVAL, this + ": " + region + " belongs to another cache");
        }
        region.close();
    }

    /**
     * Registers a whole pool through this cache: each chunk, present and future, is got from the
     * cache once, at birth, and held while the chunk lives; when the pool unmaps a chunk (a large
     * buffer freed, the pool closed) its region is invalidated, so its rkey stops working before
     * the memory goes, and given back. Buffers then know their keys with a field read
     * ({@link PoolRegistration#lkey}).
     *
     * @throws RdmaException {@link Errno#EINVAL} for bad rights; {@link Errno#EBUSY} if the pool is registered already
     */
    public PoolRegistration register(BufferPool pool, Access... access) {
        int mask = Access.mask(access);
        Access.validate(mask, this + ".register(" + pool.name() + ")");
        return PoolRegistration.register(pool, new CachedChunks(this, mask));
    }

    /**
     * Invalidates every region overlapping {@code [address, address + length)}, indexed or held by
     * users after an overlapping registration replaced it: each leaves the index and has its keys
     * revoked, and no copy through it is in progress, when this returns; each is deregistered once
     * its last user gives it back.
     *
     * @return how many regions were invalidated
     */
    public int invalidate(long address, long length) {
        long end = address + length;
        return invalidateSome(ix -> ix.overlapping(address, end, false), e -> e.start < end && e.end > address);
    }

    /** Invalidates every region whose memory belongs to {@code scope} (an arena closing). */
    public int invalidate(MemorySegment.Scope scope) {
        return invalidateSome(ix -> ix.all().stream().filter(e -> e.scope.equals(scope)).toList(),
                e -> e.scope.equals(scope));
    }

    /**
     * Revokes the indexed regions {@code select} picks and the held regions outside the index that
     * {@code outsideToo} picks (regions an overlapping registration replaced: their users may still
     * reach the memory through them, so an invalidation of that memory must reach them too).
     */
    private int invalidateSome(Function<RegionIndex, List<CacheEntry>> select,
                               Predicate<CacheEntry> outsideToo) {
        List<CacheEntry> dropped = new ArrayList<>();
        int n;
        synchronized (this) {
            RegionIndex ix = index;
            List<CacheEntry> victims = select.apply(ix);
            n = victims.size();
            if (n > 0) {
                for (CacheEntry e : victims) {
                    unindex(e, true, dropped);
                }
                index = ix.replace(victims, null, scratch);
            }
            for (CacheEntry e : outside) {
                if (outsideToo.test(e) && outside.remove(e)) {
                    e.revoke();
                    n++;
                }
            }
            counters.invalidations.add(n);
        }
        if (n > 0) {
            CacheEvents.invalidated(this, n);
        }
        disposeDropped(dropped);
        return n;
    }

    /**
     * An arena whose {@link Arena#close()} first invalidates every region over its memory, then
     * closes {@code arena}: tell the cache about an arena this way, and its regions die with it.
     */
    public Arena track(Arena arena) {
        return new TrackedArena(this, arena);
    }

    /**
     * Takes an entry out of the index: revoke its keys if asked; else, while users still hold it, it
     * is remembered as outside the index, where a later invalidation of its memory still reaches it.
     * Drops the index's reference.
     */
    private void unindex(CacheEntry e, boolean revoke, List<CacheEntry> dropped) {
        e.indexed = false;
        leftIndex(e);
        if (revoke) {
            e.revoke();
        } else {
            e.outside = true; // before the add: dispose() forgets it when its last holder gives it back
            outside.add(e);
        }
        dropped.add(e);
    }

    /** What an entry that just left the index leaves behind: the hints naming it, its pending hits. */
    private void leftIndex(CacheEntry e) {
        hints.forget(e);
        counters.hits.add(e.takeHits());
    }

    /**
     * Outside the lock: evicted entries (retired by a CAS from 1 to 0, so nobody can acquire them)
     * are deregistered; other unindexed entries drop the index's reference, and the last holder
     * deregisters them.
     */
    private void disposeDropped(List<CacheEntry> dropped) {
        for (CacheEntry e : dropped) {
            if (e.refs() == 0) {
                dispose(e);
            } else {
                e.release();
            }
        }
    }

    /** Adds hits a region hands over. */
    void countHits(long n) {
        counters.hits.add(n);
    }

    /** Deregisters a region whose count reached zero. */
    void dispose(CacheEntry e) {
        if (e.outside) { // only regions a replacement pushed out are in the set: no map work otherwise
            outside.remove(e);
        }
        counters.hits.add(e.takeHits()); // the count is zero: no acquire can add to them any more
        if (!e.region.isDestroyed()) {
            e.region.close();
        }
    }

    /** Counters since the cache was built, and what the index holds now. */
    public CacheStats stats() {
        return counters.stats(index);
    }

    /** The indexed regions now, in address order (a snapshot; for tests and diagnostics). */
    List<CacheEntry> indexed() {
        return index.all();
    }

    /** Regions in the index now. */
    public int size() {
        return index.size();
    }

    /** The protection domain the cache registers with. */
    public ProtectionDomain pd() {
        return pd;
    }

    /**
     * Empties the index (revoking every key) and refuses further misses; regions still held are
     * deregistered when their users give them back. Idempotent.
     */
    @Override
    public void close() {
        synchronized (this) {
            closed = true;
        }
        invalidateSome(RegionIndex::all, e -> true);
        synchronized (this) {
            hints.clear(); // also a racy hint written after its region left
        }
        detachStats.run(); // idempotent: the PD keeps the counters of a closed cache once
    }

    @Override
    public String toString() {
        return "RegistrationCache[" + pd + "]";
    }

    /**
     * Configures a {@link RegistrationCache}.
     */
    public static final class Builder {
        private final ProtectionDomain pd;
        private int maxRegions = 1024;
        private long maxBytes = Long.MAX_VALUE;
        private boolean merge;
        private boolean hints = true;

        private Builder(ProtectionDomain pd) {
            this.pd = Objects.requireNonNull(pd, "pd");
        }

        /** The most regions the index keeps before evicting idle ones. Default 1024. */
        public Builder maxRegions(int n) {
            this.maxRegions = n;
            return this;
        }

        /** The most registered bytes the index keeps before evicting idle ones. Default: no limit. */
        public Builder maxBytes(long bytes) {
            this.maxBytes = bytes;
            return this;
        }

        /** Merge overlapping or adjacent regions with the same rights and memory scope on insert. Default: off. */
        public Builder merge(boolean on) {
            this.merge = on;
            return this;
        }

        /**
         * Whether hits first try the per-page hint table (see the class comment). Default: on. Off
         * saves the table (4 to 8 bytes per slot, up to 65,536 slots) and its writes when no page
         * is asked for twice; every hit then searches the index.
         */
        public Builder hints(boolean on) {
            this.hints = on;
            return this;
        }

        /**
         * Builds the cache.
         *
         * @throws RdmaException {@link Errno#EINVAL} for a limit below 1
         */
        public RegistrationCache build() {
            if (maxRegions < 1 || maxBytes < 1) {
                throw new RdmaException(Errno.EINVAL, "RegistrationCache.Builder: maxRegions " + maxRegions
                        + " and maxBytes " + maxBytes + " must be at least 1");
            }
            return new RegistrationCache(this);
        }
    }
}
