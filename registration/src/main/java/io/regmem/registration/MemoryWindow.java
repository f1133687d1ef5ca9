package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;

/**
 * A memory window ({@code ibv_alloc_mw}, type 2 semantics): a remote-only key for a sub-range of
 * a memory region, with its own rights, that can be bound, rebound and unbound without touching the
 * region. The region must grant {@link Access#MW_BIND}; while a window is bound to it the region
 * cannot be deregistered ({@link Errno#EBUSY}, as {@code ibv_dereg_mr} refuses). Each bind gives the
 * window a new key; unbinding or closing retires it at once.
 */
public final class MemoryWindow extends RdmaResource implements AutoCloseable {
    private final ProtectionDomain pd;
    private MemoryRegion parent;
    private MemoryRegion view;

    MemoryWindow(ProtectionDomain pd) {
        super(pd.device, "MemoryWindow", pd.owner(), true);
        this.pd = pd;
    }

    /**
     * Binds the window to {@code [address, address + length)} of {@code mr} with remote rights.
     * A bound window is rebound (its old key retired first). A bind of length 0 invalidates the window
     * (as a zero-length bind of a type-1 window does in verbs): the old key is retired, the window is
     * unbound, {@code mr}, {@code address} and {@code rights} are not looked at, and 0 is returned.
     *
     * @param rights REMOTE_READ, REMOTE_WRITE and/or REMOTE_ATOMIC; remote write or atomic needs
     *               the region to grant LOCAL_WRITE
     * @return the window's new rkey
     * @throws RdmaException {@link Errno#EINVAL} for a region of another PD, without MW_BIND, a range
     *                       outside it, or rights that are not remote or not allowed
     */
    public int bind(MemoryRegion mr, long address, long length, Access... rights) {
        synchronized (device.lock) {
            checkAlive("bind");
            if (length == 0) {
                unbindLocked(); // when this returns, no copy through the old key is in progress
                return 0;
            }
            if (mr == null) {
                throw new RdmaException(Errno.EINVAL, this + ": bind of " + length + " bytes needs a region (null)");
            }
            mr.checkAlive("bind");
            int mask = Access.mask(rights);
            int remoteBits = Access.mask(Access.REMOTE_READ, Access.REMOTE_WRITE, Access.REMOTE_ATOMIC);
            if (mr.pd() != pd || mr.isFastReg() || !Access.has(mr.access(), Access.MW_BIND)) {
                throw new RdmaException(Errno.EINVAL, this + ": bind needs a registered region of " + pd
                        + " that grants MW_BIND (" + mr + " grants " + Access.describe(mr.access()) + ")");
            }
            if (mask == 0 || (mask & ~remoteBits) != 0) {
                throw new RdmaException(Errno.EINVAL, this + ": a window grants remote rights only, not "
                        + Access.describe(mask));
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

    /** The current rkey, or 0 when unbound. */
    public int rkey() {
        synchronized (device.lock) {
            return view == null ? 0 : view.rkey();
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
            if (view == null) {
                throw new RdmaException(Errno.EINVAL, this + ": exportRemoteKey of an unbound window");
            }
            return view.exportRemoteKey();
        }
    }

    /** True while bound. */
    public boolean isBound() {
        synchronized (device.lock) {
            return view != null;
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
            unbindLocked();
            markDestroyed();
            pd.release();
        }
    }
}
