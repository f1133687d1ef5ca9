package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.spi.ProviderCm;
import java.net.InetAddress;
import java.util.ArrayDeque;
import java.util.concurrent.TimeUnit;

/**
 * What a {@link CmId} is beside its connection's steps: its state, what the peer sent, its port
 * space, its multicast joins and the address resolution steps. Only {@link CmId} extends it; its
 * public methods are {@link CmId}'s.
 */
abstract sealed class CmIdBase extends RdmaResource permits CmId {
    private final PortSpace portSpace;
    volatile CmId.ConnState conn = CmId.ConnState.IDLE;
    /** Set once the connection was established (before {@link #conn} says CONNECTED). */
    volatile boolean wasConnected;
    /** What the peer sent with its connection request, accept or reject (never null). */
    volatile byte[] peerData = CmId.NO_DATA;
    /** Why the request failed on its way (not the peer's rejection), or null. */
    volatile String failureReason;
    /** The peer's address: what {@link CmId#connect} was given, or what the provider reported for a request. */
    volatile String peerAddress;
    /** The local address: what {@link CmId#bindAddr} bound, or what {@link CmId#listen(String)} was given; null before. */
    volatile String localAddress;
    /** Requests that came through this listening ID and were not yet taken or answered. Guarded by itself. */
    final ArrayDeque<CmId> requests = new ArrayDeque<>();
    /** For a request: the listener it came through. */
    CmId listener;
    volatile CmEventHandler handler;
    /** The provider's half. */
    ProviderCm provider;
    /** What the provider sees of this ID. */
    final CmCore context = new CmCore((CmId) this);
    /** The multicast groups it joined (UDP port space). */
    final CmJoins joins = new CmJoins((CmId) this);


    /**
     * The local address: what {@link CmId#bindAddr} bound (with the port picked), what
     * {@link CmId#listen(String)} was given, or, once a connect on shm or ucx reached its listener, the
     * connection's source {@code ip:port} (the listener's request reports it as its
     * {@link #peerAddress()}); else null (an ID that did none of these, or that connected within its JVM).
     */
    public String localAddress() {
        return localAddress;
    }

    /**
     * Joins the multicast group {@code group} ({@code rdma_join_multicast}): a UDP port space ID,
     * bound ({@link CmId#bindAddr}). The join is reported by a {@link CmEvent.Type#MULTICAST_JOIN} event
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
     * Sets the handler of this ID's connection events (see {@link CmEventHandler}); requests that
     * come through a listening ID inherit its handler. Null removes it.
     */
    public void onEvent(CmEventHandler h) {
        this.handler = h;
    }

    /**
     * The private data the peer sent ({@code event->param.conn.private_data}): on a request ID,
     * the requester's (from {@link CmId#connect(String, byte[])}); on a connecting ID, the acceptor's
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
     * {@code DISCONNECTED} with a {@code REJECTED}, {@code UNREACHABLE} or {@code CONNECT_ERROR} event.
     */
    public String failureReason() {
        return failureReason;
    }

    /** Where this ID stands in connection setup. */
    public CmId.ConnState connState() {
        return conn;
    }

    /**
     * Waits until the connection is up ({@link CmId.ConnState#CONNECTED}), as an rdma_cm user blocks on
     * {@code rdma_get_cm_event} for {@code ESTABLISHED}: {@link CmId#connect} returns while the request
     * is under way (a provider that connects processes answers from its own thread), and a send
     * posted before then is refused ({@code QueuePair.tryPostSend} says {@code NOT_CONNECTED}).
     * Returns at once if connected.
     *
     * @throws RdmaException {@link Errno#ETIMEDOUT} if not connected within {@code timeout} (the request
     *                       goes on; wait again or {@link CmId#disconnect}); {@link Errno#ECONNREFUSED} if
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


    /** The destination {@link #resolveAddr} resolved (the provider's form), or null. */
    volatile String resolved;

    /** The destination {@link #resolveAddr} resolved (what {@link CmId#connect()} connects to), or null. */
    public String resolvedAddress() {
        return resolved;
    }

