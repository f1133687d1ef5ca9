package io.regmem.registration.rw;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.core.ScatterList;
import io.regmem.registration.DmaDirection;
import io.regmem.registration.DmaMapping;
import io.regmem.registration.QueuePair;
import io.regmem.registration.RdmaDevice;

/**
 * The argument checks of {@link RwContext}'s inits, each throwing the {@link RdmaException} its
 * javadoc names, before anything is taken: nothing is held after one fails.
 */
final class RwArgs {
    private RwArgs() {
    }

    /** The arguments every init takes: a live QP, a list, port 1, a direction that is a READ or a WRITE. */
    static void checkArgs(QueuePair qp, int port, Object list, DmaDirection dir, String who) {
        if (qp == null || list == null) {
            throw new RdmaException(Errno.EINVAL, "RwContext." + who + ": the QP and the list are required");
        }
        if (qp.isDestroyed()) {
            throw new RdmaException(Errno.EBADF, "RwContext." + who + ": " + qp + " was destroyed");
        }
        if (port != 1) {
            RdmaRw.checkPort(qp.device(), port, "RwContext." + who); // throws; the message is built only then
        }
        if (dir != DmaDirection.TO_DEVICE && dir != DmaDirection.FROM_DEVICE) {
            throw new RdmaException(Errno.EINVAL, "RwContext." + who + ": direction " + dir
                    + " is neither TO_DEVICE (RDMA WRITE) nor FROM_DEVICE (RDMA READ)");
        }
    }

    /**
     * The transfer of the first {@code sgCount} entries from {@code offset} to {@code remoteAddr}: an
     * offset inside their bytes, at most 2^32 - 1 bytes, a remote range that does not wrap.
     */
    static void checkRange(ScatterList sg, int sgCount, long offset, long remoteAddr) {
        long total = 0;
        for (int i = 0; i < sgCount; i++) {
            total += sg.length(i);
        }
        if (offset < 0 || offset >= total) {
            throw new RdmaException(Errno.EINVAL, "RwContext: offset " + offset + " is not in [0, " + total
                    + ") (the bytes of the first " + sgCount + " entries)");
        }
        long bytes = total - offset;
        if (bytes > RdmaRw.U32_MAX) {
            throw new RdmaException(Errno.EINVAL, "RwContext: " + bytes + " bytes exceed 2^32 - 1, the most one context moves");
        }
        if (Long.compareUnsigned(remoteAddr + bytes, remoteAddr) < 0 && remoteAddr + bytes != 0) {
            throw new RdmaException(Errno.EINVAL, "RwContext: remote range 0x" + Long.toHexString(remoteAddr) + " + "
                    + bytes + " wraps the address space");
        }
    }

    /** Every one of the first {@code n} entries lies in a DMA mapping of {@code device} ({@code EIO} otherwise). */
    static void checkMapped(RdmaDevice device, ScatterList sg, int n) {
        long lo = 0; // the mapping the previous entry was found in (its liveness checked then): [lo, hi)
        long hi = 0;
        for (int i = 0; i < n; i++) {
            long a = sg.address(i);
            long len = sg.length(i);
            if (a >= lo && len <= hi - a) {
                continue;
            }
            DmaMapping m = device.dmaMappingOf(a, len);
            if (m != null) {
                lo = m.address();
                hi = lo + m.length();
            } else {
                throw new RdmaException(Errno.EIO, "RwContext: entry " + i + " [0x" + Long.toHexString(sg.address(i))
                        + ", +" + sg.length(i) + ") is not DMA-mapped on " + device.name() + " (RdmaDevice.dmaMap)");
            }
        }
    }
}
