package io.regmem.registration;

/**
 * What {@link QueuePair#query()} reports ({@code ibv_query_qp}: {@code ibv_qp_attr} and its
 * {@code ibv_qp_cap}): the QP's state, the capacities it was created with, and its retry settings.
 *
 * @param state         the current state (RTS, ERROR, ...: {@code qp_state})
 * @param maxSendWr     send queue depth, rw contexts' room included ({@code cap.max_send_wr})
 * @param maxRecvWr     receive queue depth ({@code cap.max_recv_wr})
 * @param maxSendSge    SGEs per send request ({@code cap.max_send_sge})
 * @param maxRecvSge    SGEs per receive request ({@code cap.max_recv_sge})
 * @param maxInlineData bytes a request may carry inline ({@code cap.max_inline_data})
 * @param rnrRetry      RNR retry count, 7 for ever ({@code rnr_retry})
 * @param minRnrTimer   the RNR timer code this QP gives its peers ({@code min_rnr_timer})
 * @param signalAll     every send request completes with a CQE ({@code sq_sig_all})
 * @param outstandingSends   send slots in use (posted, or completed and not yet polled)
 * @param outstandingRecvs   receive slots in use
 */
public record QpAttributes(QueuePair.State state, int maxSendWr, int maxRecvWr, int maxSendSge, int maxRecvSge,
                           int maxInlineData, int rnrRetry, int minRnrTimer, boolean signalAll, int outstandingSends,
                           int outstandingRecvs) {
}
