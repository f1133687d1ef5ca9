package io.regmem.registration.spi;

import io.regmem.registration.UdParam;

/**
 * What the verbs layer offers a provider for one connection-manager ID. The methods that report an
 * event queue it; the verbs layer runs the ID's handler outside every lock, on the thread that
 * made the call (or at once, when a provider's own thread reports it).
 */
public interface CmContext {

    /** The ID's name, for messages. */
    String name();

    /** True once the ID was destroyed. */
    boolean isDestroyed();

    /** The name of the ID's device. */
    String deviceName();

    /** The attached QP's context, or null. */
    QpContext qp();

    /** True while the ID's connection is being set up (CONNECTING: a request sent, or one to answer). */
    boolean isConnecting();

    /**
     * On a listening ID: a new request ID on this ID's device, in state {@code REQUESTED}, queued for
     * {@code getRequest()}, with this ID's handler, and a {@code CONNECT_REQUEST} event. Its provider
     * half is created by {@link ProviderDevice#createCmId} of this device; it is returned here.
     *
     * @param privateData what the requester sent with its connect (null: none); copied
     * @param peerAddress where the request came from, as {@code CmId.peerAddress()} reports it
     */
    CmContext newRequest(byte[] privateData, String peerAddress);

    /**
     * The requester's connection has its source now, {@code ip:port} (the one the listener sees as its
     * peer; rdma_cm binds a connecting ID to a source address and port): what {@code CmId.localAddress()}
     * reports from then on.
     */
    void sourceAddress(String hostPort);

    /**
     * The connection is up: state {@code CONNECTED} and an {@code ESTABLISHED} event.
     *
     * @param privateData on the active side, what the acceptor sent (copied); null on the passive side
     */
    void established(byte[] privateData);

    /**
     * The peer refused (or went away before accepting): state {@code DISCONNECTED} and a {@code REJECTED} event.
     *
     * @param privateData what the rejecter sent (copied), or null
     */
    void rejected(byte[] privateData);

    /**
     * The request failed before the peer's application answered it (the handshake broke, the listener
     * refused the HELLO, the listener went away): as {@link #rejected} with no private data, and the
     * ID's {@code failureReason()} says {@code why}; the REJECTED event's status is
     * {@code IB_CM_REJ_INVALID_SERVICE_ID}. {@link #failed(String, Failure)} reports the other ways a
     * request fails.
     */
    default void failed(String why) {
        failed(why, Failure.REFUSED);
    }

    /** How a request failed before the peer's application answered it. */
    enum Failure {
        /** The listener refused it or went away and said so: REJECTED, status {@code IB_CM_REJ_INVALID_SERVICE_ID}. */
        REFUSED,
        /** No answer came in time: UNREACHABLE, status {@code -ETIMEDOUT}. */
        UNREACHABLE,
        /** The exchange broke (the link closed or carried something wrong): CONNECT_ERROR, status {@code -ECONNRESET}. */
        BROKEN
    }

    /** As {@link #failed(String)}, reported as {@code how} says. */
    void failed(String why, Failure how);

    /** The peer disconnected: state {@code DISCONNECTED} and a {@code DISCONNECTED} event, if it was connected. */
    void disconnected();

    /** The provider half of this ID. */
    ProviderCm provider();

    /** What the provider attached ({@link #attach}), or null. */
    Object attachment();

    /** Attaches the provider's own state. */
    void attach(Object state);

    /**
     * For an ID of the UDP port space: how a peer reaches its UD QP ({@code rdma_ud_param}: the
     * device's datagram address, the QP's number and Q_Key); null for a TCP one or without a QP.
     */
    UdParam datagramParam();

    /** True for an ID of the UDP port space (its QP, if any, is UD; its connect is the UD address exchange). */
    boolean udpPortSpace();

    /**
     * The UD address exchange this (active) ID asked for completed: it reports ESTABLISHED carrying
     * {@code peer}, the accepting side's UD parameters, and {@code privateData}.
     */
    void establishedDatagram(byte[] privateData, UdParam peer);

    /** The UD address exchange this (passive) ID answered completed: no event (as SIDR's passive side). */
    void answeredDatagram();

    /** The ID's {@code REUSEADDR} option: true (the default) to set {@code SO_REUSEADDR} on a socket it binds. */
    boolean reuseAddress();
}
