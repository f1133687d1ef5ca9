package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;

/**
 * A queue pair's pool of fast-reg memory regions for RDMA read/write contexts ({@code qp->rdma_mrs}
 * and {@code qp->sig_mrs}, {@code ib_mr_pool_get/put}). The QP creates it from
 * {@link QpInitAttributes#maxRdmaCtxs(int)} and destroys it with itself; contexts borrow MRs by
 * slot number and give them back on destroy.
 *
 * <p>Beside each MR the pool keeps what the rw code must remember across contexts (the kernel keeps
 * it in {@code struct ib_mr}): the key the MR was last registered with and whether that registration
 * still needs a LOCAL_INV before the next one.
 *
 * <p>Thread-safe (one short lock, as the kernel's {@code qp->mr_lock}); allocation-free after creation.
 */
public final class MrPool {
    private final QueuePair qp;
    private final MemoryRegion[] mrs;
    private final int[] keys;
    private final boolean[] needInval;
    /** Free slots, a stack. */
    private final int[] free;
    private int freeCount;

    MrPool(QueuePair qp, ProtectionDomain pd, int count, int maxNumSg, boolean integrity) {
        this.qp = qp;
        this.mrs = new MemoryRegion[count];
        this.keys = new int[count];
        this.needInval = new boolean[count];
        this.free = new int[count];
        try {
            for (int i = 0; i < count; i++) {
                mrs[i] = integrity ? pd.allocMrIntegrity(maxNumSg, maxNumSg) : pd.allocMr(maxNumSg);
                keys[i] = mrs[i].lkey();
            }
        } catch (RuntimeException e) {
            for (MemoryRegion mr : mrs) {
                if (mr != null) {
                    mr.close();
                }
            }
            throw e;
        }
        for (int i = 0; i < count; i++) {
            free[i] = count - 1 - i; // slot 0 on top
        }
        freeCount = count;
    }

    /** Takes a free MR's slot, or -1 when every MR is held ({@code ib_mr_pool_get} returning NULL). */
    public synchronized int get() {
        return freeCount == 0 ? -1 : free[--freeCount];
    }

    /**
     * Gives a slot back ({@code ib_mr_pool_put}).
     *
     * @throws RdmaException {@link Errno#EINVAL} for a slot out of range or not held
     */
    public synchronized void put(int slot) {
        checkSlot(slot);
        for (int i = 0; i < freeCount; i++) {
            if (free[i] == slot) {
                throw new RdmaException(Errno.EINVAL, this + ": slot " + slot + " is not held (given back twice?)");
            }
        }
        free[freeCount++] = slot;
    }

    /** The MR in a slot. */
    public MemoryRegion mr(int slot) {
        return mrs[checkSlot(slot)];
    }

    /** The key the slot's MR was last registered with (or created with). */
    public int key(int slot) {
        return keys[checkSlot(slot)];
    }

    /** Records the key of the slot's next registration. */
    public void key(int slot, int key) {
        keys[checkSlot(slot)] = key;
    }

    /** Whether the slot's MR must be invalidated (LOCAL_INV) before it is registered again. */
    public boolean needInval(int slot) {
        return needInval[checkSlot(slot)];
    }

    /** Records whether the slot's MR needs invalidating before its next registration. */
    public void needInval(int slot, boolean need) {
        needInval[checkSlot(slot)] = need;
    }

    /** MRs in the pool. */
    public int size() {
        return mrs.length;
    }

    /** MRs held by contexts now ({@code qp->mrs_used}). */
    public synchronized int used() {
        return mrs.length - freeCount;
    }

    /** Pages each MR maps. */
    public int maxNumSg() {
        return mrs.length == 0 ? 0 : mrs[0].maxNumSg();
    }

    /** The queue pair that owns the pool. */
    public QueuePair qp() {
        return qp;
    }

    private int checkSlot(int slot) {
        if (slot < 0 || slot >= mrs.length) {
            throw new RdmaException(Errno.EINVAL, this + ": slot " + slot + " is not in [0, " + mrs.length + ")");
        }
        return slot;
    }

    /** Deregisters every MR (QP destroy), whether or not contexts still hold them. */
    void destroy() {
        for (MemoryRegion mr : mrs) {
            if (!mr.isDestroyed()) {
                mr.close();
            }
        }
        freeCount = mrs.length;
    }

    @Override
    public String toString() {
        return "MrPool[" + mrs.length + " MRs of " + qp + "]";
    }
}
