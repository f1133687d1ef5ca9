package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;

/**
 * A connection-manager ID ({@code rdma_create_id}): the handle a connection is made through. It
 * carries at most one queue pair. Its rules (kernel-semantics section 1): the QP's PD must belong
 * to this ID's device ({@link Errno#EINVAL} otherwise); the ID cannot be destroyed while a QP is
 * attached ({@link Errno#EBUSY}: the kernel silently orphans the QP instead); destroying the QP
 * twice is an error; destroying the ID inside its own event handler is refused ({@link Errno#EBUSY}:
 * the handler returns true instead, see {@link CmEventHandler}).
 *
 * <p>An ID of the {@link PortSpace#TCP} port space (the default) carries a reliable-connected QP; one
 * of {@link PortSpace#UDP} an unreliable-datagram QP, which joins multicast groups
 * ({@link #joinMulticast}) and whose {@code connect}/{@code accept} are rdma_cm's UD address exchange.
 * {@link #resolveAddr}, {@link #resolveRoute} and {@link #connect()} are rdma_cm's three steps to a
 * connection; {@link #connect(String)} does them in one.
 */
public final class CmId extends CmIdBase implements AutoCloseable {
    /** Where an ID stands in connection setup. */
    public enum ConnState {
        /** Not connected, not listening. */
        IDLE,
        /** Bound to a local address ({@link #bindAddr}), not yet listening. */
        BOUND,
        /** A destination was resolved ({@link #resolveAddr}): next, {@link #resolveRoute}. */
        ADDR_RESOLVED,
        /** The route to it was resolved ({@link #resolveRoute}): next, {@link #connect()}. */
        ROUTE_RESOLVED,
        /** Accepting connection requests under a name. */
        LISTENING,
        /** Active side: a request is waiting for the peer's accept. */
        CONNECTING,
        /** Passive side: a request from a peer, to accept or reject. */
        REQUESTED,
        /** Both QPs are ready to send. */
        CONNECTED,
        /**
         * Disconnected, rejected or failed: an RC QP is in the error state (a UD QP, which has no
         * connection, stays ready).
         */
        DISCONNECTED
    }

    /**
     * The most private data {@link #connect(String, byte[])} carries: 56 bytes, as {@code rdma_connect}
     * on InfiniBand (the CM REQ's 92 bytes less the RDMA CM header).
     */
    public static final int MAX_CONNECT_PRIVATE_DATA = 56;
    /** The most private data {@link #accept(byte[])} carries: 196 bytes (the CM REP's), as on InfiniBand. */
    public static final int MAX_ACCEPT_PRIVATE_DATA = 196;
    /** The most private data {@link #reject(byte[])} carries: 148 bytes (the CM REJ's), as on InfiniBand. */
    public static final int MAX_REJECT_PRIVATE_DATA = 148;
    static final byte[] NO_DATA = new byte[0];

    private volatile QueuePair qp;

    CmId(RdmaDevice device, PortSpace portSpace) {
        super(device, portSpace);
    }

    /** Creates the provider's half; throws before the ID is tracked, so nothing is created then. */
    void attachProvider() {
        provider = device.provider().createCmId(context);
    }

    /**
     * Creates this ID's queue pair ({@code rdma_create_qp}): a reliable-connected QP in the INIT
     * state, holding a reference on the PD and on each CQ. With {@code maxRdmaCtxs = c} its send
     * queue grows by {@code f * c} WRs (f = 3 when the device can use MRs for rw or integrity is on,
     * else 1), clamped to the device's {@code maxQpWr}, and it gets a pool of c fast-reg MRs for rw
     * contexts ({@link QueuePair#rdmaMrs()}; plus c signature MRs with integrity). On failure
     * nothing is created and no count changes.
     *
     * @throws RdmaException {@link Errno#EINVAL} for a PD or CQ of another device, missing CQs or
     *                       limits beyond the device's; {@link Errno#EBUSY} if a QP is already attached;
     *                       {@link Errno#EBADF} if this ID, the PD or a CQ was destroyed;
     *                       {@link Errno#EOPNOTSUPP} for integrity on a device without
     *                       {@link DeviceAttributes#integrityHandover()}
     */
    public QueuePair createQp(ProtectionDomain pd, QpInitAttributes attrs) {
        synchronized (device.lock) {
            checkAlive("createQp");
            QueuePair created = CmQps.create(this, pd, attrs);
            qp = created;
            return created;
        }
    }

