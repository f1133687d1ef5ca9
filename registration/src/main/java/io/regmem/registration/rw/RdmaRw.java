package io.regmem.registration.rw;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.DeviceAttributes;
import io.regmem.registration.DmaDirection;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.internal.RwSizing;

/**
 * The sizing rules of the kernel's rw API ({@code rdma_rw_mr_factor}, {@code rdma_rw_max_send_wr})
 * and the decisions {@link RwContext} makes with them. Stateless.
 *
 * <p>A device "can use MRs" for rw when it is iWARP (a READ sink must be registered), when it sets
 * {@code maxSglRd} (registration pays off for long READs), or when {@link RdmaDevice#RW_FORCE_MR}
 * is on. Soft devices have one port, numbered 1.
 */
public final class RdmaRw {
    /** The most pages one rw MR maps, whatever the device allows ({@code 256} in rw.c). */
    public static final int MAX_MR_PAGES = RwSizing.MAX_MR_PAGES;
    /** The largest value of a kernel {@code u32}: where the sizing saturates. */
    public static final long U32_MAX = RwSizing.U32_MAX;

    private RdmaRw() {
    }

    static void checkPort(RdmaDevice device, int port, String who) {
        if (port != 1) {
            throw new RdmaException(Errno.EINVAL, who + ": port " + port + " does not exist on " + device.name()
                    + " (soft devices have one port, 1)");
        }
    }

    /** {@code rdma_rw_can_use_mr}: iWARP, {@code maxSglRd != 0}, or forced. */
    public static boolean canUseMr(RdmaDevice device, int port) {
        checkPort(device, port, "RdmaRw.canUseMr");
        return RwSizing.canUseMr(device.attributes(), device.rwForceMr());
    }

    /**
     * {@code rdma_rw_io_needs_mr}: a READ on iWARP, a READ of more than {@code maxSglRd} entries
     * (when set), or anything when forced.
     */
    public static boolean ioNeedsMr(RdmaDevice device, int port, DmaDirection dir, int dmaEntries) {
        checkPort(device, port, "RdmaRw.ioNeedsMr");
        DeviceAttributes a = device.attributes();
        if (device.rwForceMr()) {
            return true;
        }
        return dir == DmaDirection.FROM_DEVICE && (a.iWarp() || (a.maxSglRd() != 0 && dmaEntries > a.maxSglRd()));
    }

    /**
     * {@code rdma_rw_fr_page_list_len}: pages per rw MR, {@code min(maxFastRegPageListLen, 256)}.
     * The soft device has one page-list limit for plain and protection-information MRs.
     */
    public static int frPageListLen(RdmaDevice device, boolean protectionInfo) {
        return RwSizing.frPageListLen(device.attributes());
    }

    /**
     * {@code rdma_rw_mr_factor}: how many MRs (or, on a device that cannot use MRs, READ work
     * requests) a transfer of {@code maxPages} pages needs: {@code ceil(maxPages / P)} with P the rw
     * page-list length, or the device's {@code maxSgeRd} when it cannot use MRs. Monotone in maxPages.
     *
     * @throws RdmaException {@link Errno#EINVAL} for a negative page count or a port other than 1
     */
    public static int mrFactor(RdmaDevice device, int port, int maxPages) {
        if (maxPages < 0) {
            throw new RdmaException(Errno.EINVAL, "RdmaRw.mrFactor: maxPages " + maxPages + " is negative");
        }
        int per = canUseMr(device, port) ? frPageListLen(device, false) : device.attributes().maxSgeRd();
        return (int) ((maxPages + (long) per - 1) / per);
    }

    /**
     * {@code rdma_rw_max_send_wr}: send-queue entries {@code ctxs} contexts may need at once,
     * {@code f * ctxs} with f = 3 (REG_MR + LOCAL_INV + the operation) when integrity is on or the
     * device can use MRs, else 1; saturating at {@value #U32_MAX}.
     *
     * @throws RdmaException {@link Errno#EINVAL} for ctxs outside [0, 2^32 - 1] or a port other than 1
     */
    public static long maxSendWr(RdmaDevice device, int port, long ctxs, boolean integrity) {
        if (ctxs < 0 || ctxs > U32_MAX) {
            throw new RdmaException(Errno.EINVAL, "RdmaRw.maxSendWr: ctxs " + ctxs + " is not a u32");
        }
        checkPort(device, port, "RdmaRw.maxSendWr");
        return RwSizing.maxSendWr(device.attributes(), device.rwForceMr(), ctxs, integrity);
    }
}
