package io.regmem.registration;

/**
 * What an unreliable-datagram peer is reached by ({@code struct rdma_ud_param}), as a
 * {@link CmEvent.Type#MULTICAST_JOIN} event carries it: the address handle's attributes, the remote
 * QP number ({@link AhAttributes#MULTICAST_QPN} for a group) and the remote Q_Key. Make an
 * {@link AddressHandle} of {@link #ah()} and send with {@code WorkRequest.ud(ah, qpNum, qkey)}.
 *
 * @param ah    where the datagrams go
 * @param qpNum the remote QP number
 * @param qkey  the remote Q_Key
 */
public record UdParam(AhAttributes ah, int qpNum, int qkey) {
}
