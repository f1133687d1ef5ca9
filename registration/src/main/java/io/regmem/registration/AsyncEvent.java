package io.regmem.registration;

/**
 * An asynchronous event of a device ({@code struct ibv_async_event}): something that went wrong
 * outside any work completion, taken with {@link RdmaDevice#getAsyncEvent} or
 * {@link RdmaDevice#pollAsyncEvent()}.
 *
 * @param type        what happened
 * @param resource    the object it happened to (the CQ, the QP, the SRQ)
 * @param description a sentence naming the object and the cause
 */
public record AsyncEvent(Type type, RdmaResource resource, String description) {

    /** The kinds of asynchronous events regmem raises ({@code enum ibv_event_type}). */
    public enum Type {
        /**
         * A CQ overran ({@code IBV_EVENT_CQ_ERR}): a completion found it full and was lost; the QP that
         * made it moved to the error state. Raised once per CQ.
         */
        CQ_ERR,
        /**
         * A QP moved to the error state without a work completion saying why ({@code IBV_EVENT_QP_FATAL}):
         * its completion was lost to a CQ overrun.
         */
        QP_FATAL,
        /**
         * A shared receive queue fell below its armed limit ({@code IBV_EVENT_SRQ_LIMIT_REACHED}): a QP took
         * a receive and fewer than {@link SharedReceiveQueue#armLimit} remain queued; the limit is disarmed.
         * The resource is the SRQ.
         */
        SRQ_LIMIT_REACHED,
        /**
         * A QP using a shared receive queue is in the error state and holds no receive of it any more
         * ({@code IBV_EVENT_QP_LAST_WQE_REACHED}): its flushed completions are all made. Raised once per QP.
         */
        QP_LAST_WQE_REACHED,
        /**
         * Communication established ({@code IBV_EVENT_COMM_EST}): a QP received before its CM said the
         * connection was up. regmem's providers never raise it (a connection is up before either QP can
         * receive); it is the notice {@link CmId#notify} passes on, as {@code rdma_notify} does.
         */
        COMM_EST
    }
}
