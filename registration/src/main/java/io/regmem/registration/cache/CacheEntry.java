package io.regmem.registration.cache;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.MemoryRegion;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.List;

/**
 * One registration held by a {@link RegistrationCache}: a {@link MemoryRegion} plus a reference
 * count in which membership in the cache's index counts as one, and the handles
 * ({@link CachedRegion}) through which users hold it. The region is deregistered when the count
 * reaches zero, which happens only after the cache dropped it from its index.
 *
 * <h2>The reference word</h2>
 * <pre>
 *   63                        32 31        24 23   21 20                0
 *  +---------------------------+------------+-------+-------------------+
 *  | hits not yet handed over  | lease bits | rotor | references        |
 *  +---------------------------+------------+-------+-------------------+
 * </pre>
 * Acquire is a CAS that refuses to move the reference count up from zero (a region that started
 * dying is never revived); in the same CAS a hit counts itself and takes a free lease bit, the slot
 * of the pooled handle the user gets. Release is a CAS that clears the lease bit and drops the
 * reference together, and refuses when the bit is clear: a second release of the same acquisition
 * finds its lease given back and changes nothing. The handles themselves are immutable (made with
 * the entry, next to it in memory), so a hit and its release write the entry's line only. The
 * thread that takes the count to zero deregisters the region. When all eight lease bits are taken
 * (more than eight users hold the region at once) an acquisition gets a handle of its own, made for
 * it (the only allocation), which keeps its own released flag.
 *
 * <p>Leases are taken at the first free one from the rotor, which the same CAS moves past the lease
 * taken, so a handle given back is handed out again only once the rotation has come round to it:
 * a stale release of an old acquisition finds its lease still free (refused) until then.
 *
 * <p>Hits count in the high half: the thread whose hit sets the word's top bit moves 2^31 hits to
 * the cache's total; the rest move when the region leaves the index and when it dies.
 */
final class CacheEntry extends RegionRefsPadRight {
    private static final VarHandle REFS;
    private static final VarHandle ACCESSED;

