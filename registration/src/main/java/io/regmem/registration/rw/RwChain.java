package io.regmem.registration.rw;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.core.ScatterList;
import io.regmem.registration.Access;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.MrPool;
import io.regmem.registration.Opcode;
import io.regmem.registration.QueuePair;
import io.regmem.registration.WorkRequest;
import java.util.Arrays;

/**
 * The work requests and borrowed MRs of one {@link RwContext}: how each path fills them, how the
 * chain is linked (with the MRs' keys advanced), and how the MRs go back. {@link RwContext} checks
 * the arguments and keeps the lifecycle; this class assumes them checked. Its arrays grow to the
 * largest transfer seen and are reused.
 */
final class RwChain {
    /** REG_MR rights: the sink of a READ is written locally; on iWARP the wire writes it too. */
    static final int LOCAL_WRITE = Access.mask(Access.LOCAL_WRITE);
    static final int LOCAL_AND_REMOTE_WRITE = Access.mask(Access.LOCAL_WRITE, Access.REMOTE_WRITE);

    RwContext.Variant variant;
    private WorkRequest[] wrs = new WorkRequest[0];
    int nrWrs;
    private MrPool pool;
    private int[] mrSlots = new int[0];
    private int[] regWr = new int[0];
    private int[] opWr = new int[0];
    private int[] savedKeys = new int[0];
    private boolean[] savedInval = new boolean[0];
    int nrMrs;
    Opcode op;
    private int regAccess;
    private long sigWireBytes;

    int initSingle(QueuePair qp, ScatterList sg, int first, long off, long remoteAddr, int rkey) {
        WorkRequest wr = wr(0, 1);
        wr.opcode(op).remote(remoteAddr, rkey).addSge(sg.address(first) + off, sg.length(first) - off,
                qp.pd().localDmaLkey());
        nrWrs = 1;
        nrMrs = 0;
        variant = RwContext.Variant.SINGLE;
        return 1;
    }

    int initMultiSge(QueuePair qp, ScatterList sg, int first, int m, long off, long remoteAddr, int rkey,
                             boolean read) {
        int maxSge = read ? qp.maxReadSge() : qp.maxSendSge();
        int ops = (m + maxSge - 1) / maxSge;
        int lkey = qp.pd().localDmaLkey();
        long remote = remoteAddr;
        int e = first;
        for (int i = 0; i < ops; i++) {
            int n = Math.min(m - i * maxSge, maxSge);
            WorkRequest wr = wr(i, maxSge);
            wr.opcode(op).remote(remote, rkey);
            remote += wr.addSges(sg, e, n, e == first ? off : 0, lkey);
            e += n;
        }
        nrWrs = ops;
        nrMrs = 0;
        variant = RwContext.Variant.MULTI_SGE;
        return ops;
    }

    /** The MR path; returns the WR count, or -1 (EAGAIN) with nothing held when the pool ran dry. */
    int initMrs(QueuePair qp, ScatterList sg, int first, int m, long off, long remoteAddr, int rkey,
                        boolean read, boolean iWarp) {
        MrPool mrs = qp.rdmaMrs();
        int pages = mrs.maxNumSg();
        int ops = pages == 0 ? 1 : (m + pages - 1) / pages;
        ensureMrs(ops);
        pool = mrs;
        Opcode mrOp = read && iWarp ? Opcode.RDMA_READ_WITH_INV : op;
        regAccess = iWarp ? LOCAL_AND_REMOTE_WRITE : LOCAL_WRITE;
        long pageSize = qp.device().attributes().pageSize();
        long remote = remoteAddr;
        int w = 0;
        int e = first;
        nrMrs = 0;
        for (int i = 0; i < ops; i++) {
            int slot = mrs.get();
            if (slot < 0) {
                releaseMrs();
                return -1;
            }
            mrSlots[nrMrs++] = slot;
            int n = Math.min(m - i * pages, pages);
            MemoryRegion mr = mrs.mr(slot);
            long shift = i == 0 ? off : 0;
            int mapped = mr.mapSg(sg, e, n, shift, pageSize);
            if (mapped < n) {
                releaseMrs();
                throw new RdmaException(Errno.EINVAL, "RwContext: " + mr + " mapped " + mapped + " of entries [" + e
                        + ", " + (e + n) + "): entry " + (e + mapped) + " is unaligned inside the transfer or spans "
                        + "more pages than the MR's " + pages + " (one page per entry at most)");
            }
            if (mrs.needInval(slot)) {
                wr(w++, 1).opcode(Opcode.LOCAL_INV).invalidateRkey(mrs.key(slot));
            }
            regWr[i] = w;
            wr(w++, 1).regMr(mr, mrs.key(slot), regAccess);
            opWr[i] = w;
            WorkRequest o = wr(w++, 1).opcode(mrOp).remote(remote, rkey).addSge(mr.address(), mr.length(), mrs.key(slot));
            if (mrOp == Opcode.RDMA_READ_WITH_INV) {
                o.invalidateRkey(mrs.key(slot));
            }
            remote += mr.length();
            e += n;
        }
        nrWrs = w;
        op = mrOp;
        variant = RwContext.Variant.MR;
        return w;
    }

