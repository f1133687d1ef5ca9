package io.regmem.registration;

import io.regmem.registration.spi.MemoryAccess;
import io.regmem.registration.spi.MrContext;
import io.regmem.registration.spi.PostedWr;
import io.regmem.registration.spi.Segments;
import java.lang.foreign.MemorySegment;

/**
 * The verbs layer's memory translation for software data paths ({@link MemoryAccess}) of one QP:
 * keys to regions, regions and fast-reg pages to segments, with the checks a NIC makes. No state
 * beyond the QP it serves.
 */
final class Translation implements MemoryAccess {
    private final QueuePair qp;

    Translation(QueuePair qp) {
        this.qp = qp;
    }

    @Override
    public boolean gatherLocal(PostedWr w, Segments out, boolean write) {
        out.clear();
        MemorySegment inline = w.inlineData();
        if (inline != null) { // copied at post time into the queue's own slot: no key to check
            if (write) {
                return false; // (a request that writes locally is never inline)
            }
            if (w.sgeLength(0) > 0) {
                out.add(inline, 0, w.sgeLength(0));
            }
            return true;
        }
        RdmaDevice device = qp.device;
        int dmaKey = device.keys.dmaKey();
        for (int i = 0; i < w.numSge(); i++) {
            long addr = w.sgeAddress(i);
            long len = w.sgeLength(i);
            if (len == 0) {
                continue; // an empty entry touches no memory: not checked, as a NIC skips it
            }
            int lkey = w.sgeLkey(i);
            if (lkey == dmaKey) {
                DmaMapping m = device.dma.find(addr, len);
                if (m == null) {
                    return false;
                }
                out.add(m.segment(), addr - m.address(), len, null, m.guard);
                continue;
            }
            MemoryRegion mr = device.keys.lookup(lkey, false);
            if (mr == null || mr.isWindow() || mr.pd() != qp.pd() || (write && !Access.has(mr.access(), Access.LOCAL_WRITE))) {
                return false;
            }
            if (mr.integrity != null) {
                if (w.numSge() != 1 || out.offload() == null || !out.offload().gather(mr.integrity, addr, len, write, out)) {
                    return false;
                }
            } else if (!regionPieces(mr, addr, len, out)) {
                return false;
            }
        }
        return true;
    }

    @Override
    public boolean resolveRemote(long addr, long len, int rkey, Access right, Segments out) {
        out.clear();
        if (len == 0) {
            return true; // a zero-length RDMA WRITE or READ: neither key nor address is checked (as the IBA spec says)
        }
        MemoryRegion mr = qp.device.keys.lookup(rkey, true);
        if (mr == null || mr.pd() != qp.pd() || !Access.has(mr.access(), right)) {
            return false;
        }
        long a = Access.has(mr.access(), Access.ZERO_BASED) ? mr.address() + addr : addr;
        return regionPieces(mr, a, len, out);
    }

    /** Adds the pieces of {@code [addr, addr + len)} inside a region; false if outside or unreachable. */
    private static boolean regionPieces(MemoryRegion mr, long addr, long len, Segments out) {
        long off = addr - mr.address();
        if (off < 0 || len < 0 || off > mr.length() - len) {
            return false;
        }
        if (!mr.isFastReg()) {
            MemorySegment seg = mr.segment();
            if (!seg.scope().isAlive()) {
                return false;
            }
            out.add(seg, off, len, mr.context(), null);
            return true;
        }
        return pagePieces(mr, 0, mr.address(), off, len, out);
    }

    /**
     * The pieces of {@code [off, off + len)} of a fast-reg MR's mapping that starts at page
     * {@code firstPage} with address {@code base} (integrity MRs keep data and protection mappings
     * in one page list). False if a page is unresolved, unmapped, dead, or too short.
     */
    static boolean pagePieces(MemoryRegion mr, int firstPage, long base, long off, long len, Segments out) {
        long page = mr.pageSize();
        long inPage = (base & (page - 1)) + off; // offset from the start of the first page
        while (len > 0) {
            int p = firstPage + (int) (inPage / page);
            if (p >= mr.pageCount()) {
                return false;
            }
            long po = inPage % page;
            long n = Math.min(len, page - po);
            DmaMapping m = mr.pageList.mappings[p];
            if (m == null || m.isDestroyed()) {
                return false;
            }
            MemorySegment seg = m.segment();
            long segOff = mr.pageList.offsets[p] + po;
            if (!seg.scope().isAlive() || segOff + n > seg.byteSize()) {
                return false;
            }
            out.add(seg, segOff, n, mr.context(), m.guard);
            inPage += n;
            len -= n;
        }
        return true;
    }

    @Override
    public WcStatus fastRegister(PostedWr w) {
        MemoryRegion mr = MemoryRegion.of(w.regMr());
        if (mr.isDestroyed() || !mr.isFastReg() || mr.pd() != qp.pd() || (w.regKey() >>> 8) != (mr.lkey() >>> 8)) {
            return WcStatus.LOC_PROT_ERR;
        }
        int access = w.regAccess();
        if ((access & ~0xFF) != 0 || ((Access.has(access, Access.REMOTE_WRITE) || Access.has(access, Access.REMOTE_ATOMIC))
                && !Access.has(access, Access.LOCAL_WRITE))) {
            return WcStatus.LOC_PROT_ERR;
        }
        if ((w.opcode() == Opcode.REG_MR_INTEGRITY) != mr.isIntegrity()) {
            return WcStatus.LOC_PROT_ERR; // integrity MRs register with REG_MR_INTEGRITY, others with REG_MR
        }
        DmaTable dma = qp.device.dma;
        for (int i = 0; i < mr.pageCount(); i++) {
            if (dma.find(mr.pageList.pages[i], 1) == null) {
                return WcStatus.LOC_PROT_ERR; // checked for every page before any changes
            }
        }
        for (int i = 0; i < mr.pageCount(); i++) {
            DmaMapping m = dma.find(mr.pageList.pages[i], 1);
            mr.pageList.mappings[i] = m;
            mr.pageList.offsets[i] = mr.pageList.pages[i] - m.address();
        }
        // A page's bytes must lie inside the mapping that holds its first byte, up to the page end
        // or the region's end: checked per access against the segment's bounds.
        mr.key(w.regKey());
        mr.activate(access);
        if (mr.integrity != null) {
            mr.integrity.registered();
        }
        return WcStatus.SUCCESS;
    }

    @Override
    public WcStatus bindWindow(PostedWr w) {
        MemoryWindow mw = MemoryWindow.of(w.bindMw());
        MemoryRegion mr = w.regMr() == null ? null : MemoryRegion.of(w.regMr());
        return mw.bindByRequest(qp.pd(), mr, w.remoteAddress(), w.bindLength(), w.regAccess(), w.regKey());
    }

    /** A fast-reg MR of this QP's PD, or a bound type-2 window of it, that the key names now; else null. */
    @Override
    public MrContext invalidationTarget(int rkey) {
        MemoryRegion mr = qp.device.keys.current(rkey);
        if (mr == null || mr.pd() != qp.pd()) {
            return null;
        }
        if (mr.isWindow()) {
            MemoryWindow owner = mr.windowOwner;
            return owner != null && owner.invalidatable(mr) ? mr.context() : null;
        }
        return mr.isFastReg() ? mr.context() : null;
    }

    @Override
    public void invalidate(MrContext mr) {
        MemoryRegion r = MemoryRegion.of(mr);
        if (r.windowOwner != null) {
            r.windowOwner.invalidateByRequest();
        } else {
            r.invalidate();
        }
    }
}