    /** The attached queue pair, or null. */
    public QueuePair qp() {
        return qp;
    }

    /**
     * Destroys the attached queue pair ({@code rdma_destroy_qp}) and drops its PD and CQ references.
     *
     * @throws RdmaException {@link Errno#EINVAL} if no QP is attached (a second destroy);
     *                       {@link Errno#EBUSY} while rw contexts hold MRs of the QP's pools
     *                       ({@code mrs_used > 0}; the QP stays usable); {@link Errno#EBADF} if this ID
     *                       was destroyed
     */
    public void destroyQp() {
        destroyQp(false);
    }

    /** Destroys the QP; {@code force} (device teardown) ignores rw contexts still holding pool MRs. */
    void destroyQp(boolean force) {
        synchronized (device.lock) {
            checkAlive("destroyQp");
            CmQps.destroy(this, qp, force);
            qp = null;
        }
    }

    // ---- connection setup: the verbs layer keeps the states and events, the provider the wire ----

    /**
     * Listens for connection requests at {@code address} ({@code rdma_bind_addr} and {@code rdma_listen}
     * in one): on soft, any name, unique within the JVM; on shm and ucx, {@code host:port}.
     *
     * @throws RdmaException {@link Errno#EBUSY} if another ID listens there; {@link Errno#EINVAL} if this
     *                       ID is not idle or the address is null
     */
    public void listen(String address) {
        synchronized (device.lock) {
            checkAlive("listen");
            if (address == null || conn != ConnState.IDLE) {
                throw new RdmaException(Errno.EINVAL, this + ": listen(" + address + ") in state " + conn
                        + " (needs an idle ID and an address)");
            }
            provider.listen(address);
            localAddress = address;
            conn = ConnState.LISTENING;
        }
    }

    /**
     * Binds this ID to the local {@code address} ({@code rdma_bind_addr}), for {@link #listen()}: on shm
     * and ucx {@code host:port}, a TCP port taken now, where port 0 lets the system pick one
     * ({@link #localAddress()} then says which); on soft a name, reserved when it listens. A bound ID
     * listens; it does not connect (the system picks a connection's source address).
     *
     * @throws RdmaException {@link Errno#EADDRINUSE} if another socket holds the address (the ID stays
     *                       idle); {@link Errno#EINVAL} if this ID is not idle, for a null address or
     *                       one the provider does not understand
     */
    public void bindAddr(String address) {
        synchronized (device.lock) {
            checkAlive("bindAddr");
            if (address == null || conn != ConnState.IDLE) {
                throw new RdmaException(Errno.EINVAL, this + ": bindAddr(" + address + ") in state " + conn
                        + " (needs an idle ID and an address)");
            }
            localAddress = provider.bind(address);
            conn = ConnState.BOUND;
        }
    }

    /**
     * Listens at the address {@link #bindAddr} bound ({@code rdma_listen}).
     *
     * @throws RdmaException {@link Errno#EINVAL} unless this ID is bound and not yet listening;
     *                       {@link Errno#EBUSY} if an ID of this JVM listens there already
     */
    public void listen() {
        synchronized (device.lock) {
            checkAlive("listen");
            if (conn != ConnState.BOUND) {
                throw new RdmaException(Errno.EINVAL, this + ": listen() in state " + conn
                        + " (needs an ID bound with bindAddr; or listen(address) on an idle one)");
            }
            provider.listen(localAddress);
            conn = ConnState.LISTENING;
        }
    }

