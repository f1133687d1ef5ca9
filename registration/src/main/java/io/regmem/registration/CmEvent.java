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

    /** An event with status 0 and no datagram parameters. */
    public CmEvent(Type type, CmId id, CmId listener) {
        this(type, id, listener, 0, null, null);
    }

    /** Event types ({@code enum rdma_cm_event_type}), the ones the soft fabric produces. */
    public enum Type {
        /** A peer asks to connect: accept or reject the new ID. */
        CONNECT_REQUEST,
        /** The connection is up: both QPs are ready to send. */
        ESTABLISHED,
        /** The peer rejected the request, or its listener went away. */
        REJECTED,
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
