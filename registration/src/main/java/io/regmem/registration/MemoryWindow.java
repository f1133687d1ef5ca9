package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.spi.MwContext;

/**
 * A memory window ({@code ibv_alloc_mw}): a remote-only key for a sub-range of a memory region, with
 * its own rights, that can be bound, rebound and invalidated without touching the region. The region
 * must grant {@link Access#MW_BIND}; while a window is bound to it the region cannot be deregistered
 * ({@link Errno#EBUSY}, as {@code ibv_dereg_mr} refuses).
 *
 * <p>Two types, as in verbs ({@link Type}). A type-1 window ({@link ProtectionDomain#allocMw()}) is
 * bound by a call ({@link #bind}, {@code ibv_bind_mw}); each bind gives it a new key; a zero-length
 * bind, {@link #unbind()} or closing retires it at once. A type-2 window
 * ({@link ProtectionDomain#allocMw(Type)}) is bound by a BIND_MW work request
 * ({@link WorkRequest#bindMw}) under a key the caller picks from the window's own
 * ({@link MemoryRegion#incRkey(int)} of {@link #rkey()}, as {@code ibv_inc_rkey}), executed in order
 * with the QP's other requests; it is invalidated by a LOCAL_INV of its key or by a peer's
 * SEND_WITH_INV of it (the receive completes with {@link WorkCompletion#withInvalidate()}), after which it
 * may be bound again.
 */
public final class MemoryWindow extends RdmaResource implements AutoCloseable {
    /** A window's type ({@code IBV_MW_TYPE_1}, {@code IBV_MW_TYPE_2}). */
    public enum Type {
        /** Bound by a call, {@link MemoryWindow#bind}; invalidated by a zero-length bind or {@link MemoryWindow#unbind()}. */
        TYPE_1,
        /** Bound by a BIND_MW work request; invalidated by LOCAL_INV or a peer's SEND_WITH_INV of its key. */
        TYPE_2
    }

    /** The rights a window can grant. */
    static final int REMOTE_BITS = Access.mask(Access.REMOTE_READ, Access.REMOTE_WRITE, Access.REMOTE_ATOMIC);
    /** What a BIND_MW of a type-2 window accepts: the remote rights, LOCAL_WRITE (ignored) and ZERO_BASED. */
    static final int BIND_TWO_BITS = REMOTE_BITS | Access.mask(Access.LOCAL_WRITE, Access.ZERO_BASED);

    private final ProtectionDomain pd;
    private final Type type;
    private MemoryRegion parent;
    /** Type 1: the current binding's view (null when unbound). Type 2: the window's one view, for its life. */
    private MemoryRegion view;
    /** Type 2: destroyed, so that a BIND_MW racing the close fails (under this object's monitor). */
    private boolean closing;
    /** What work requests name the window by. */
    private final Context context = new Context();

    MemoryWindow(ProtectionDomain pd, Type type) {
        super(pd.device, "MemoryWindow", pd.owner(), true);
        this.pd = pd;
        this.type = type;
        if (type == Type.TYPE_2) {
            view = MemoryRegion.windowView(pd, this);
        }
    }

    /** The window's type. */
    public Type windowType() {
        return type;
    }

    /** The window as a work request names it. */
    Context context() {
        return context;
    }

    /** The window behind a work request's context. */
    static MemoryWindow of(MwContext c) {
        return ((Context) c).window();
    }

    private final class Context implements MwContext {
        MemoryWindow window() {
            return MemoryWindow.this;
        }
    }

