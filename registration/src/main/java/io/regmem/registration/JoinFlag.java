package io.regmem.registration;

/** How an ID joins a multicast group ({@code enum rdma_cm_join_mc_join_state}). */
public enum JoinFlag {
    /** {@code RDMA_MC_JOIN_FLAG_FULLMEMBER}: the ID's QP is attached, and receives the group's datagrams. */
    FULLMEMBER,
    /**
     * {@code RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER}: the ID sends to the group and receives nothing from
     * it; no QP is attached.
     */
    SENDONLY_FULLMEMBER
}
