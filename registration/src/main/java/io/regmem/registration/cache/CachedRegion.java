package io.regmem.registration.cache;

import io.regmem.registration.MemoryRegion;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * One registration held by a {@link RegistrationCache}: a {@link MemoryRegion} plus a reference
 * count in which membership in the cache's index counts as one. {@link RegistrationCache#get}
 * hands out the same object to every user of the region (no allocation per hit); each user
 * {@link #close()}s it once. The region is deregistered when the count reaches zero, which
 * happens only after the cache dropped it from its index.
 *
 * <p>Reference counting: acquire is a CAS loop that refuses to move the count up from zero, so a
 * region that started dying is never revived; release is an atomic decrement, and the thread that
 * takes it to zero deregisters the region.
 *
 * <p>The count shares one 64-bit word with the region's hit counter: the low 32 bits count
 * references, the high 32 bits count hits not yet handed to the cache's total. A hit's acquiring CAS
 * adds one to both at once, so counting hits costs the hit path nothing beyond the CAS it already
 * makes (a shared counter cost it about 9 ns). The thread whose hit sets the word's top bit moves
 * 2^31 hits to the cache's total; the rest move when the region leaves the index and when it dies.
 */
public final class CachedRegion extends RegionRefsPadRight implements AutoCloseable {
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

    final RegistrationCache cache;
    final MemoryRegion region;
    final MemorySegment segment;
    /** The memory's scope, kept here so that a hit's liveness check is one hop. */
    final MemorySegment.Scope scope;
    final long start;
    final long end;
    final int access;
    /** The region's keys, copied here (a registered region's keys never change) so a hit need not touch the region. */
    private final int lkey;
    private final int rkey;
    /** One reference, in the low half of {@link #refs}. */
    private static final long REF = 1L;
    /** One hit, in the high half of {@link #refs}. */
    private static final long HIT = 1L << 32;
    private static final long REF_MASK = 0xFFFF_FFFFL;
    /** False once the entry left the index (evicted, merged away, invalidated, cache closed). */

    CachedRegion(RegistrationCache cache, MemoryRegion region, MemorySegment segment, int access) {
        this.cache = cache;
        this.region = region;
        this.segment = segment;
        this.scope = segment.scope();
        this.start = segment.address();
        this.end = segment.address() + segment.byteSize();
        this.access = access;
        this.lkey = region == null ? 0 : region.lkey();
        this.rkey = region == null ? 0 : region.rkey();
    }

    /** Takes a reference unless the count is already zero (a miss's own first reference: no hit counted). */
    boolean tryAcquire() {
        return tryAcquire(REF);
    }

    /** Takes a reference for a hit, counting the hit in the same CAS; false if the count is zero. */
    boolean tryAcquireHit() {
        return tryAcquire(REF + HIT);
    }

    private boolean tryAcquire(long delta) {
        long r;
        do {
            r = (long) REFS.getVolatile(this);
            if ((r & REF_MASK) == 0) {
                return false;
            }
        } while (!REFS.compareAndSet(this, r, r + delta));
        if (r >= 0 && r + delta < 0) {
            handOverHits(); // this hit set the top bit (exactly one thread crosses it)
        }
        return true;
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

    /** Drops a reference; the last one deregisters. */
    void release() {
        long before = (long) REFS.getAndAdd(this, -REF);
        long count = before & REF_MASK;
        if (count == 1) {
            cache.dispose(this);
        } else if (count == 0) {
            REFS.getAndAdd(this, REF);
            throw new io.regmem.core.RdmaException(io.regmem.core.Errno.EINVAL, this + ": released more often than acquired");
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

    /** Tests: pretends {@code n} more hits were counted here (to reach the hand-over without 2^31 gets). */
    void primeHits(long n) {
        REFS.getAndAdd(this, n << 32);
    }

    /** The hits counted here and not yet handed to the cache (stats). */
    long pendingHits() {
        return (long) REFS.getVolatile(this) >>> 32;
    }

    /** Takes the hits counted here (they move to the cache's total), leaving the references as they are. */
    long takeHits() {
        long r;
        do {
            r = (long) REFS.getVolatile(this);
        } while (!REFS.compareAndSet(this, r, r & REF_MASK));
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

    /** The registered region (its keys, address and length). */
    public MemoryRegion region() {
        return region;
    }

    /** The key for local SGEs. */
    public int lkey() {
        return lkey;
    }

    /** The key a peer uses. */
    public int rkey() {
        return rkey;
    }

    /** The first registered address (may be below what was asked, when regions merged). */
    public long address() {
        return start;
    }

    /** Registered bytes. */
    public long length() {
        return end - start;
    }

    /** The granted rights ({@link io.regmem.registration.Access} bits). */
    public int access() {
        return access;
    }

    /** Gives this user's reference back to the cache ({@link RegistrationCache#put}). */
    @Override
    public void close() {
        release();
    }

    @Override
    public String toString() {
        return "CachedRegion[0x" + Long.toHexString(start) + "+" + (end - start) + ", refs " + refs()
                + (indexed ? "" : ", unindexed") + ", " + region + "]";
    }
}
