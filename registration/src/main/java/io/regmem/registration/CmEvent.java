package io.regmem.registration;

import java.net.InetAddress;

/**
 * A connection-manager event ({@code struct rdma_cm_event}), delivered to the
 * {@link CmEventHandler} of the ID it concerns.
 *
 * @param type     what happened
 * @param id       the ID the event is for (for {@link Type#CONNECT_REQUEST}: the new request ID)
 * @param listener for {@link Type#CONNECT_REQUEST}: the listening ID; else null
 * @param status   the event's status ({@code event->status}): 0, or for an error event the negated
 *                 {@code errno} ({@link Type#MULTICAST_ERROR}: why the join failed)
 * @param ud       for {@link Type#MULTICAST_JOIN}: how to reach the group ({@code event->param.ud});
 *                 else null
 * @param group    for the multicast events: the group's address; else null
 */
public record CmEvent(Type type, CmId id, CmId listener, int status, UdParam ud, InetAddress group) {

    /** A REJECTED event's status when the peer's application rejected ({@code IB_CM_REJ_CONSUMER_DEFINED}). */
    public static final int REJECT_CONSUMER_DEFINED = 28;
    /**
     * A REJECTED event's status when the request failed before the peer's application answered: nobody
     * listens there any more, or the listener refused the handshake ({@code IB_CM_REJ_INVALID_SERVICE_ID}).
     */
    public static final int REJECT_INVALID_SERVICE_ID = 8;

    /**
     * What a REJECTED event's status means, in words ({@code rdma_reject_msg}): "consumer defined",
     * "invalid service ID"; else "unrecognized reason". Null for other events.
     */
    public String rejectMessage() {
        if (type != Type.REJECTED) {
            return null;
        }
        return switch (status) {
            case REJECT_CONSUMER_DEFINED -> "consumer defined";
            case REJECT_INVALID_SERVICE_ID -> "invalid service ID";
            default -> "unrecognized reason";
        };
    }

    /**
     * The private data the rejecting application sent ({@code rdma_consumer_reject_data}): for a
     * REJECTED event whose status is {@link #REJECT_CONSUMER_DEFINED}, a copy of it (empty when it
     * sent none); null for any other event or reason.
     */
    public byte[] consumerRejectData() {
        return type == Type.REJECTED && status == REJECT_CONSUMER_DEFINED ? id.privateData() : null;
    }

    /** An event with status 0 and no datagram parameters. */
    public CmEvent(Type type, CmId id, CmId listener) {
        this(type, id, listener, 0, null, null);
    }

    /** Event types ({@code enum rdma_cm_event_type}), the ones regmem's providers produce. */
    public enum Type {
        /** {@link CmId#resolveAddr} resolved the destination. */
        ADDR_RESOLVED,
        /** {@link CmId#resolveAddr} failed: {@link CmEvent#status()} is the negated errno. */
        ADDR_ERROR,
        /** {@link CmId#resolveRoute} resolved the route. */
        ROUTE_RESOLVED,
        /** {@link CmId#resolveRoute} failed: {@link CmEvent#status()} is the negated errno. */
        ROUTE_ERROR,
        /** A peer asks to connect: accept or reject the new ID. */
        CONNECT_REQUEST,
        /** The connection is up: both QPs are ready to send. */
        ESTABLISHED,
        /**
         * The peer rejected the request, or it failed before the peer's application answered it:
         * {@link CmEvent#status()} is the reason ({@link #REJECT_CONSUMER_DEFINED} for the application's own
         * reject; {@link CmEvent#rejectMessage()} says it in words).
         */
        REJECTED,
        /**
         * The request got no answer in time (the handshake's time, ucx's and shm's {@code handshakeMillis}):
         * {@link CmEvent#status()} {@code -ETIMEDOUT}; the ID is DISCONNECTED, {@link CmId#failureReason()} says more.
         */
        UNREACHABLE,
        /**
         * The exchange that sets the connection up broke (the link closed without an answer, or carried
         * something that is not a regmem handshake): {@link CmEvent#status()} {@code -ECONNRESET}; the
         * ID is DISCONNECTED, {@link CmId#failureReason()} says more.
         */
        CONNECT_ERROR,
        /** The connection is down: the QP is in the error state. */
        DISCONNECTED,
        /**
         * A {@link CmId#joinMulticast} completed: the ID's QP (a full member's) is attached to the group
         * from the moment this event is taken, and {@link CmEvent#ud()} says how to send to it.
         */
        MULTICAST_JOIN,
        /** A join failed, or a joined group was lost: {@link CmEvent#status()} says why; the QP is detached. */
        MULTICAST_ERROR
    }
}
