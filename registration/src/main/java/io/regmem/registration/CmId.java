package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.spi.ProviderCm;
import java.net.InetAddress;
import java.util.ArrayDeque;
import java.util.concurrent.TimeUnit;

/**
 * A connection-manager ID ({@code rdma_create_id}): the handle a connection is made through. It
 * carries at most one queue pair. Its rules (kernel-semantics section 1): the QP's PD must belong
 * to this ID's device ({@link Errno#EINVAL} otherwise); the ID cannot be destroyed while a QP is
 * attached ({@link Errno#EBUSY}: the kernel silently orphans the QP instead); destroying the QP
 * twice is an error; destroying the ID inside its own event handler is refused ({@link Errno#EBUSY}:
 * the handler returns true instead, see {@link CmEventHandler}).
 */
public final class CmId extends RdmaResource implements AutoCloseable {
    /** Where an ID stands in connection setup. */
    public enum ConnState {
        /** Not connected, not listening. */
        IDLE,
        /** Bound to a local address ({@link #bindAddr}), not yet listening. */
        BOUND,
        /** Accepting connection requests under a name. */
        LISTENING,
        /** Active side: a request is waiting for the peer's accept. */
        CONNECTING,
        /** Passive side: a request from a peer, to accept or reject. */
        REQUESTED,
        /** Both QPs are ready to send. */
        CONNECTED,
        /** Disconnected or rejected: the QP is in the error state. */
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
    volatile ConnState conn = ConnState.IDLE;
    /** Set once the connection was established (before {@link #conn} says CONNECTED). */
    volatile boolean wasConnected;
    /** What the peer sent with its connection request, accept or reject (never null). */
    volatile byte[] peerData = NO_DATA;
    /** Why the request failed on its way (not the peer's rejection), or null. */
    volatile String failureReason;
    /** The peer's address: what {@link #connect} was given, or what the provider reported for a request. */
    volatile String peerAddress;
    /** The local address: what {@link #bindAddr} bound, or what {@link #listen(String)} was given; null before. */
    volatile String localAddress;
    /** Requests that came through this listening ID and were not yet taken or answered. Guarded by itself. */
    final ArrayDeque<CmId> requests = new ArrayDeque<>();
    /** For a request: the listener it came through. */
    CmId listener;
    volatile CmEventHandler handler;
    /** The provider's half. */
    ProviderCm provider;
    /** What the provider sees of this ID. */
    final CmCore context = new CmCore(this);
    /** The multicast groups it joined (UDP port space). */
    final CmJoins joins = new CmJoins(this);

    private final PortSpace portSpace;

    CmId(RdmaDevice device, PortSpace portSpace) {
        super(device, "CmId", null);
        this.portSpace = portSpace;
    }