    /**
     * Connects to the destination {@link #resolveAddr} and {@link #resolveRoute} resolved
     * ({@code rdma_connect} after the two resolution steps), with no private data; with private data:
     * {@code connect(resolvedAddress(), bytes)}.
     *
     * @throws RdmaException {@link Errno#EINVAL} unless the route is resolved; else as {@link #connect(String, byte[])}
     */
    public void connect() {
        String to = resolved;
        if (to == null || conn != ConnState.ROUTE_RESOLVED) {
            throw new RdmaException(Errno.EINVAL, this + ": connect() in state " + conn + " needs a resolved route "
                    + "(resolveAddr, then resolveRoute; or connect(address) on an idle ID)");
        }
        connect(to, null);
    }

    /**
     * Asks the ID listening at {@code address} for a connection ({@code rdma_connect}), with no
     * private data: {@link #connect(String, byte[])}.
     *
     * @throws RdmaException as {@link #connect(String, byte[])}
     */
    public void connect(String address) {
        connect(address, null);
    }

    /**
     * Asks the ID listening at {@code address} for a connection ({@code rdma_connect}), carrying
     * {@code privateData} ({@code rdma_conn_param.private_data}; null or empty for none), which the
     * listener reads from the request ID's {@link #privateData()} before it accepts or rejects. This
     * ID must have its QP. The listener sees a new ID in {@link #getRequest()}; once that one
     * accepts, both QPs are ready to send and this ID's {@link #privateData()} is what the acceptor
     * sent (or, after a rejection, what the rejecter sent). The bytes are copied.
     *
     * <p>On a UDP port space ID this is rdma_cm's UD address exchange (SIDR, as {@code udaddy} uses it):
     * the listener (a UDP ID too) accepts with a UD QP on the request ID, and this ID's
     * {@link CmEvent.Type#ESTABLISHED} event carries that QP's {@link UdParam} ({@link CmEvent#ud()}:
     * its device's address, QP number and Q_Key) to send to; nothing links the two QPs, and the
     * accepting side reports no event.
     *
     * @throws RdmaException {@link Errno#ECONNREFUSED} if nobody listens there (as a socket's connect); {@link Errno#EINVAL}
     *                       without a QP, when not idle, for a null address, or for private data over
     *                       {@link #MAX_CONNECT_PRIVATE_DATA} bytes; {@link Errno#EACCES} (ucx) if the
     *                       listener's handshake does not prove it holds this device's secret
     */
    public void connect(String address, byte[] privateData) {
        byte[] data = context.checkedData(privateData, MAX_CONNECT_PRIVATE_DATA, "connect");
        CmEvents.begin();
        try {
            synchronized (device.lock) {
                checkAlive("connect");
                context.connect(address, data);
            }
        } finally {
            CmEvents.end();
        }
    }

    /**
     * The next pending connection request of a listening ID ({@code rdma_get_request}), or null.
     * The caller owns the returned ID: it creates a QP on it and calls {@link #accept()}, or
     * {@link #reject()}s it.
     */
    public CmId getRequest() {
        checkAlive("getRequest");
        synchronized (requests) {
            return requests.pollFirst();
        }
    }

    /**
     * Accepts a connection request ({@code rdma_accept}) with no private data: {@link #accept(byte[])}.
     *
     * @throws RdmaException as {@link #accept(byte[])}
     */
    public void accept() {
        accept(null);
    }

