package io.regmem.registration.spi;

import io.regmem.registration.Access;
import io.regmem.registration.WcStatus;

/**
 * Memory translation for providers that move bytes in software (soft, or a transport's emulated
 * path), bound to one QP ({@link QpContext#memory()}): resolves keys of the QP's device into the
 * segments behind them with the same checks a NIC makes, and applies the memory effects of REG_MR
 * and invalidation, which live in the verbs layer's key tables. Every method allocates nothing; a
 * provider calls them while it holds the QP's lock and, around the copy, a grace-period section
 * ({@link GracePeriod}).
 */
public interface MemoryAccess {

    /**
     * Resolves a request's local entries on this QP's device into {@code out}: every key must
     * resolve (or be the local DMA key over a live mapping), belong to the QP's PD, cover the
     * entry, grant LOCAL_WRITE if {@code write}, and its memory be alive. An integrity MR is
     * resolved through {@link Segments#offload()}. An entry of length 0 is skipped unchecked.
     *
     * @return false on any failure, before any byte moves
     */
    boolean gatherLocal(PostedWr w, Segments out, boolean write);

    /**
     * Resolves {@code [addr, addr + len)} under a remote key of this QP's device, this QP being the
     * target of a peer's request: the key must resolve, belong to this QP's PD, grant {@code right}
     * and cover the range (zero-based regions: {@code addr} is an offset). A zero-length range
     * resolves, to nothing, whatever the key and address (a zero-length RDMA WRITE or READ).
     */
    boolean resolveRemote(long addr, long len, int rkey, Access right, Segments out);

    /**
     * Executes a BIND_MW ({@link PostedWr#bindMw()}) at its turn in the send queue: binds the type-2
     * window to the range of the region with the rights under the request's key, or, changing
     * nothing, returns {@link WcStatus#MW_BIND_ERR}. Call inside a grace-period section, as
     * {@link #fastRegister}.
     */
    WcStatus bindWindow(PostedWr w);

    /** Executes a REG_MR (or REG_MR_INTEGRITY) request on this QP: SUCCESS or LOC_PROT_ERR, changing nothing then. */
    WcStatus fastRegister(PostedWr w);

    /** The fast-reg MR of this QP's PD whose current key is {@code rkey} (valid or not), or null. */
    MrContext invalidationTarget(int rkey);

    /**
     * Makes a fast-reg MR's mapping invalid (LOCAL_INV, SEND_WITH_INV, READ_WITH_INV); {@code mr} is
     * one {@link #invalidationTarget} returned. The caller then waits, outside its grace-period
     * section, until no access through it is in progress.
     */
    void invalidate(MrContext mr);
}