    /**
     * Resolves the destination {@code dst} ({@code rdma_resolve_addr}): the first of rdma_cm's three
     * steps to a connection ({@link #resolveRoute}, then {@link CmId#connect()}); {@link CmId#connect(String)}
     * does all three in one. The result is an event: {@link CmEvent.Type#ADDR_RESOLVED} (the ID moves
     * to {@link CmId.ConnState#ADDR_RESOLVED}), or {@link CmEvent.Type#ADDR_ERROR} with the negated
     * errno as its status (the ID stays as it was): on shm and ucx a host that does not resolve is
     * {@code -EHOSTUNREACH}; soft names resolve as they are. On a UDP port space ID, {@code src} binds
     * it first (as {@link CmId#bindAddr}) and {@code dst} may be a multicast group, to join next.
     *
     * @param src       the local address to bind (UDP port space IDs only), or null
     * @param timeoutMs how long the resolution may take, positive (resolution here completes within the call)
     * @throws RdmaException {@link Errno#EINVAL} for a null or unreadable {@code dst}, a non-positive
     *                       timeout, a {@code src} on a TCP port space ID (a connection's source address
     *                       is the system's choice), or an ID that is not idle or bound;
     *                       {@link Errno#EBADF} if the ID was destroyed
     */
    public void resolveAddr(String src, String dst, long timeoutMs) {
        CmEvents.begin();
        try {
            synchronized (device.lock) {
                checkAlive("resolveAddr");
                if (dst == null || timeoutMs <= 0 || (conn != CmId.ConnState.IDLE && conn != CmId.ConnState.BOUND)) {
                    throw new RdmaException(Errno.EINVAL, this + ": resolveAddr(" + src + ", " + dst + ", " + timeoutMs
                            + " ms) in state " + conn + " needs a destination, a positive timeout and an idle or bound ID");
                }
                if (src != null && portSpace != PortSpace.UDP) {
                    throw new RdmaException(Errno.EINVAL, this + ": resolveAddr with a source address on a TCP port space "
                            + "ID; a connection's source address is the system's choice (pass null)");
                }
                String to;
                try {
                    to = provider.resolve(dst);
                } catch (RdmaException e) {
                    if (e.errno() == Errno.EINVAL) {
                        throw e;
                    }
                    CmEvents.post(new CmEvent(CmEvent.Type.ADDR_ERROR, (CmId) this, null, -e.errno().value(), null, null));
                    return;
                }
                if (src != null && conn == CmId.ConnState.IDLE) {
                    localAddress = provider.bind(src);
                }
                resolved = to;
                conn = CmId.ConnState.ADDR_RESOLVED;
                CmEvents.post(new CmEvent(CmEvent.Type.ADDR_RESOLVED, (CmId) this, null));
            }
        } finally {
            CmEvents.end();
        }
    }

    /**
     * Resolves the route to the destination {@link #resolveAddr} resolved ({@code rdma_resolve_route}):
     * a {@link CmEvent.Type#ROUTE_RESOLVED} event (the ID moves to
     * {@link CmId.ConnState#ROUTE_RESOLVED}), or {@link CmEvent.Type#ROUTE_ERROR} with the negated errno
     * (shm: {@code -EHOSTUNREACH} for a host that is not this one; the ID stays address-resolved).
     *
     * @throws RdmaException {@link Errno#EINVAL} unless the address is resolved, or for a non-positive
     *                       timeout; {@link Errno#EBADF} if the ID was destroyed
     */
    public void resolveRoute(long timeoutMs) {
        CmEvents.begin();
        try {
            synchronized (device.lock) {
                checkAlive("resolveRoute");
                if (conn != CmId.ConnState.ADDR_RESOLVED || timeoutMs <= 0) {
                    throw new RdmaException(Errno.EINVAL, this + ": resolveRoute(" + timeoutMs + " ms) in state " + conn
                            + " needs a resolved address (resolveAddr first) and a positive timeout");
                }
                try {
                    provider.route(resolved);
                } catch (RdmaException e) {
                    CmEvents.post(new CmEvent(CmEvent.Type.ROUTE_ERROR, (CmId) this, null, -e.errno().value(), null, null));
                    return;
                }
                conn = CmId.ConnState.ROUTE_RESOLVED;
                CmEvents.post(new CmEvent(CmEvent.Type.ROUTE_RESOLVED, (CmId) this, null));
            }
        } finally {
            CmEvents.end();
        }
    }

    /**
     * Tells the CM that the connection is in use ({@code rdma_notify(id, IBV_EVENT_COMM_EST)}), as a
     * passive side whose QP received before the CM's last message would. regmem's providers establish
     * a connection before either side's QP can receive, so there is never one to establish here.
     *
     * @throws RdmaException {@link Errno#EISCONN} if the ID is connected; {@link Errno#EINVAL} for any
     *                       other event than {@code COMM_EST}, or an ID with no connection under way;
     *                       {@link Errno#EBADF} if the ID was destroyed
     */
    public void notify(AsyncEvent.Type event) {
        synchronized (device.lock) {
            checkAlive("notify");
            if (event != AsyncEvent.Type.COMM_EST) {
                throw new RdmaException(Errno.EINVAL, this + ": notify(" + event + "): only COMM_EST is a CM notice");
            }
            if (conn == CmId.ConnState.CONNECTED) {
                throw new RdmaException(Errno.EISCONN, this + ": notify(COMM_EST): the connection is established already");
            }
            throw new RdmaException(Errno.EINVAL, this + ": notify(COMM_EST) in state " + conn
                    + ": no connection is waiting to be established");
        }
    }

