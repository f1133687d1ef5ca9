package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.spi.CmContext;
import io.regmem.registration.spi.ProviderCm;
import io.regmem.registration.spi.QpContext;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * A connection-manager ID as its provider sees it ({@link CmContext}): the events it reports change
 * the ID's state and are delivered by {@link CmEvents}.
 */
final class CmCore extends ProviderState implements CmContext {
    private final CmId id;

    CmCore(CmId id) {
        this.id = id;
    }

    CmId cmId() {
        return id;
    }

    @Override
    public String name() {
        return cmId().toString();
    }

    @Override
    public boolean isDestroyed() {
        return cmId().isDestroyed();
    }

    @Override
    public String deviceName() {
        return cmId().device().name();
    }

    @Override
    public QpContext qp() {
        QueuePair q = id.qp();
        return q == null ? null : q.context;
    }


    @Override
    public boolean isConnecting() {
        return id.connState() == CmId.ConnState.CONNECTING;
    }

    @Override
    public CmContext newRequest(byte[] privateData, String peerAddress) {
        // Not under this (the listener's) device lock: the caller may hold another device's.
        // The tracker is concurrent.
        CmId request = new CmId(id.device(), id.portSpace());
        request.conn = CmId.ConnState.REQUESTED;
        request.listener = id;
        request.handler = id.handler; // a request inherits its listener's handler
        request.peerData = privateData == null ? new byte[0] : privateData.clone();
        request.peerAddress = peerAddress;
        request.attachProvider();
        id.device().tracker.add(request);
        synchronized (id.requests) {
            id.requests.addLast(request);
        }
        CmEvents.post(new CmEvent(CmEvent.Type.CONNECT_REQUEST, request, id));
        return request.context;
    }

    @Override
    public void sourceAddress(String hostPort) {
        id.localAddress = hostPort;
    }

    @Override
    public void established(byte[] privateData) {
        peerData(privateData);
        id.wasConnected = true;
        id.conn = CmId.ConnState.CONNECTED;
        id.leaveListener();
        connectionEvent("ESTABLISHED");
        CmEvents.post(new CmEvent(CmEvent.Type.ESTABLISHED, id, null));
    }

    @Override
    public boolean reuseAddress() {
        return id.reuseAddress == 1;
    }

    @Override
    public UdParam datagramParam() {
        QueuePair q = id.qp();
        if (id.portSpace() != PortSpace.UDP || q == null) {
            return null;
        }
        return new UdParam(id.device().datagramAddress(), q.qpNum(), q.qkey());
    }

    @Override
    public boolean udpPortSpace() {
        return id.portSpace() == PortSpace.UDP;
    }

    @Override
    public void establishedDatagram(byte[] privateData, UdParam peer) {
        peerData(privateData);
        id.wasConnected = true;
        id.conn = CmId.ConnState.CONNECTED;
        connectionEvent("ESTABLISHED");
        CmEvents.post(new CmEvent(CmEvent.Type.ESTABLISHED, id, null, 0, peer, null));
    }

    @Override
    public void answeredDatagram() {
        id.wasConnected = true;
        id.conn = CmId.ConnState.CONNECTED;
        id.leaveListener();
        connectionEvent("ANSWERED");
    }

    @Override
    public void failed(String why, Failure how) {
        id.failureReason = why;
        switch (how) {
            case REFUSED -> rejected(null, CmEvent.REJECT_INVALID_SERVICE_ID);
            case UNREACHABLE -> failedWith(CmEvent.Type.UNREACHABLE, -Errno.ETIMEDOUT.value());
            case BROKEN -> failedWith(CmEvent.Type.CONNECT_ERROR, -Errno.ECONNRESET.value());
            default -> throw new IllegalStateException(how.toString());
        }
    }

    /** The request ended without a connection: DISCONNECTED, and the event of {@code type} with {@code status}. */
    private void failedWith(CmEvent.Type type, int status) {
        id.conn = CmId.ConnState.DISCONNECTED;
        connectionEvent(type.name());
        CmEvents.post(new CmEvent(type, id, null, status, null, null));
    }

    @Override
    public void rejected(byte[] privateData) {
        rejected(privateData, CmEvent.REJECT_CONSUMER_DEFINED);
    }

    private void rejected(byte[] privateData, int status) {
        peerData(privateData);
        failedWith(CmEvent.Type.REJECTED, status);
    }

    private void peerData(byte[] data) {
        if (data != null) {
            id.peerData = data.clone();
        }
    }

    private void connectionEvent(String type) {
        RegistrationEvents.Connection event = new RegistrationEvents.Connection();
        if (event.shouldCommit()) {
            event.id = id.toString();
            event.device = id.device().name();
            event.type = type;
            event.commit();
        }
    }

