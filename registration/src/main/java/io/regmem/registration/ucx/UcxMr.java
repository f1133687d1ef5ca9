package io.regmem.registration.ucx;

import io.regmem.registration.MemoryRegion;
import io.regmem.registration.spi.ProviderMr;
import java.lang.foreign.MemorySegment;

/**
 * A region registered with UCX ({@code ucp_mem_map} of the region's memory), or a fast-reg MR or
 * memory window, which map memory later or narrow another region and have no UCX registration of
 * their own. Its exported key is a {@link RemoteKeyEnvelope} around the packed key, packed once at
 * registration: the verbs rkey, the region's address, length and rights travel with it (for a
 * fast-reg MR or window, flagged as the target's to check).
 */
final class UcxMr implements ProviderMr {
    private final UcxDevice device;
    private final MemoryRegion region;
    /** UCX's registration, or NULL for a fast-reg MR or a window (the verbs key tables alone govern them). */
    private final MemorySegment memh;
    private final byte[] packed;
    private final int flags;

    UcxMr(UcxDevice device, MemoryRegion region, MemorySegment memh, byte[] packed) {
        this.device = device;
        this.region = region;
        this.memh = memh;
        this.packed = packed;
        this.flags = memh.address() == 0 ? RemoteKeyEnvelope.TARGET_CHECKS : 0;
    }

    @Override
    public int exportedKeySize(int rkey) {
        return RemoteKeyEnvelope.size(packed.length);
    }

    @Override
    public void exportRemoteKey(int rkey, MemorySegment to) {
        if (flags == RemoteKeyEnvelope.TARGET_CHECKS) {
            // A fast-reg MR or window: its rights and range are set by a REG_MR or bind that may come
            // after the export, and only the target checks them, so the envelope carries none.
            RemoteKeyEnvelope.encode(rkey, 0, 0, 0, flags, packed, to);
        } else {
            RemoteKeyEnvelope.encode(rkey, region.access(), region.address(), region.length(), flags, packed, to);
        }
    }

    @Override
    public void deregister() {
        device.quiesce(); // the verbs layer made the keys invalid: wait out what checked them before
        if (memh.address() != 0) {
            device.unmap(memh);
        }
    }
}
