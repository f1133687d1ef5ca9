package io.regmem.registration.ucx;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * A UCP application context ({@code ucp_context_h}) with remote memory access and active messages,
 * and what is made from it directly: memory registrations and workers. Closed once, after every
 * worker and registration made from it is gone.
 */
final class UcpContext implements AutoCloseable {
    final Ucp ucp;
    final MemorySegment handle;
    private boolean closed;

    UcpContext(Ucp ucp, String name) {
        this(ucp, name, null);
    }

    /**
     * A context whose transports are {@code transports} ({@code UCX_TLS}'s syntax, e.g. {@code ^sm}:
     * every one but shared memory), or UCX's own choice for null.
     */
    UcpContext(Ucp ucp, String name, String transports) {
        this.ucp = ucp;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment configOut = a.allocate(ADDRESS);
            ucp.check(ucp.configRead(configOut), Errno.ENODEV, "ucx: ucp_config_read");
            MemorySegment config = configOut.get(ADDRESS, 0);
            if (transports != null) {
                int rc = ucp.configModify(config, a.allocateFrom("TLS"), a.allocateFrom(transports));
                if (rc != 0) {
                    ucp.configRelease(config);
                    ucp.check(rc, Errno.ENODEV, "ucx: ucp_config_modify TLS=" + transports);
                }
            }
            MemorySegment params = a.allocate(UcpLayout.PARAMS_SIZE, 8);
            params.set(JAVA_LONG, UcpLayout.PARAMS_FIELD_MASK, UcpLayout.PARAM_FIELD_FEATURES | UcpLayout.PARAM_FIELD_NAME);
            params.set(JAVA_LONG, UcpLayout.PARAMS_FEATURES, UcpLayout.FEATURE_RMA | UcpLayout.FEATURE_AM);
            params.set(ADDRESS, UcpLayout.PARAMS_NAME, a.allocateFrom(name));
            MemorySegment contextOut = a.allocate(ADDRESS);
            int status = ucp.init(params, config, contextOut);
            ucp.configRelease(config);
            ucp.check(status, Errno.ENODEV, "ucx: ucp_init");
            handle = contextOut.get(ADDRESS, 0);
        }
    }

    /**
     * Registers {@code [address, address + length)} of this process's memory ({@code ucp_mem_map})
     * with the rights {@code prot} ({@code UCP_MEM_MAP_PROT_*}): what a NIC enforces for the key's
     * one-sided accesses on a transport that registers memory with it.
     *
     * @throws RdmaException {@link Errno#EFAULT} if UCX refuses the range
     */
    MemorySegment map(long address, long length, int prot) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment params = a.allocate(UcpLayout.MEM_MAP_PARAMS_SIZE, 8);
            params.set(JAVA_LONG, UcpLayout.MEM_MAP_FIELD_MASK, UcpLayout.MEM_MAP_PARAM_FIELD_ADDRESS | UcpLayout.MEM_MAP_PARAM_FIELD_LENGTH
                    | UcpLayout.MEM_MAP_PARAM_FIELD_PROT);
            params.set(JAVA_LONG, UcpLayout.MEM_MAP_ADDRESS, address);
            params.set(JAVA_LONG, UcpLayout.MEM_MAP_LENGTH, length);
            params.set(ValueLayout.JAVA_INT, UcpLayout.MEM_MAP_PROT, prot);
            MemorySegment memhOut = a.allocate(ADDRESS);
            ucp.check(ucp.memMap(handle, params, memhOut), Errno.EFAULT,
                    "ucx: ucp_mem_map of " + length + " bytes at 0x" + Long.toHexString(address));
            return memhOut.get(ADDRESS, 0);
        }
    }

    /**
     * Allocates and registers {@code length} bytes that UCX chooses ({@code UCP_MEM_MAP_ALLOCATE}):
     * returns the handle; {@link #mappedRange} tells where the memory is.
     */
    MemorySegment allocate(long length) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment params = a.allocate(UcpLayout.MEM_MAP_PARAMS_SIZE, 8);
            params.set(JAVA_LONG, UcpLayout.MEM_MAP_FIELD_MASK, UcpLayout.MEM_MAP_PARAM_FIELD_LENGTH | UcpLayout.MEM_MAP_PARAM_FIELD_FLAGS);
            params.set(JAVA_LONG, UcpLayout.MEM_MAP_LENGTH, length);
            params.set(JAVA_INT, UcpLayout.MEM_MAP_FLAGS, UcpLayout.MEM_MAP_ALLOCATE);
            MemorySegment memhOut = a.allocate(ADDRESS);
            ucp.check(ucp.memMap(handle, params, memhOut), Errno.ENOMEM, "ucx: ucp_mem_map allocating " + length + " bytes");
            return memhOut.get(ADDRESS, 0);
        }
    }

    /** Where a registration's memory is: its address and length ({@code ucp_mem_query}). */
    long[] mappedRange(MemorySegment memh) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment attr = a.allocate(UcpLayout.MEM_ATTR_SIZE, 8);
            attr.set(JAVA_LONG, UcpLayout.MEM_ATTR_FIELD_MASK, UcpLayout.MEM_ATTR_FIELD_ADDRESS | UcpLayout.MEM_ATTR_FIELD_LENGTH);
            ucp.check(ucp.memQuery(memh, attr), Errno.EIO, "ucx: ucp_mem_query");
            return new long[] {attr.get(JAVA_LONG, UcpLayout.MEM_ATTR_ADDRESS), attr.get(JAVA_LONG, UcpLayout.MEM_ATTR_LENGTH)};
        }
    }

    /** Deregisters (and, for {@link #allocate}d memory, frees) a registration. */
    void unmap(MemorySegment memh) {
        ucp.check(ucp.memUnmap(handle, memh), Errno.EIO, "ucx: ucp_mem_unmap");
    }

    /** The packed remote key of a registration, copied onto the heap (the peer unpacks it per endpoint). */
    byte[] packRemoteKey(MemorySegment memh) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment bufferOut = a.allocate(ADDRESS);
            MemorySegment sizeOut = a.allocate(JAVA_LONG);
            ucp.check(ucp.rkeyPack(handle, memh, bufferOut, sizeOut), Errno.EIO, "ucx: ucp_rkey_pack");
            MemorySegment buffer = bufferOut.get(ADDRESS, 0);
            try {
                return buffer.reinterpret(sizeOut.get(JAVA_LONG, 0)).toArray(ValueLayout.JAVA_BYTE);
            } finally {
                ucp.rkeyBufferRelease(buffer);
            }
        }
    }

    @Override
    public void close() {
        if (!closed) {
            closed = true;
            ucp.cleanup(handle);
        }
    }
}