    void releaseMrs() {
        for (int i = 0; i < nrMrs; i++) {
            pool.put(mrSlots[i]);
        }
        nrMrs = 0;
    }

    /** The signature path: one integrity MR (already taken from {@code sig} and mapped). */
    int initSignature(MrPool sig, int slot, long wireBytes, long remoteAddr, int rkey, boolean read, boolean iWarp) {
        MemoryRegion mr = sig.mr(slot);
        ensureMrs(1);
        pool = sig;
        nrMrs = 1;
        mrSlots[0] = slot;
        sigWireBytes = wireBytes;
        op = read ? Opcode.RDMA_READ : Opcode.RDMA_WRITE;
        regAccess = iWarp ? LOCAL_AND_REMOTE_WRITE : LOCAL_WRITE;
        int w = 0;
        if (sig.needInval(slot)) {
            wr(w++, 1).opcode(Opcode.LOCAL_INV).invalidateRkey(sig.key(slot));
        }
        regWr[0] = w;
        wr(w++, 1).regMrIntegrity(mr, sig.key(slot), regAccess);
        opWr[0] = w;
        wr(w++, 1).opcode(op).remote(remoteAddr, rkey).addSge(mr.address(), sigWireBytes, sig.key(slot));
        nrWrs = w;
        variant = RwContext.Variant.SIGNATURE;
        return w;
    }

    /** After a failed post (nothing was posted): the MRs keep the keys they had. */
    void restoreKeys() {
        for (int i = 0; i < nrMrs; i++) {
            pool.key(mrSlots[i], savedKeys[i]);
            pool.needInval(mrSlots[i], savedInval[i]);
        }
    }

    /** Gives the MRs back and unlinks the WRs (letting go of the caller's chain WR). */
    void release() {
        releaseMrs();
        for (int i = 0; i < nrWrs; i++) {
            wrs[i].next(null);
        }
        nrWrs = 0;
        pool = null;
    }

    WorkRequest wrAt(int i) {
        return wrs[i];
    }

    MrPool pool() {
        return pool;
    }

    int mrSlot(int i) {
        return mrSlots[i];
    }

    /** Links the chain and advances each MR's key (remembering the old ones for {@link #restoreKeys}). */
    WorkRequest link(long wrId, WorkRequest chainWr) {
        for (int i = 0; i < nrMrs; i++) {
            int slot = mrSlots[i];
            savedKeys[i] = pool.key(slot);
            savedInval[i] = pool.needInval(slot);
            int key = MemoryRegion.incRkey(savedKeys[i]);
            pool.key(slot, key);
            pool.needInval(slot, op != Opcode.RDMA_READ_WITH_INV);
            MemoryRegion mr = pool.mr(slot);
            boolean sig = variant == RwContext.Variant.SIGNATURE;
            if (sig) {
                wrs[regWr[i]].regMrIntegrity(mr, key, regAccess);
            } else {
                wrs[regWr[i]].regMr(mr, key, regAccess);
            }
            WorkRequest o = wrs[opWr[i]];
            o.clearSges().addSge(mr.address(), sig ? sigWireBytes : mr.length(), key);
            if (op == Opcode.RDMA_READ_WITH_INV) {
                o.invalidateRkey(key);
            }
        }
        for (int i = 0; i < nrWrs; i++) {
            WorkRequest wr = wrs[i];
            boolean last = i == nrWrs - 1;
            wr.wrId(wrId).signaled(last && chainWr == null).next(last ? chainWr : wrs[i + 1]);
        }
        return wrs[0];
    }

    private WorkRequest wr(int i, int sges) {
        if (i >= wrs.length) {
            wrs = Arrays.copyOf(wrs, Math.max(4, Math.max(i + 1, 2 * wrs.length)));
        }
        WorkRequest wr = wrs[i];
        if (wr == null || wr.maxSge() < sges) {
            wr = new WorkRequest(sges);
            wrs[i] = wr;
        }
        return wr.reset();
    }

    private void ensureMrs(int n) {
        if (mrSlots.length < n) {
            int cap = Math.max(n, 2 * mrSlots.length);
            mrSlots = new int[cap];
            regWr = new int[cap];
            opWr = new int[cap];
            savedKeys = new int[cap];
            savedInval = new boolean[cap];
        }
    }
}