    /**
     * Accepts a connection request ({@code rdma_accept}): links the two QPs and moves both to RTS (of
     * a UDP port space request: answers the UD address exchange, see {@link #connect(String, byte[])});
     * the requester's {@link #privateData()} becomes {@code privateData} (null or empty for none;
     * copied).
     *
     * @throws RdmaException {@link Errno#EINVAL} unless this is a pending request with a QP whose
     *                       requester still waits, or for private data over
     *                       {@link #MAX_ACCEPT_PRIVATE_DATA} bytes; (ucx) {@link Errno#ETIMEDOUT} if the
     *                       requester does not confirm within the handshake's time (its QP is then in
     *                       the error state); {@link Errno#EIO} if UCX cannot reach the requester
     */
    public void accept(byte[] privateData) {
        byte[] data = context.checkedData(privateData, MAX_ACCEPT_PRIVATE_DATA, "accept");
        CmEvents.begin();
        try {
            synchronized (device.lock) {
                checkAlive("accept");
                if (conn != ConnState.REQUESTED || qp == null) {
                    throw new RdmaException(Errno.EINVAL, this + ": accept needs a pending request, a QP, and a "
                            + "requester that still waits (state " + conn + ")");
                }
                provider.accept(data);
            }
        } finally {
            CmEvents.end();
        }
    }

    /** Rejects a pending request ({@code rdma_reject}) with no private data: {@link #reject(byte[])}. */
    public void reject() {
        reject(null);
    }

    /**
     * Rejects a pending request ({@code rdma_reject}): the requester ends DISCONNECTED with a
     * {@code REJECTED} event, and its {@link #privateData()} is {@code privateData} (null or empty
     * for none; copied: say why, so that the requester can tell the user).
     *
     * @throws RdmaException {@link Errno#EINVAL} for an ID that is not a pending request or for
     *                       private data over {@link #MAX_REJECT_PRIVATE_DATA} bytes
     */
    public void reject(byte[] privateData) {
        byte[] data = context.checkedData(privateData, MAX_REJECT_PRIVATE_DATA, "reject");
        CmEvents.begin();
        try {
            synchronized (device.lock) {
                checkAlive("reject");
                if (conn != ConnState.REQUESTED) {
                    throw new RdmaException(Errno.EINVAL, this + ": reject of a non-request (state " + conn + ")");
                }
                provider.reject(data);
                conn = ConnState.DISCONNECTED;
                leaveListener();
            }
        } finally {
            CmEvents.end();
        }
    }

    /**
     * Disconnects ({@code rdma_disconnect}): both QPs move to the error state, so everything
     * outstanding at either end is flushed. Idempotent. On a UDP port space ID it only marks the ID
     * disconnected: its UD QP has no connection and stays ready.
     */
    public void disconnect() {
        CmEvents.begin();
        try {
            synchronized (device.lock) {
                checkAlive("disconnect");
                if (portSpace() == PortSpace.UDP) { // a UD QP has no connection: its QP is untouched
                    conn = ConnState.DISCONNECTED;
                    return;
                }
                boolean wasConnected = conn == ConnState.CONNECTED;
                conn = ConnState.DISCONNECTED;
                if (wasConnected) {
                    CmEvents.post(new CmEvent(CmEvent.Type.DISCONNECTED, this, null));
                }
                provider.disconnect();
            }
        } finally {
            CmEvents.end();
        }
    }

    void leaveListener() {
        context.leaveListener();
    }

    /**
     * Destroys the ID ({@code rdma_destroy_id}).
     *
     * @throws RdmaException {@link Errno#EBUSY} while a QP is attached (nothing changes: call
     *                       {@link #destroyQp()} first); {@link Errno#EBADF} if already destroyed
     */
    @Override
    public void close() {
        if (CmEvents.inHandlerOf(this)) {
            throw new RdmaException(Errno.EBUSY, this + ": destroyed inside its own event handler; return true "
                    + "from the handler instead and regmem destroys it afterwards");
        }
        CmEvents.begin();
        try {
            synchronized (device.lock) {
                checkAlive("close");
                if (qp != null) {
                    throw new RdmaException(Errno.EBUSY, this + ": cannot destroy while " + qp
                            + " is attached; destroyQp() first (the kernel would orphan the QP)");
                }
                provider.destroy(); // stops listening
                context.refusePending();
                leaveListener();
                joins.clear();
                markDestroyed();
            }
        } finally {
            CmEvents.end();
        }
    }
}
