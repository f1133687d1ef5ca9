package io.regmem.registration.ucx;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.DeviceAttributes;
import io.regmem.registration.spi.ProviderDevice;
import io.regmem.registration.spi.RdmaProvider;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The UCX provider, {@code RdmaDevice.open("ucx", options)}, on the system's {@code libucp} (1.13 or
 * later) through FFM. A device is a UCP context and worker; memory registers with
 * {@code ucp_mem_map}; RDMA WRITE and READ are {@code ucp_put_nbx}/{@code ucp_get_nbx} on the QP's
 * endpoint; connections are made between devices of this JVM by {@code host:port}. Work in progress:
 * SEND/RECV (active messages), connections between processes and the progress thread are missing,
 * so it is not yet listed in {@code META-INF/services} (its tests register it for themselves).
 */
public final class UcxProvider implements RdmaProvider {
    private static final AtomicInteger DEVICES = new AtomicInteger();

    /** Made by {@link java.util.ServiceLoader}. */
    public UcxProvider() {
    }

    @Override
    public String name() {
        return "ucx";
    }

    /**
     * @throws RdmaException {@link Errno#ENODEV} if UCX is missing or too old (the message names the
     *                       package to install); {@link Errno#EINVAL} for an option (it takes none yet)
     */
    @Override
    public ProviderDevice open(Map<String, String> options) {
        if (!options.isEmpty()) {
            throw new RdmaException(Errno.EINVAL, "ucx: unknown option(s) " + options.keySet() + " (it takes none)");
        }
        Ucp ucp = Ucp.get();
        return new UcxDevice(ucp, DeviceAttributes.defaults(), "regmem-" + ProcessHandle.current().pid() + "-"
                + DEVICES.incrementAndGet());
    }
}
