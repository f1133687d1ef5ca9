package io.regmem.registration;

/**
 * An asynchronous event of a device ({@code struct ibv_async_event}): something that went wrong
 * outside any work completion, taken with {@link RdmaDevice#getAsyncEvent} or
 * {@link RdmaDevice#pollAsyncEvent()}.
 *
 * @param type        what happened
 * @param resource    the object it happened to (the CQ, the QP)
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
        QP_FATAL
    }
}