    /**
     * A BIND_MW of this type-2 window, at its turn in a QP of {@code qpPd} (an executor's thread, in a
     * grace-period section): binds it, or returns MW_BIND_ERR changing nothing.
     */
    WcStatus bindByRequest(ProtectionDomain qpPd, MemoryRegion mr, long address, long length, int rights, int newKey) {
        int mask = rights & ~Access.LOCAL_WRITE.bit(); // accepted, as rxe and mlx5 do; a window grants no local access
        synchronized (this) {
            if (type != Type.TYPE_2 || closing || isDestroyed() || view.isValid() || pd != qpPd
                    || (newKey >>> 8) != (view.rkey() >>> 8)) {
                return WcStatus.MW_BIND_ERR; // bound already, gone, another PD's, or not this window's key
            }
            if (mr == null || mr.pd() != pd || mr.isFastReg() || mr.isWindow() || !Access.has(mr.access(), Access.MW_BIND)
                    || mr.segment() == null) {
                return WcStatus.MW_BIND_ERR;
            }
            if ((Access.has(mask, Access.REMOTE_WRITE) || Access.has(mask, Access.REMOTE_ATOMIC))
                    && !Access.has(mr.access(), Access.LOCAL_WRITE)) {
                return WcStatus.MW_BIND_ERR;
            }
            long off = address - mr.address();
            if (length <= 0 || off < 0 || off > mr.length() - length) {
                return WcStatus.MW_BIND_ERR;
            }
            if (!mr.windowBoundIfAlive()) {
                return WcStatus.MW_BIND_ERR; // deregistered meanwhile
            }
            parent = mr;
            view.rebindView(mr.segment().asSlice(off, length), mask, newKey);
            return WcStatus.SUCCESS;
        }
    }

    /** True if {@code mr} is this type-2 window's view and it is bound: a LOCAL_INV or SEND_WITH_INV may invalidate it. */
    boolean invalidatable(MemoryRegion mr) {
        return type == Type.TYPE_2 && mr == view && mr.isValid();
    }

    /**
     * A LOCAL_INV or a peer's SEND_WITH_INV of this type-2 window's key (an executor's thread): the
     * key stops resolving; the caller then waits out the grace period, so no access through it is in
     * progress afterwards. The key (and its index) stay: a later BIND_MW moves the key byte on.
     */
    synchronized void invalidateByRequest() {
        if (view.isValid()) {
            view.invalidate();
            MemoryRegion p = parent;
            parent = null;
            if (p != null) {
                p.windowBound(-1);
            }
        }
    }

    /**
     * Binds the window to {@code [address, address + length)} of {@code mr} with remote rights.
     * A bound window is rebound (its old key retired first). A bind of length 0 invalidates the window
     * (as a zero-length bind of a type-1 window does in verbs): the old key is retired, the window is
     * unbound, {@code mr}, {@code address} and {@code rights} are not looked at, and 0 is returned.
     *
     * @param rights REMOTE_READ, REMOTE_WRITE and/or REMOTE_ATOMIC (none: the window grants nothing);
     *               remote write or atomic needs the region to grant LOCAL_WRITE. LOCAL_WRITE among them
     *               is accepted and ignored, as rxe and mlx5 do (a window grants no local access);
     *               ZERO_BASED is refused, as {@code ibv_bind_mw} refuses it (a type-2 window's BIND_MW
     *               takes it)
     * @return the window's new rkey
     * @throws RdmaException {@link Errno#EINVAL} for a region of another PD, without MW_BIND, a range
     *                       outside it, or rights that are not remote or not allowed
     */
    public int bind(MemoryRegion mr, long address, long length, Access... rights) {
        synchronized (device.lock) {
            checkAlive("bind");
            if (type == Type.TYPE_2) {
                throw new RdmaException(Errno.EINVAL, this + ": a type-2 window is bound by a BIND_MW work request "
                        + "(WorkRequest.bindMw), not by bind()");
            }
            if (length == 0) {
                unbindLocked(); // when this returns, no copy through the old key is in progress
                return 0;
            }
            if (mr == null) {
                throw new RdmaException(Errno.EINVAL, this + ": bind of " + length + " bytes needs a region (null)");
            }
            mr.checkAlive("bind");
            int given = Access.mask(rights);
            int mask = given & REMOTE_BITS; // LOCAL_WRITE is accepted, as rxe and mlx5 do, and grants nothing
            if (mr.pd() != pd || mr.isFastReg() || !Access.has(mr.access(), Access.MW_BIND)) {
                throw new RdmaException(Errno.EINVAL, this + ": bind needs a registered region of " + pd
                        + " that grants MW_BIND (" + mr + " grants " + Access.describe(mr.access()) + ")");
            }
            if ((given & ~(REMOTE_BITS | Access.LOCAL_WRITE.bit())) != 0) {
                throw new RdmaException(Errno.EINVAL, this + ": a type-1 window grants remote rights only (LOCAL_WRITE "
                        + "is accepted and ignored; ZERO_BASED is for type-2 windows, as ibv_bind_mw), not "
                        + Access.describe(given));
            }
            if ((Access.has(mask, Access.REMOTE_WRITE) || Access.has(mask, Access.REMOTE_ATOMIC))
                    && !Access.has(mr.access(), Access.LOCAL_WRITE)) {
                throw new RdmaException(Errno.EINVAL, this + ": remote write through a window needs LOCAL_WRITE on " + mr);
            }
            long off = address - mr.address();
            if (length <= 0 || off < 0 || off > mr.length() - length) {
                throw new RdmaException(Errno.EINVAL, this + ": range 0x" + Long.toHexString(address) + "+" + length
                        + " is not inside " + mr);
            }
            if (view != null) {
                unbindLocked(); // the old key's copies end before the new binding exists
            }
            view = MemoryRegion.window(pd, mr.segment().asSlice(off, length), mask);
            parent = mr;
            mr.windowBound(1);
            return view.rkey();
        }
    }

