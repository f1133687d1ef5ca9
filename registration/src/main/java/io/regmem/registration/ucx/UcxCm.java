package io.regmem.registration.ucx;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.CmId;
import io.regmem.registration.spi.CmContext;
import io.regmem.registration.spi.ProviderCm;
import io.regmem.registration.spi.QpContext;
import java.util.concurrent.ConcurrentHashMap;

/**
 * UCX connection setup between devices of this JVM: a listener is a {@code host:port} address in a
 * JVM-wide table; connecting makes a request ID at the listener; accepting gives each QP an endpoint
 * to the other's worker (the worker addresses are what a bootstrap between processes exchanges).
 * Runs under one JVM-wide lock, never on the data path.
 */
final class UcxCm implements ProviderCm {
    private static final Object CM = new Object();
    private static final ConcurrentHashMap<String, UcxCm> LISTENERS = new ConcurrentHashMap<>();

    private final CmContext ctx;
    /** Guarded by {@link #CM}. */
    private String listenAddress;
    /** The other end: for a request, the active ID; for the active ID, its request. Guarded by CM. */
    private UcxCm remote;

    UcxCm(CmContext ctx) {
        this.ctx = ctx;
        ctx.attach(this);
    }

    /** Checks {@code host:port}: a non-empty host and a port in [1, 65535]. */
    private String checked(String address) {
        int colon = address.lastIndexOf(':');
        int port = -1;
        if (colon > 0) {
            try {
                port = Integer.parseInt(address.substring(colon + 1));
            } catch (NumberFormatException e) {
                port = -1;
            }
        }
        if (port < 1 || port > 65535) {
            throw new RdmaException(Errno.EINVAL, ctx.cmId() + ": ucx address '" + address + "' is not host:port "
                    + "(a host and a port in [1, 65535])");
        }
        return address;
    }

    @Override
    public void listen(String address) {
        String a = checked(address);
        synchronized (CM) {
            if (LISTENERS.putIfAbsent(a, this) != null) {
                throw new RdmaException(Errno.EBUSY, ctx.cmId() + ": '" + a + "' is already listened on");
            }
            listenAddress = a;
        }
    }

    @Override
    public void connect(String address) {
        String a = checked(address);
        synchronized (CM) {
            UcxCm listener = LISTENERS.get(a);
            if (listener == null) {
                throw new RdmaException(Errno.ENOENT, ctx.cmId() + ": nobody listens at '" + a + "'");
            }
            UcxCm request = (UcxCm) listener.ctx.newRequest().attachment();
            request.remote = this;
            remote = request;
        }
    }

    @Override
    public void accept() {
        synchronized (CM) {
            UcxCm active = remote;
            if (active == null || active.ctx.cmId().isDestroyed() || active.ctx.qp() == null
                    || active.ctx.state() != CmId.ConnState.CONNECTING) {
                throw new RdmaException(Errno.EINVAL, ctx.cmId() + ": accept needs a pending request, a QP, and a "
                        + "requester that still waits (state " + ctx.state() + ")");
            }
            UcxQp mine = qp(ctx.qp());
            UcxQp theirs = qp(active.ctx.qp());
            byte[] myWorker = mine.device.workerAddress();
            byte[] theirWorker = theirs.device.workerAddress();
            theirs.connect(myWorker, mine.number);
            mine.connect(theirWorker, theirs.number);
            theirs.localPeer = mine;
            mine.localPeer = theirs;
            active.ctx.established();
            ctx.established();
        }
    }

    private static UcxQp qp(QpContext qp) {
        return (UcxQp) qp.attachment();
    }

    @Override
    public void reject() {
        synchronized (CM) {
            UcxCm active = remote;
            if (active != null) {
                active.remote = null;
                active.ctx.rejected();
            }
            remote = null;
        }
    }

    @Override
    public void disconnect() {
        synchronized (CM) {
            QpContext qp = ctx.qp();
            if (qp != null) {
                qp.toError();
            }
            UcxCm other = remote;
            if (other != null) {
                QpContext peer = other.ctx.qp();
                if (peer != null) {
                    peer.toError(); // the peer loses its connection, as a disconnect request would tell it
                }
                other.ctx.disconnected();
            }
        }
    }

    @Override
    public void destroy() {
        synchronized (CM) {
            if (listenAddress != null) {
                LISTENERS.remove(listenAddress, this);
                listenAddress = null;
            }
            UcxCm other = remote;
            if (other != null) {
                if (other.remote == this) {
                    other.remote = null;
                }
                if (other.ctx.state() == CmId.ConnState.CONNECTING) {
                    other.ctx.rejected();
                }
            }
            remote = null;
        }
    }
}
