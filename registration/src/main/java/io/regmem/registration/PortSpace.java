package io.regmem.registration;

/**
 * The port space a CM ID is created in ({@code enum rdma_port_space}): it decides what kind of queue
 * pair the ID carries.
 */
public enum PortSpace {
    /** {@code RDMA_PS_TCP}: reliable-connected QPs ({@link QpType#RC}), the default. */
    TCP,
    /**
     * {@code RDMA_PS_UDP}: unreliable-datagram QPs ({@link QpType#UD}), which send to address
     * handles and join multicast groups.
     */
    UDP
}
