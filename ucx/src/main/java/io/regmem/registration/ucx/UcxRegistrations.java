package io.regmem.registration.ucx;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.Access;
import io.regmem.registration.spi.MrContext;
import io.regmem.registration.spi.ProviderMr;
import java.lang.foreign.MemorySegment;

/**
 * A UCX device's memory registrations: {@code ucp_mem_map} of a region's memory, or a share of the
 * registration of a chunk UCX allocated ({@link UcxChunkSource}); fast-reg MRs and windows need none.
 * Integrity MRs are refused. Every call on the context is made under the worker lock.
 */
final class UcxRegistrations {
    private final UcxDevice device;

    UcxRegistrations(UcxDevice device) {
        this.device = device;
    }

    ProviderMr register(MrContext mr) {
        if (mr.isIntegrity()) {
            throw new RdmaException(Errno.EOPNOTSUPP, mr.name() + ": ucx: integrity (signature) MRs are not supported "
                    + "(T10-PI offload is a soft provider feature)");
        }
        MemorySegment segment = mr.segment();
        if (segment == null || mr.isWindow()) {
            // Fast-reg MRs and windows: every access is checked by the target against the verbs key
            // tables, which REG_MR, LOCAL_INV and window binds update; UCX needs no registration.
            return new UcxMr(device, mr, MemorySegment.NULL, new byte[0], null);
        }
        device.lockWorker(); // context calls too: the worker uses the context's registrations
        try {
            UcxChunkSource.Allocation shared = device.chunkSource.allocationOf(segment.address(), segment.byteSize());
            if (shared != null) { // memory UCX allocated and registered: its registration serves the region
                shared.regions++;
                return new UcxMr(device, mr, shared.memh, shared.packed, shared);
            }
            int access = mr.access();
            int prot = UcpLayout.MEM_MAP_PROT_LOCAL_READ | UcpLayout.MEM_MAP_PROT_LOCAL_WRITE
                    | ((access & Access.REMOTE_READ.bit()) != 0 ? UcpLayout.MEM_MAP_PROT_REMOTE_READ : 0)
                    | ((access & (Access.REMOTE_WRITE.bit() | Access.REMOTE_ATOMIC.bit())) != 0
                            ? UcpLayout.MEM_MAP_PROT_REMOTE_WRITE : 0);
            MemorySegment memh = device.context().map(segment.address(), segment.byteSize(), prot); // (a NIC enforces these rights)
            try {
                return new UcxMr(device, mr, memh, device.context().packRemoteKey(memh), null);
            } catch (RuntimeException e) {
                device.context().unmap(memh);
                throw e;
            }
        } finally {
            device.workerLock.unlock();
        }
    }

    /** Deregisters a region: its own registration unmapped, or its share of an allocation's given back. */
    void deregister(MemorySegment memh, UcxChunkSource.Allocation shared) {
        device.lockWorker();
        try {
            if (shared != null) {
                device.chunkSource.regionGone(shared);
            } else {
                device.context().unmap(memh);
            }
        } finally {
            device.workerLock.unlock();
        }
    }
}
