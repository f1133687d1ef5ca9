package io.regmem.registration;

/**
 * A connection-manager event ({@code struct rdma_cm_event}), delivered to the
 * {@link CmEventHandler} of the ID it concerns.
 *
 * @param type    what happened
 * @param id      the ID the event is for (for {@link Type#CONNECT_REQUEST}: the new request ID)
 * @param listener for {@link Type#CONNECT_REQUEST}: the listening ID; else null
 */
public record CmEvent(Type type, CmId id, CmId listener) {

    /** Event types ({@code enum rdma_cm_event_type}), the ones the soft fabric produces. */
    public enum Type {
        /** A peer asks to connect: accept or reject the new ID. */
        CONNECT_REQUEST,
        /** The connection is up: both QPs are ready to send. */
        ESTABLISHED,
        /** The peer rejected the request, or its listener went away. */
        REJECTED,
        /** The connection is down: the QP is in the error state. */
        DISCONNECTED
    }
}
