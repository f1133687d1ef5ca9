package io.regmem.registration.ucx;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.DeviceAttributes;
import io.regmem.registration.spi.CmContext;
import io.regmem.registration.spi.CqContext;
import io.regmem.registration.spi.MrContext;
import io.regmem.registration.spi.ProviderCm;
import io.regmem.registration.spi.ProviderCq;
import io.regmem.registration.spi.ProviderDevice;
import io.regmem.registration.spi.ProviderMr;
import io.regmem.registration.spi.ProviderQp;
import io.regmem.registration.spi.QpContext;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A UCX device: one UCP context and one worker. Every call on the worker is made under
 * {@link #workerLock} (the worker is created {@code SERIALIZED}).
 *
 * <p>Memory registration is {@code ucp_mem_map} of the region's memory; fast-registration MRs and
 * memory windows are refused with {@code EOPNOTSUPP} (UCX has no per-operation re-mapping of a
 * registration, and a window's narrower rights could not be enforced at the target).
 */
final class UcxDevice implements ProviderDevice {
    private final DeviceAttributes attributes;
    private final UcpContext context;
    private final UcpWorker worker;
    /** Guards every call on the worker. */
    final ReentrantLock workerLock = new ReentrantLock();
    private boolean closed;

    UcxDevice(Ucp ucp, DeviceAttributes attributes, String name) {
        this.attributes = attributes;
        this.context = new UcpContext(ucp, name);
        UcpWorker w;
        try {
            w = new UcpWorker(context);
        } catch (RuntimeException e) {
            context.close();
            throw e;
        }
        this.worker = w;
    }

    @Override
    public DeviceAttributes attributes() {
        return attributes;
    }

    @Override
    public ProviderMr registerMemory(MrContext mr) {
        if (mr.isWindow()) {
            throw new RdmaException(Errno.EOPNOTSUPP, mr.region() + ": ucx: memory windows are not supported "
                    + "(UCX cannot enforce a window's narrower rights at the target)");
        }
        MemorySegment segment = mr.segment();
        if (segment == null) {
            throw new RdmaException(Errno.EOPNOTSUPP, mr.region() + ": ucx: fast-registration MRs are not supported "
                    + "(UCX cannot re-map a registration per work request): register the memory once (pd.register) instead");
        }
        MemorySegment memh = context.map(segment.address(), segment.byteSize());
        try {
            return new UcxMr(this, mr.region(), memh, context.packRemoteKey(memh));
        } catch (RuntimeException e) {
            context.unmap(memh);
            throw e;
        }
    }

    void unmap(MemorySegment memh) {
        context.unmap(memh);
    }

    @Override
    public ProviderQp createQp(QpContext qp) {
        throw notYet("queue pairs");
    }

    @Override
    public ProviderCq createCq(CqContext cq) {
        throw notYet("completion queues");
    }

    @Override
    public ProviderCm createCmId(CmContext id) {
        throw notYet("connection-manager IDs");
    }

    private static RdmaException notYet(String what) {
        return new RdmaException(Errno.EOPNOTSUPP, "ucx: " + what + " are not implemented yet (only registration is)");
    }

    @Override
    public void quiesce() {
        // No data path yet: nothing can be touching memory.
    }

    @Override
    public void close() {
        if (!closed) {
            closed = true;
            workerLock.lock();
            try {
                worker.close();
            } finally {
                workerLock.unlock();
            }
            context.close();
        }
    }
}
