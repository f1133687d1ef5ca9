package io.regmem.registration.soft;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.spi.CmContext;
import io.regmem.registration.spi.ProviderCm;
import io.regmem.registration.spi.QpContext;

/**
 * Soft connection setup within the JVM: a listener is a name in {@link SoftWire#LISTENERS};
 * connecting makes a request ID at the listener; accepting links the two QPs. Runs under
 * {@link SoftWire#CM}, never on the data path.
 */
final class SoftCm implements ProviderCm {
    private final CmContext ctx;
    /** Guarded by {@link SoftWire#CM}. */
    private String listenName;
    /** The other end: for a request, the active ID; for the active ID, its request. Guarded by CM. */
    private SoftCm remote;

    SoftCm(CmContext ctx) {
        this.ctx = ctx;
        ctx.attach(this);
    }

    @Override
    public void listen(String address) {
        synchronized (SoftWire.CM) {
            if (SoftWire.LISTENERS.putIfAbsent(address, this) != null) {
                throw new RdmaException(Errno.EBUSY, ctx.name() + ": '" + address + "' is already listened on");
            }
            listenName = address;
        }
    }

    @Override
    public void connect(String address, byte[] privateData) {
        synchronized (SoftWire.CM) {
            SoftCm listener = SoftWire.LISTENERS.get(address);
            if (listener == null) {
                throw new RdmaException(Errno.ENOENT, ctx.name() + ": nobody listens under '" + address + "'");
            }
            SoftCm request = SoftContexts.cm(listener.ctx.newRequest(privateData, ctx.deviceName()));
            request.remote = this;
            remote = request;
        }
    }

    @Override
    public void accept(byte[] privateData) {
        synchronized (SoftWire.CM) {
            SoftCm active = remote;
            if (active == null || active.ctx.isDestroyed() || active.ctx.qp() == null
                    || !active.ctx.isConnecting()) {
                throw new RdmaException(Errno.EINVAL, ctx.name() + ": accept needs a pending request, a QP, and a "
                        + "requester that still waits");
            }
            SoftQueuePair.link(queuePair(ctx.qp()), queuePair(active.ctx.qp()));
            active.ctx.established(privateData);
            ctx.established(null);
        }
    }

    private static SoftQueuePair queuePair(QpContext qp) {
        return SoftContexts.qp(qp);
    }

    @Override
    public void reject(byte[] privateData) {
        synchronized (SoftWire.CM) {
            SoftCm active = remote;
            if (active != null) {
                active.remote = null;
                active.ctx.rejected(privateData);
            }
            remote = null;
        }
    }

    @Override
    public void disconnect() {
        synchronized (SoftWire.CM) {
            QpContext qp = ctx.qp();
            if (qp != null) {
                qp.toError();
                SoftQueuePair peer = queuePair(qp).peer;
                if (peer != null) {
                    peer.ctx.toError();
                }
            }
            SoftCm other = remote;
            if (other != null) {
                other.ctx.disconnected();
            }
        }
    }

    @Override
    public void destroy() {
        synchronized (SoftWire.CM) {
            if (listenName != null) {
                SoftWire.LISTENERS.remove(listenName, this);
                listenName = null;
            }
            SoftCm other = remote;
            if (other != null) {
                if (other.remote == this) {
                    other.remote = null;
                }
                if (other.ctx.isConnecting()) {
                    other.ctx.rejected(null); // a request that was never accepted is refused
                }
            }
            remote = null;
        }
    }
}