    /**
     * The source and destination GIDs of this ID ({@code rdma_read_gids}), as IP addresses (RoCE's
     * GIDs; {@link AhAttributes#gid()} gives an address's 16 bytes, IPv4-mapped): the source is the
     * local address ({@link CmId#bindAddr}'s or {@link CmId#listen(String)}'s host, a connection's source
     * ({@link #localAddress()}), or on a device that
     * carries datagrams its {@link RdmaDevice#datagramAddress()}), the destination the peer's or the
     * resolved destination's host. A host given as a name is not looked up: soft's names are this
     * JVM's fabric, 127.0.0.1; a host name of shm or ucx gives null.
     *
     * @throws RdmaException {@link Errno#EBADF} if the ID was destroyed
     */
    public GidPair readGids() {
        checkAlive("readGids");
        InetAddress source = device.supportsDatagrams() ? device.datagramAddress().dgid() : hostOf(localAddress);
        if (source == null) {
            source = InetAddress.getLoopbackAddress();
        }
        String to = peerAddress != null ? peerAddress : resolved;
        return new GidPair(source, to == null ? null : hostOf(to));
    }

    /** An address's host as an IP address: a literal's, soft's names' 127.0.0.1, else null. */
    private InetAddress hostOf(String address) {
        if (address == null) {
            return null;
        }
        int colon = address.lastIndexOf(':');
        String host = colon > 0 && address.indexOf(':') == colon ? address.substring(0, colon) : address;
        if (host.startsWith("[") && host.endsWith("]")) {
            host = host.substring(1, host.length() - 1);
        }
        try {
            return InetAddress.ofLiteral(host);
        } catch (IllegalArgumentException notALiteral) {
            return device.supportsDatagrams() ? InetAddress.getLoopbackAddress() : null; // soft's names: this JVM
        }
    }

    /** {@link CmOption#REUSEADDR} and {@link CmOption#TOS}'s values. */
    volatile int reuseAddress = 1;
    volatile int typeOfService;

    /**
     * Sets an option of this ID ({@code rdma_set_option}; {@link CmOption#TOS} is
     * {@code rdma_set_service_type}); see {@link CmOption} for what each does on each provider.
     *
     * @throws RdmaException {@link Errno#EINVAL} for a value out of the option's range, a null option, or
     *                       {@code REUSEADDR}/{@code AFONLY} on an ID no longer idle; {@link Errno#EOPNOTSUPP}
     *                       for {@code AFONLY} 1 and for {@code ACK_TIMEOUT}; {@link Errno#EBADF} if the ID
     *                       was destroyed. A refused call changes nothing.
     */
    public void setOption(CmOption option, int value) {
        synchronized (device.lock) {
            checkAlive("setOption");
            if (option == null) {
                throw new RdmaException(Errno.EINVAL, this + ": setOption needs an option, got null");
            }
            switch (option) {
                case REUSEADDR, AFONLY -> {
                    if (value != 0 && value != 1) {
                        throw new RdmaException(Errno.EINVAL, this + ": " + option + " is 0 or 1, got " + value);
                    }
                    if (conn != CmId.ConnState.IDLE) {
                        throw new RdmaException(Errno.EINVAL, this + ": " + option + " in state " + conn
                                + ": it is set before the ID binds");
                    }
                    if (option == CmOption.AFONLY && value == 1) {
                        throw new RdmaException(Errno.EOPNOTSUPP, this + ": AFONLY 1 (IPv6 only) is not offered: the JDK's "
                                + "sockets regmem binds are dual-stack");
                    }
                    if (option == CmOption.REUSEADDR) {
                        reuseAddress = value;
                    }
                }
                case TOS -> {
                    if (value < 0 || value > 255) {
                        throw new RdmaException(Errno.EINVAL, this + ": TOS is 0 to 255, got " + value);
                    }
                    typeOfService = value;
                }
                case ACK_TIMEOUT -> throw new RdmaException(Errno.EOPNOTSUPP, this + ": ACK_TIMEOUT: provider "
                        + device.providerName() + " has no transport ACK timer to set");
                default -> throw new IllegalStateException(option.toString());
            }
        }
    }

    /** An option's value now ({@link #setOption}); {@code AFONLY} is 0 and {@code ACK_TIMEOUT} -1 (not offered). */
    public int option(CmOption option) {
        if (option == null) {
            throw new RdmaException(Errno.EINVAL, this + ": option needs an option, got null");
        }
        return switch (option) {
            case REUSEADDR -> reuseAddress;
            case AFONLY -> 0;
            case TOS -> typeOfService;
            case ACK_TIMEOUT -> -1;
        };
    }

    CmIdBase(RdmaDevice device, PortSpace portSpace) {
        super(device, "CmId", null);
        this.portSpace = portSpace;
    }

    /** The port space the ID was created in ({@link RdmaDevice#createCmId(PortSpace)}): it decides its QP's type. */
    public PortSpace portSpace() {
        return portSpace;
    }
}
