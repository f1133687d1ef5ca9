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
 */
public final class CachedRegion implements AutoCloseable {
    private static final VarHandle REFS;
    private static final VarHandle ACCESSED;

    static {
        try {
            MethodHandles.Lookup l = MethodHandles.lookup();
            REFS = l.findVarHandle(CachedRegion.class, "refs", int.class);
            ACCESSED = l.findVarHandle(CachedRegion.class, "accessed", boolean.class);
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
    @SuppressWarnings("unused") // through REFS
    private volatile int refs = 1; // the index's reference
    /** False once the entry left the index (evicted, merged away, invalidated, cache closed). */
    volatile boolean indexed = true;
    @SuppressWarnings("unused") // through ACCESSED
    private volatile boolean accessed = true;

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

    /** Takes a reference unless the count is already zero. */
    boolean tryAcquire() {
        int r;
        do {
            r = (int) REFS.getVolatile(this);
            if (r == 0) {
                return false;
            }
        } while (!REFS.compareAndSet(this, r, r + 1));
        return true;
    }

    /** Drops a reference; the last one deregisters. */
    void release() {
        int before = (int) REFS.getAndAdd(this, -1);
        if (before == 1) {
            cache.dispose(this);
        } else if (before <= 0) {
            REFS.getAndAdd(this, 1);
            throw new io.regmem.core.RdmaException(io.regmem.core.Errno.EINVAL, this + ": released more often than acquired");
        }
    }

    /** Drops the index's reference only if nobody else holds one (idle eviction); true if it did. */
    boolean tryRetireIdle() {
        return REFS.compareAndSet(this, 1, 0);
    }

    int refs() {
        return (int) REFS.getVolatile(this);
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