    @Override
    public void disconnected() {
        if (id.conn == CmId.ConnState.CONNECTED) {
            id.conn = CmId.ConnState.DISCONNECTED;
            connectionEvent("DISCONNECTED");
            id.device().errors.report(new RdmaException(Errno.ECONNRESET, id + ": the peer disconnected or went away"));
            CmEvents.post(new CmEvent(CmEvent.Type.DISCONNECTED, id, null));
        }
    }

    @Override
    public ProviderCm provider() {
        return id.provider;
    }


    /** {@link CmId#awaitConnected}: looks at the ID's state, spinning a while, then parking 100 us at a time. */
    void awaitConnected(long timeout, TimeUnit unit) {
        long start = System.nanoTime();
        long limit = unit.toNanos(Math.max(0, timeout));
        for (int looks = 0; ; looks++) {
            CmId.ConnState c = id.conn;
            switch (c) {
                case CONNECTED -> {
                    return;
                }
                case DISCONNECTED -> throw id.wasConnected
                        ? new RdmaException(Errno.ECONNRESET, id + ": awaitConnected: the connection ended")
                        : id.failureReason != null
                        ? new RdmaException(Errno.ECONNREFUSED, id + ": awaitConnected: the request failed: " + id.failureReason)
                        : new RdmaException(Errno.ECONNREFUSED, id + ": awaitConnected: the peer rejected the request ("
                                + id.privateData().length + " bytes of the peer's private data)");
                case IDLE, BOUND, ADDR_RESOLVED, ROUTE_RESOLVED, LISTENING -> throw new RdmaException(Errno.EINVAL, id + ": awaitConnected in state " + c
                        + ": nothing to wait for (connect, or accept a request, first)");
                default -> {
                    // CONNECTING or REQUESTED: under way
                }
            }
            long left = limit - (System.nanoTime() - start);
            if (left <= 0) {
                throw new RdmaException(Errno.ETIMEDOUT, id + ": awaitConnected: still " + c + " after "
                        + unit.toMillis(Math.max(0, timeout)) + " ms");
            }
            if (Thread.currentThread().isInterrupted()) {
                throw new RdmaException(Errno.EINTR, id + ": awaitConnected: interrupted in state " + c);
            }
            if (looks < 1000) {
                Thread.onSpinWait();
            } else {
                LockSupport.parkNanos(Math.min(left, 100_000L));
            }
        }
    }

    /** {@link CmId#connect(String, byte[])}'s checks and start (device lock held, inside a CmEvents scope). */
    void connect(String address, byte[] data) {
        if (id.qp() == null) {
            throw new RdmaException(Errno.EINVAL, id + ": connect needs a QP: createQp(pd, attributes) first (as "
                    + "rdma_create_qp before rdma_connect)");
        }
        CmId.ConnState was = id.conn;
        boolean routed = was == CmId.ConnState.ROUTE_RESOLVED && address != null && address.equals(id.resolved);
        if (was != CmId.ConnState.IDLE && !routed) {
            throw new RdmaException(Errno.EINVAL, id + ": connect needs an idle ID (or one whose route to that address "
                    + "is resolved), this one is " + was + " (an ID connects once; make a new one for a new connection)");
        }
        if (address == null) {
            throw new RdmaException(Errno.EINVAL, id + ": connect needs an address, got null");
        }
        id.conn = CmId.ConnState.CONNECTING;
        id.peerAddress = address;
        try {
            id.provider.connect(address, data);
        } catch (RuntimeException e) {
            id.conn = was;
            id.peerAddress = null;
            throw e;
        }
    }

    /** Private data checked against its limit and copied; the empty array for null. */
    byte[] checkedData(byte[] data, int max, String call) {
        if (data == null || data.length == 0) {
            return CmId.NO_DATA;
        }
        if (data.length > max) {
            throw new RdmaException(Errno.EINVAL, id + ": " + call + " with " + data.length + " bytes of private data "
                    + "(at most " + max + ")");
        }
        return data.clone();
    }

    /** The ID closes: every request that came through it and was never taken is refused (its requester is told). */
    void refusePending() {
        while (true) {
            CmId pending;
            synchronized (id.requests) {
                pending = id.requests.pollFirst();
            }
            if (pending == null) {
                return;
            }
            pending.conn = CmId.ConnState.DISCONNECTED; // refused: never accepted
            pending.provider.destroy();
            pending.markDestroyed();
        }
    }

    /** A request ID leaves its listener's list of pending requests. */
    void leaveListener() {
        CmId l = id.listener;
        if (l != null) {
            synchronized (l.requests) {
                l.requests.remove(id);
            }
        }
    }
}
