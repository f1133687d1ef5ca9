package io.regmem.registration.internal;

import io.regmem.registration.DeviceAttributes;

/**
 * The sizing rules of the kernel's rw API that queue-pair creation applies ({@code rdma_rw_init_qp}):
 * how many fast-reg pages an rw MR maps and how many send-queue entries rw contexts reserve.
 * {@code io.regmem.registration.rw.RdmaRw} publishes them under the kernel's names, with port checks.
 * Internal: this package is not exported; it takes the device's values, not the device.
 */
public final class RwSizing {
    /** The most pages one rw MR maps, whatever the device allows ({@code 256} in rw.c). */
    public static final int MAX_MR_PAGES = 256;
    /** The largest value of a kernel {@code u32}: where the sizing saturates. */
    public static final long U32_MAX = 0xFFFF_FFFFL;

    private RwSizing() {
    }

    /** {@code rdma_rw_can_use_mr}: iWARP, {@code maxSglRd != 0}, or the device's {@code rwForceMr} option. */
    public static boolean canUseMr(DeviceAttributes a, boolean forceMr) {
        return a.iWarp() || a.maxSglRd() != 0 || forceMr;
    }

    /** {@code rdma_rw_fr_page_list_len}: pages per rw MR, {@code min(maxFastRegPageListLen, 256)}. */
    public static int frPageListLen(DeviceAttributes a) {
        return Math.min(a.maxFastRegPageListLen(), MAX_MR_PAGES);
    }

    /**
     * {@code rdma_rw_max_send_wr} for {@code ctxs} in [0, 2^32 - 1]: {@code f * ctxs} with f = 3
     * (REG_MR + LOCAL_INV + the operation) when integrity is on or the device can use MRs, else 1;
     * saturating at {@link #U32_MAX}.
     */
    public static long maxSendWr(DeviceAttributes a, boolean forceMr, long ctxs, boolean integrity) {
        long factor = integrity || canUseMr(a, forceMr) ? 3 : 1;
        return Math.min(factor * ctxs, U32_MAX);
    }
}