    /** The port space the ID was created in ({@link RdmaDevice#createCmId(PortSpace)}): it decides its QP's type. */
    public PortSpace portSpace() {
        return portSpace;
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

    /** The local address: what {@link #bindAddr} bound (with the port picked), or what {@link #listen(String)} was given; else null. */
    public String localAddress() {
        return localAddress;
    }

    /**
     * Joins the multicast group {@code group} ({@code rdma_join_multicast}): a UDP port space ID,
     * bound ({@link #bindAddr}). The join is reported by a {@link CmEvent.Type#MULTICAST_JOIN} event
     * whose {@link CmEvent#ud()} says how to send to the group (its address, QP number
     * {@link AhAttributes#MULTICAST_QPN}, Q_Key {@link QpInitAttributes#RDMA_UDP_QKEY}); for
     * {@link JoinFlag#FULLMEMBER} the ID's QP, if it has one by then, is attached when the event is
     * taken (as librdmacm does), and a {@link CmEvent.Type#MULTICAST_ERROR} event comes instead if that
     * fails (the device's limits). A send-only member attaches nothing. Destroying the QP detaches it;
     * closing the ID ends its joins.
     *
     * @throws RdmaException {@link Errno#EINVAL} for a TCP port space ID, one not bound, or an address
     *                       that is not multicast; {@link Errno#EADDRINUSE} if this ID joined the group
     *                       already; {@link Errno#EOPNOTSUPP} on a device without multicast;
     *                       {@link Errno#EBADF} if the ID was destroyed
     */
    public void joinMulticast(InetAddress group, JoinFlag flag) {
        CmEvents.begin();
        try {
            synchronized (device.lock) {
                checkAlive("joinMulticast");
                joins.join(group, flag);
            }
        } finally {
            CmEvents.end();
        }
    }

    /**
     * Leaves a group this ID joined ({@code rdma_leave_multicast}): its QP is detached (no more of the
     * group's datagrams arrive), and a join whose event was not yet taken is cancelled.
     *
     * @throws RdmaException {@link Errno#EADDRNOTAVAIL} if the ID has not joined {@code group};
     *                       {@link Errno#EBADF} if the ID was destroyed
     */
    public void leaveMulticast(InetAddress group) {
        synchronized (device.lock) {
            checkAlive("leaveMulticast");
            joins.leave(group);
        }
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
                if (portSpace == PortSpace.UDP) { // a UD QP has no connection: its QP is untouched
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
     * Sets the handler of this ID's connection events (see {@link CmEventHandler}); requests that
     * come through a listening ID inherit its handler. Null removes it.
     */
    public void onEvent(CmEventHandler h) {
        this.handler = h;
    }

    /**
     * The private data the peer sent ({@code event->param.conn.private_data}): on a request ID,
     * the requester's (from {@link #connect(String, byte[])}); on a connecting ID, the acceptor's
     * once it is {@code CONNECTED}, or the rejecter's once it is rejected. Empty when none came.
     * A copy.
     */
    public byte[] privateData() {
        return peerData.clone();
    }

    /**
     * The peer's address ({@code rdma_get_peer_addr}): on a connecting or connected ID, the address
     * it connected to; on a request ID, where the request came from (ucx: the requester's
     * {@code ip:port}; soft: the requesting device's name). Null on an ID that never connected.
     */
    public String peerAddress() {
        return peerAddress;
    }

    /**
     * Why this ID's connection request failed before the peer's application answered it, or null (none
     * failed, or the peer's application rejected it: {@link #privateData()} then holds what it sent):
     * the listener refused the handshake (the two sides' secrets differ, it serves another provider,
     * it cannot reach this process), went away, or the handshake broke. Set when the ID moves to
     * {@code DISCONNECTED} with a {@code REJECTED} event.
     */
    public String failureReason() {
        return failureReason;
    }

    /** Where this ID stands in connection setup. */
    public ConnState connState() {
        return conn;
    }

    /**
     * Waits until the connection is up ({@link ConnState#CONNECTED}), as an rdma_cm user blocks on
     * {@code rdma_get_cm_event} for {@code ESTABLISHED}: {@link #connect} returns while the request
     * is under way (a provider that connects processes answers from its own thread), and a send
     * posted before then is refused ({@code QueuePair.tryPostSend} says {@code NOT_CONNECTED}).
     * Returns at once if connected.
     *
     * @throws RdmaException {@link Errno#ETIMEDOUT} if not connected within {@code timeout} (the request
     *                       goes on; wait again or {@link #disconnect}); {@link Errno#ECONNREFUSED} if
     *                       the peer rejected the request or it failed ({@link #privateData()} holds a
     *                       rejecter's data); {@link Errno#ECONNRESET} if the connection was up and
     *                       ended; {@link Errno#EINVAL} on an ID with nothing under way (idle,
     *                       listening); {@link Errno#EINTR} if the thread was interrupted (its flag
     *                       stays set); {@link Errno#EBADF} if destroyed
     */
    public void awaitConnected(long timeout, TimeUnit unit) {
        checkAlive("awaitConnected");
        context.awaitConnected(timeout, unit);
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
