package io.regmem.registration;

/**
 * Work request and completion opcodes ({@code enum ib_wr_opcode}, {@code enum ib_wc_opcode}).
 */
public enum Opcode {
    /** Send a message into the peer's next posted receive. */
    SEND,
    /** Send, and invalidate the peer's MR named by {@link WorkRequest#invalidateRkey()}. */
    SEND_WITH_INV,
    /**
     * Send with a 32-bit immediate ({@link WorkRequest#immData}): the peer's receive completes as
     * {@link #RECV} with {@link WorkCompletion#withImm()} and the immediate ({@code IBV_WR_SEND_WITH_IMM}).
     */
    SEND_WITH_IMM,
    /** Write local SGEs into the peer's memory at (remote address, rkey). */
    RDMA_WRITE,
    /** RDMA WRITE, then consume a peer receive to deliver a 32-bit immediate. */
    RDMA_WRITE_WITH_IMM,
    /** Read the peer's memory at (remote address, rkey) into local SGEs. */
    RDMA_READ,
    /** iWARP: RDMA READ, then invalidate the local sink MR (the first SGE's). */
    RDMA_READ_WITH_INV,
    /**
     * Compare and swap ({@code IBV_WR_ATOMIC_CMP_AND_SWP}): if the 8 bytes at (remote address, rkey)
     * equal {@link WorkRequest#compareAdd()}, replace them with {@link WorkRequest#swap()}; the value
     * found is written into the request's one 8-byte SGE. The remote address must be 8-byte aligned
     * and its region grant {@link Access#REMOTE_ATOMIC}.
     */
    ATOMIC_CMP_AND_SWP,
    /**
     * Fetch and add ({@code IBV_WR_ATOMIC_FETCH_AND_ADD}): add {@link WorkRequest#compareAdd()} to the
     * 8 bytes at (remote address, rkey); the value found before is written into the request's one
     * 8-byte SGE. Alignment and rights as {@link #ATOMIC_CMP_AND_SWP}.
     */
    ATOMIC_FETCH_AND_ADD,
    /** Invalidate a local fast-reg MR by its key. */
    LOCAL_INV,
    /** Register a fast-reg MR's mapped pages with a new key byte and access rights. */
    REG_MR,
    /** Register an integrity MR's data and protection pages with its signature attributes. */
    REG_MR_INTEGRITY,
    /** Completion opcode of a receive consumed by a SEND. */
    RECV,
    /** Completion opcode of a receive consumed by an RDMA WRITE with immediate. */
    RECV_RDMA_WITH_IMM,
    /**
     * Bind a type-2 memory window ({@code IBV_WR_BIND_MW}, {@link WorkRequest#bindMw}): executed in
     * order with the QP's other requests; the window then grants the rights on the range under the
     * request's key. Completes BIND_MW, or {@link WcStatus#MW_BIND_ERR}.
     */
    BIND_MW;

    /** True for the two atomics. */
    public boolean isAtomic() {
        return this == ATOMIC_CMP_AND_SWP || this == ATOMIC_FETCH_AND_ADD;
    }

    /** True for the opcodes that may be posted to a send queue. */
    public boolean isSend() {
        return ordinal() <= REG_MR_INTEGRITY.ordinal() || this == BIND_MW;
    }
}
