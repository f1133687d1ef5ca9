package io.regmem.registration;

/** A queue pair's transport type ({@code enum ibv_qp_type}), decided by its CM ID's {@link PortSpace}. */
public enum QpType {
    /** {@code IBV_QPT_RC}: reliable connected, one peer, every verb. */
    RC,
    /**
     * {@code IBV_QPT_UD}: unreliable datagram. Each send names its destination (an
     * {@link AddressHandle}, a QP number and a Q_Key); only SEND and SEND_WITH_IMM; every receive
     * buffer starts with the 40-byte GRH area; a datagram that finds no receive, too small a one or
     * the wrong Q_Key is dropped and counted, never an error at either end.
     */
    UD
}