    static {
        try {
            MethodHandles.Lookup l = MethodHandles.lookup();
            REFS = l.findVarHandle(RegionRefs.class, "refs", long.class);
            ACCESSED = l.findVarHandle(RegionRefs.class, "accessed", boolean.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** Pooled handles per region (lease bits in the reference word). */
    static final int LEASES = 8;
    /** What {@link #acquire} returns when the count was zero: nothing acquired. */
    static final int REFUSED = -2;
    /** What {@link #acquire} returns when every lease was taken: a handle of its own is needed. */
    static final int NO_LEASE = -1;

    final RegistrationCache cache;
    final MemoryRegion region;
    final MemorySegment segment;
    /** The region's keys, copied here (a registered region's keys never change) so a hit need not touch the region. */
    final int lkey;
    final int rkey;
    /** True once an overlapping registration pushed it out of the index unrevoked (see {@code RegistrationCache}). */
    volatile boolean outside;
    /** The pooled handles, one per lease, made with the entry (so they sit next to it in memory). */
    private final CachedRegion[] handles = new CachedRegion[LEASES];
    /** One reference, in the low bits of {@link #refs}. */
    private static final long REF = 1L;
    private static final long REF_MASK = (1L << 21) - 1;
    private static final int ROTOR_SHIFT = 21;
    private static final long ROTOR_MASK = 7L << ROTOR_SHIFT;
    private static final int LEASE_SHIFT = 24;
    /** One hit, in the high half of {@link #refs}. */
    private static final long HIT = 1L << 32;
    private static final long LOW_HALF = 0xFFFF_FFFFL;

    CacheEntry(RegistrationCache cache, MemoryRegion region, MemorySegment segment, int access) {
        super(segment.address(), segment.address() + segment.byteSize(), segment.scope(), access);
        this.cache = cache;
        this.region = region;
        this.segment = segment;
        this.lkey = region == null ? 0 : region.lkey();
        this.rkey = region == null ? 0 : region.rkey();
        for (int i = 0; i < LEASES; i++) {
            handles[i] = new CachedRegion(this, i);
        }
    }

    /**
     * Takes a reference and a lease unless the count is already zero; a hit also counts itself.
     *
     * @return the lease taken (0..7), {@link #NO_LEASE} when all were taken, or {@link #REFUSED}
     */
    int acquire(boolean hit) {
        long delta = hit ? REF + HIT : REF;
        long r;
        long next;
        int lease;
        do {
            r = (long) REFS.getVolatile(this);
            long count = r & REF_MASK;
            if (count == 0) {
                return REFUSED;
            }
            if (count == REF_MASK) {
                throw new RdmaException(Errno.ENOMEM, this + ": 2^21 - 1 holders at once");
            }
            int free = ~(int) (r >>> LEASE_SHIFT) & 0xFF;
            if (free == 0) {
                lease = NO_LEASE;
                next = r + delta;
            } else {
                int rot = (int) ((r & ROTOR_MASK) >>> ROTOR_SHIFT);
                int rotated = ((free >>> rot) | (free << (LEASES - rot))) & 0xFF;
                lease = (Integer.numberOfTrailingZeros(rotated) + rot) & (LEASES - 1);
                long rotorNext = (long) ((lease + 1) & (LEASES - 1)) << ROTOR_SHIFT;
                next = ((r & ~ROTOR_MASK) | rotorNext) + delta + (1L << (LEASE_SHIFT + lease));
            }
        } while (!REFS.compareAndSet(this, r, next));
        if (r >= 0 && next < 0) {
            handOverHits(); // this hit set the top bit (exactly one thread crosses it)
        }
        return lease;
    }

    /** The handle for a lease just taken, or a handle of its own ({@link #NO_LEASE}). Writes nothing. */
    CachedRegion handle(int lease) {
        return lease == NO_LEASE ? new CachedRegion(this, NO_LEASE) : handles[lease];
    }

    /** Moves 2^31 hits to the cache, unless {@link #takeHits} took them all meanwhile. */
    private void handOverHits() {
        long r;
        do {
            r = (long) REFS.getVolatile(this);
            if (r >= 0) {
                return;
            }
        } while (!REFS.compareAndSet(this, r, r & Long.MAX_VALUE));
        cache.countHits(1L << 31);
    }

    /**
     * Gives back a lease and its reference in one compare-and-set, if the lease is held; the last
     * reference deregisters.
     *
     * @return false if the lease was not held (a second release: nothing changed)
     */
    boolean releaseLease(int lease) {
        long bit = 1L << (LEASE_SHIFT + lease);
        long r;
        do {
            r = (long) REFS.getVolatile(this);
            if ((r & bit) == 0) {
                return false;
            }
        } while (!REFS.compareAndSet(this, r, r - REF - bit));
        if ((r & REF_MASK) == 1) {
            cache.dispose(this);
        }
        return true;
    }

    /** Whether a lease is held now. */
    boolean leaseHeld(int lease) {
        return ((long) REFS.getVolatile(this) & (1L << (LEASE_SHIFT + lease))) != 0;
    }

    /** Drops a reference without a lease (the index's, or a handle of its own's); the last one deregisters. */
    void release() {
        long before = (long) REFS.getAndAdd(this, -REF);
        if ((before & REF_MASK) == 1) {
            cache.dispose(this);
        }
    }

    /** Gives back what {@link #acquire} took: the lease with its reference, or the reference alone ({@link #NO_LEASE}). */
    void giveBack(int lease) {
        if (lease == NO_LEASE) {
            release();
        } else {
            releaseLease(lease);
        }
    }

    /** Drops the index's reference only if nobody else holds one (idle eviction); true if it did. */
    boolean tryRetireIdle() {
        long r = (long) REFS.getVolatile(this);
        return (r & REF_MASK) == 1 && REFS.compareAndSet(this, r, r - REF);
    }

    int refs() {
        return (int) ((long) REFS.getVolatile(this) & REF_MASK);
    }

    /** Leases held now (a bit per pooled handle out). */
    int leases() {
        return (int) ((long) REFS.getVolatile(this) >>> LEASE_SHIFT) & 0xFF;
    }

    /** Tests: pretends {@code n} more hits were counted here (to reach the hand-over without 2^31 gets). */
    void primeHits(long n) {
        REFS.getAndAdd(this, n << 32);
    }

    /** The hits counted here and not yet handed to the cache (stats). */
    long pendingHits() {
        return (long) REFS.getVolatile(this) >>> 32;
    }

    /** Takes the hits counted here (they move to the cache's total), leaving references and leases as they are. */
    long takeHits() {
        long r;
        do {
            r = (long) REFS.getVolatile(this);
        } while (!REFS.compareAndSet(this, r, r & LOW_HALF));
        return r >>> 32;
    }

    /** CLOCK's reference bit: set on a hit (written only when clear, to spare the cache line). */
    void touch() {
        if (!(boolean) ACCESSED.getOpaque(this)) {
            ACCESSED.setOpaque(this, true);
        }
    }

    /** Clears the reference bit; returns what it was. */
    boolean clearAccessed() {
        boolean was = (boolean) ACCESSED.getOpaque(this);
        ACCESSED.setOpaque(this, false);
        return was;
    }

    @Override
    public String toString() {
        return "CacheEntry[0x" + Long.toHexString(start) + "+" + (end - start) + ", refs " + refs()
                + (indexed ? "" : ", unindexed") + ", " + region + "]";
    }

    /** Revokes an entry's keys, unless its last holder deregistered it meanwhile (then they are gone anyway). */
    void revoke() {
        try {
            region.revoke();
        } catch (RdmaException ex) {
            if (ex.errno() != Errno.EBADF) {
                throw ex;
            }
        }
    }

    /** The bytes {@code entries} cover. */
    static long bytesOf(List<CacheEntry> entries) {
        long sum = 0;
        for (CacheEntry e : entries) {
            sum += e.end - e.start;
        }
        return sum;
    }

    /** The segment of the entry that starts at {@code address}. */
    static MemorySegment lowest(List<CacheEntry> entries, long address) {
        for (CacheEntry e : entries) {
            if (e.start == address) {
                return e.segment;
            }
        }
        throw new IllegalStateException("no entry starts at 0x" + Long.toHexString(address));
    }
}
