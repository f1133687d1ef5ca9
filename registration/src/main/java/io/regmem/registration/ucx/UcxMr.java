package io.regmem.registration.ucx;

import io.regmem.registration.MemoryRegion;
import io.regmem.registration.spi.ProviderMr;
import java.lang.foreign.MemorySegment;

/**
 * A region registered with UCX ({@code ucp_mem_map} of the region's memory). Its exported key is a
 * {@link RemoteKeyEnvelope} around the packed key, packed once at registration: the verbs rkey,
 * the region's address, length and rights travel with it.
 */
final class UcxMr implements ProviderMr {
    private final UcxDevice device;
    private final MemoryRegion region;
    private final MemorySegment memh;
    private final byte[] packed;

    UcxMr(UcxDevice device, MemoryRegion region, MemorySegment memh, byte[] packed) {
        this.device = device;
        this.region = region;
        this.memh = memh;
        this.packed = packed;
    }

    @Override
    public int exportedKeySize(int rkey) {
        return RemoteKeyEnvelope.size(packed.length);
    }

    @Override
    public void exportRemoteKey(int rkey, MemorySegment to) {
        RemoteKeyEnvelope.encode(rkey, region.access(), region.address(), region.length(), packed, to);
    }

    @Override
    public void deregister() {
        device.unmap(memh);
    }
}