    /**
     * Retires the window's key; the region may be deregistered again. When this returns, no copy
     * through the window is in progress and none will start. No-op when unbound.
     */
    public void unbind() {
        synchronized (device.lock) {
            checkAlive("unbind");
            if (type == Type.TYPE_2) {
                throw new RdmaException(Errno.EINVAL, this + ": a type-2 window is invalidated by a LOCAL_INV work request "
                        + "of its key (or a peer's SEND_WITH_INV), not by unbind()");
            }
            unbindLocked();
        }
    }

    /** Retires the view's key; its deregistration waits until no copy through it is in progress. */
    private void unbindLocked() {
        if (view != null) {
            view.retireWindow();
            parent.windowBound(-1);
            view = null;
            parent = null;
        }
    }

    /**
     * The current rkey. Type 1: 0 when unbound. Type 2: the key of the last bind (the window's first
     * key before any), bound or not, as verbs' {@code mw->rkey}: a BIND_MW takes
     * {@link MemoryRegion#incRkey(int)} of it.
     */
    public int rkey() {
        synchronized (device.lock) {
            return view == null || isDestroyed() ? 0 : view.rkey();
        }
    }

    /**
     * The current remote key in its exported form ({@link MemoryRegion#exportRemoteKey()}), for a
     * peer to import on its QP.
     *
     * @throws RdmaException {@link Errno#EINVAL} when unbound
     */
    public byte[] exportRemoteKey() {
        synchronized (device.lock) {
            checkAlive("exportRemoteKey");
            if (view == null || !view.isValid()) {
                throw new RdmaException(Errno.EINVAL, this + ": exportRemoteKey of an unbound window");
            }
            return view.exportRemoteKey();
        }
    }

    /** True while bound. */
    public boolean isBound() {
        synchronized (device.lock) {
            return view != null && (type == Type.TYPE_1 || view.isValid());
        }
    }

    /**
     * Unbinds and deallocates the window ({@code ibv_dealloc_mw}); when this returns, no copy through
     * the window is in progress and none will start.
     */
    @Override
    public void close() {
        synchronized (device.lock) {
            checkAlive("close");
            if (type == Type.TYPE_2) {
                synchronized (this) {
                    closing = true; // a BIND_MW from now on fails
                    invalidateByRequest();
                }
                // The view stays referenced: an executor that found it before the close may still
                // invalidate it (a no-op on a retired view), or bind it (refused: closing).
                view.retireWindow(); // when this returns, no access through its key is in progress
            } else {
                unbindLocked();
            }
            markDestroyed();
            pd.release();
        }
    }
}
