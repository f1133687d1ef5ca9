package io.regmem.registration.ucx;

import io.regmem.registration.spi.MrContext;
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
    private final MrContext region;
    /** UCX's registration, or NULL for a fast-reg MR or a window (the verbs key tables alone govern them). */
    private final MemorySegment memh;
    private final byte[] packed;
    private final int flags;
    /** The chunk UCX allocated whose registration this region shares, or null if it has its own. */
    private final UcxChunkSource.Allocation shared;

    UcxMr(UcxDevice device, MrContext region, MemorySegment memh, byte[] packed, UcxChunkSource.Allocation shared) {
        this.shared = shared;
        this.device = device;
        this.region = region;
        this.memh = memh;
        this.packed = packed;
        this.flags = memh.address() == 0 ? RemoteKeyEnvelope.TARGET_CHECKS
                : shared != null ? RemoteKeyEnvelope.ONE_SIDED : 0;
    }

    /**
     * A fast-reg MR's or window's key exports as its 4 bytes alone, big-endian (network order, as an
     * rkey travels in RPC-over-RDMA headers), exactly as soft's do: its
     * rights and range are set by a REG_MR or bind that may come after the export and only the target
     * checks them, so there is nothing else to carry, and an RPC puts a fresh one in every call's
     * header. A registered region's key exports as a {@link RemoteKeyEnvelope}.
     */
    @Override
    public int exportedKeySize(int rkey) {
        return flags == RemoteKeyEnvelope.TARGET_CHECKS ? Integer.BYTES : RemoteKeyEnvelope.size(packed.length);
    }

    @Override
    public void exportRemoteKey(int rkey, MemorySegment to) {
        if (flags == RemoteKeyEnvelope.TARGET_CHECKS) {
            to.set(UcxKeyTable.BE_INT, 0, rkey);
        } else {
            RemoteKeyEnvelope.encode(rkey, region.access(), region.segment().address(), region.segment().byteSize(), flags,
                    packed, to);
        }
    }

    @Override
    public void deregister() {
        // The verbs layer made the keys invalid: wait out what checked them before, and the answers of
        // READs and atomics started before that land here (their targets executed them).
        device.quiesce(region);
        if (memh.address() != 0) {
            device.registrations.deregister(memh, shared);
        }
    }
}
