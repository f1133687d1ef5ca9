package io.regmem.registration.cache;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.MemoryRegion;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * One acquisition of a cached registration: what {@link RegistrationCache#get} returns. It gives
 * the region's keys and range, and {@link #close()} gives the acquisition back, once: a second
 * close of the same acquisition is refused ({@link Errno#EINVAL}) and changes nothing, so one
 * holder's double release can never deregister memory under another holder.
 *
 * <p>Handles are pooled per region (eight of them, made with the region and handed out in
 * rotation; see {@link CacheEntry}), so a hit allocates nothing. A handle given back is handed out
 * again only once the rotation has come round to it (after the region's other free handles: at
 * least one other acquisition comes between whenever two or more are free): until then a stale
 * {@code close()} of the old acquisition is refused. Keep each handle until its one close, and do
 * not close a handle that another part of the program may have got again meanwhile. A region held
 * by more than eight users at once gives the ninth a handle of its own, never reused.
 */
public final class CachedRegion implements AutoCloseable {
    private static final VarHandle STATE;

    static {
        try {
            STATE = MethodHandles.lookup().findVarHandle(CachedRegion.class, "released", boolean.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    final CacheEntry entry;
    /** The lease this handle stands for, or {@link CacheEntry#NO_LEASE} for a handle of its own. */
    private final int lease;
    /** The entry's keys and range, copied here so that the holder's reads touch this object only. */
    private final int lkey;
    private final int rkey;
    private final long start;
    private final long end;
    private final int access;
    /** A handle of its own only: given back already. Through {@link #STATE}. */
    @SuppressWarnings("unused")
    private volatile boolean released;

    CachedRegion(CacheEntry entry, int lease) {
        this.entry = entry;
        this.lease = lease;
        this.lkey = entry.lkey;
        this.rkey = entry.rkey;
        this.start = entry.start;
        this.end = entry.end;
        this.access = entry.access;
    }

    /** The registered region (its keys, address and length). */
    public MemoryRegion region() {
        return entry.region;
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

    /** True while an acquisition through this handle is held (given out and not given back). */
    public boolean isHeld() {
        return lease >= 0 ? entry.leaseHeld(lease) : !(boolean) STATE.getVolatile(this);
    }

    /**
     * Gives this acquisition back to the cache ({@link RegistrationCache#put}): the region stays
     * cached; it is deregistered once it has left the cache and its last holder gave it back.
     * One compare-and-set on the region's reference word.
     *
     * @throws RdmaException {@link Errno#EINVAL} if this acquisition was given back already (nothing changes)
     */
    @Override
    public void close() {
        boolean wasHeld = lease >= 0 ? entry.releaseLease(lease) : STATE.compareAndSet(this, false, true);
        if (!wasHeld) {
            throw new RdmaException(Errno.EINVAL, this + ": released twice (each get is given back once)");
        }
        if (lease < 0) {
            entry.release();
        }
    }

    @Override
    public String toString() {
        return "CachedRegion[0x" + Long.toHexString(start) + "+" + (end - start) + (isHeld() ? "" : ", released")
                + ", " + entry.region + "]";
    }
}
