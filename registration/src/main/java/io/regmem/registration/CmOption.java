package io.regmem.registration;

/** A CM ID's options ({@code rdma_set_option}, {@code rdma_set_service_type}), set with {@link CmId#setOption}. */
public enum CmOption {
    /**
     * {@code RDMA_OPTION_ID_REUSEADDR} (0 or 1; before {@link CmId#bindAddr} or {@link CmId#listen(String)}):
     * 1, regmem's default, lets a listener's port be bound again while connections it accepted linger
     * closed (TIME_WAIT); 0 refuses that with {@code EADDRINUSE}. shm and ucx set it on the listening
     * socket; soft's addresses are names, which it does not concern.
     */
    REUSEADDR,
    /**
     * {@code RDMA_OPTION_ID_AFONLY} (0 or 1; before binding): 0, the default, binds an IPv6 wildcard for
     * IPv4 too (the JDK's sockets are dual-stack); 1, IPv6 only, is not offered ({@code EOPNOTSUPP}).
     */
    AFONLY,
    /**
     * {@code RDMA_OPTION_ID_TOS}, {@code rdma_set_service_type} (0 to 255, any time): the traffic class of
     * the ID's traffic. On soft, the GRH traffic class (the IPv4 header's TOS byte) of its UD QP's
     * datagrams from then on; shm and ucx carry no IP header of regmem's on their data paths, and
     * keep the value for {@link CmId#option} only.
     */
    TOS,
    /**
     * {@code RDMA_OPTION_ID_ACK_TIMEOUT}: the local ACK timeout of an RC QP's transport. No provider here
     * has a transport ACK timer (soft executes in process, shm in shared memory, ucx by UCX's own
     * timeouts): refused with {@code EOPNOTSUPP}, never accepted and ignored.
     */
    ACK_TIMEOUT
}
