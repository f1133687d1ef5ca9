package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.core.ScatterList;

/**
 * A fast-reg MR's page list: the page addresses {@link MemoryRegion#mapSg} (or an integrity MR's
 * {@code mapSgPi}) put there, and the memory each page resolves to when a REG_MR executes. The walk
 * follows {@code ib_map_mr_sg}'s rules. Used by one thread at a time (the MR's holder), and by the
 * data path under the QP lock of the REG_MR that resolves them.
 */
final class PageList {
    final long[] pages;
    final long[] offsets;
    /** The DMA mapping each page resolved through at the last REG_MR: the page is reachable only while it lives. */
    final DmaMapping[] mappings;
    // What the last map() found (the holder reads them right after).
    long iova;
    long bytes;
    int end;
    long resume;

    PageList(int capacity) {
        this.pages = new long[capacity];
        this.offsets = new long[capacity];
        this.mappings = new DmaMapping[capacity];
    }

    /**
     * The argument rules of {@link MemoryRegion#mapSg(ScatterList, int, int, long, long)}.
     *
     * @throws RdmaException {@link Errno#EINVAL} for a registered region, a count out of range, an
     *                       offset past element {@code first}, or a bad page size
     */
    static void checkMapSg(MemoryRegion mr, boolean fastReg, ScatterList sg, int first, int count, long offset,
                           long pageSz) {
        if (!fastReg) {
            throw new RdmaException(Errno.EINVAL, mr + ": mapSg needs a fast-reg MR (ProtectionDomain.allocMr)");
        }
        if (first < 0 || count <= 0 || first > sg.count() - count || offset < 0 || offset > sg.length(first)
                || Long.bitCount(pageSz) != 1) {
            throw new RdmaException(Errno.EINVAL, mr + ": mapSg(first " + first + ", count " + count + " of "
                    + sg.count() + ", offset " + offset + ", page size " + pageSz
                    + ") breaks n > 0, elements within the list, offset <= length(first), power-of-two pages");
        }
    }

    /**
     * The page-list walk of {@code ib_map_mr_sg}: maps elements into {@code pages[base, limit)} and
     * leaves the iova, the bytes covered, the end of the used pages and the resume offset in
     * {@link #iova}, {@link #bytes}, {@link #end} and {@link #resume}.
     *
     * @return the number of elements mapped completely
     */
    int map(ScatterList sg, int first, int count, long offset, long pageSz, int base, int limit) {
        long pageMask = ~(pageSz - 1);
        long iova = sg.address(first) + offset;
        long mapped = 0;
        long lastEnd = 0;
        long lastPageOff = 0;
        int n = base;
        long sgOffset = offset;
        int i;
        for (i = 0; i < count; i++) {
            long dmaAddr = sg.address(first + i) + sgOffset;
            long dmaLen = sg.length(first + i) - sgOffset;
            long end = dmaAddr + dmaLen;
            long pageAddr = dmaAddr & pageMask;
            boolean merge = false;
            if (i > 0 && (lastPageOff != 0 || pageAddr != dmaAddr)) {
                if (lastEnd != dmaAddr) {
                    break; // a gap stops mapping
                }
                merge = true; // contiguous with the previous element: continue on its last page
            }
            do {
                if (!merge) {
                    if (n == limit) {
                        // Stop at the first byte not covered. (The kernel reports the start of the last
                        // page it mapped, so the next MR maps that page again; this is tighter.)
                        long stop = Math.max(pageAddr, dmaAddr);
                        mapped += stop - dmaAddr;
                        result(iova, mapped, n, stop - sg.address(first + i));
                        return i;
                    }
                    pages[n++] = pageAddr;
                }
                merge = false;
                pageAddr += pageSz;
            } while (Long.compareUnsigned(pageAddr, end) < 0);
            mapped += dmaLen;
            lastEnd = end;
            lastPageOff = end & ~pageMask;
            sgOffset = 0;
        }
        result(iova, mapped, n, 0);
        return i;
    }

    private void result(long iova, long bytes, int end, long resume) {
        this.iova = iova;
        this.bytes = bytes;
        this.end = end;
        this.resume = resume;
    }
}
