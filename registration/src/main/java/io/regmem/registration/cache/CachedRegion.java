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
 * <p>Handles are pooled per region (eight of them, handed out in rotation; see
 * {@link CacheEntry}), so a hit allocates nothing. A handle given back is handed out again only
 * once the rotation has come round to it (after the region's free others, and at least one other
 * acquisition, whenever two or more handles are free): a stale {@code close()} of an old
 * acquisition is refused until then; {@link #close(int)} with the {@link #generation()} read at
 * acquisition is refused in every case. A region held by more than eight users at once gives the
 * ninth a handle of its own.
 */
public final class CachedRegion implements AutoCloseable {
    private static final VarHandle STATE;

    static {
        try {
            STATE = MethodHandles.lookup().findVarHandle(CachedRegion.class, "state", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    final CacheEntry entry;
    private final int lease;
    /** The generation (hand-outs so far) shifted left once, plus 1 while held. Through {@link #STATE}. */
    @SuppressWarnings("unused")
    private volatile int state;

    CachedRegion(CacheEntry entry, int lease) {
        this.entry = entry;
        this.lease = lease;
    }

    /** Marks the handle held by a new acquisition: the next generation. Only the lease holder calls it. */
    void handOut() {
        int s = (int) STATE.getVolatile(this);
        STATE.setRelease(this, (((s >>> 1) + 1) << 1) | 1);
    }

    /** The registered region (its keys, address and length). */
    public MemoryRegion region() {
        return entry.region;
    }

    /** The key for local SGEs. */
    public int lkey() {
        return entry.lkey;
    }

    /** The key a peer uses. */
    public int rkey() {
        return entry.rkey;
    }

    /** The first registered address (may be below what was asked, when regions merged). */
    public long address() {
        return entry.start;
    }

    /** Registered bytes. */
    public long length() {
        return entry.end - entry.start;
    }

    /** The granted rights ({@link io.regmem.registration.Access} bits). */
    public int access() {
        return entry.access;
    }

    /**
     * This acquisition's number for this handle: it changes every time the handle is handed out,
     * so a holder that kept it can release exactly its own acquisition with {@link #close(int)}.
     */
    public int generation() {
        return (int) STATE.getVolatile(this) >>> 1;
    }

    /** True while the acquisition this handle was last handed out for is held. */
    public boolean isHeld() {
        return ((int) STATE.getVolatile(this) & 1) != 0;
    }

    /**
     * Gives this acquisition back to the cache ({@link RegistrationCache#put}): the region stays
     * cached; it is deregistered once it has left the cache and its last holder gave it back.
     *
     * @throws RdmaException {@link Errno#EINVAL} if this acquisition was given back already (nothing changes)
     */
    @Override
    public void close() {
        int s;
        do {
            s = (int) STATE.getVolatile(this);
            if ((s & 1) == 0) {
                throw new RdmaException(Errno.EINVAL, this + ": released twice (each get is given back once)");
            }
        } while (!STATE.compareAndSet(this, s, s & ~1));
        entry.release(lease);
    }

    /**
     * Gives back the acquisition of the given {@link #generation()}: refused if this handle was
     * released since, even if it has been handed out again to another user meanwhile.
     *
     * @throws RdmaException {@link Errno#EINVAL} if that acquisition was given back already (nothing changes)
     */
    public void close(int generation) {
        int s;
        do {
            s = (int) STATE.getVolatile(this);
            if ((s & 1) == 0 || (s >>> 1) != generation) {
                throw new RdmaException(Errno.EINVAL, this + ": acquisition " + generation + " was released already "
                        + "(this handle is at acquisition " + (s >>> 1) + (((s & 1) != 0) ? ", held" : ", free") + ")");
            }
        } while (!STATE.compareAndSet(this, s, s & ~1));
        entry.release(lease);
    }

    @Override
    public String toString() {
        int s = (int) STATE.getVolatile(this);
        return "CachedRegion[0x" + Long.toHexString(entry.start) + "+" + (entry.end - entry.start) + ", acquisition "
                + (s >>> 1) + ((s & 1) != 0 ? "" : ", released") + ", " + entry.region + "]";
    }
}
