package io.regmem.registration;

/**
 * A reusable work completion ({@code struct ib_wc}): {@link CompletionQueue#poll} fills the
 * caller's array of these, so polling allocates nothing.
 */
public final class WorkCompletion {
    long wrId;
    WcStatus status = WcStatus.SUCCESS;
    Opcode opcode = Opcode.SEND;
    long byteLen;
    QueuePair qp;
    int invalidatedRkey;
    int immData;
    boolean withImm;
    boolean withInv;
    /** Which queue of {@link #qp} the request came from, and its sequence number there: polling retires it. */
    boolean fromRecvQueue;
    long queueSeq;
    /** A datagram's sender: its QP number and its port's address (the GRH's source); null for others. */
    int srcQp;
    AhAttributes source;

    /** A blank completion, for a poll array. */
    public WorkCompletion() {
    }

    /** The id of the work request. */
    public long wrId() {
        return wrId;
    }

    /** How it ended. */
    public WcStatus status() {
        return status;
    }

    /** What it was: the send opcode, or RECV / RECV_RDMA_WITH_IMM for receives. */
    public Opcode opcode() {
        return opcode;
    }

    /** Bytes received (receives) or transferred. */
    public long byteLen() {
        return byteLen;
    }

    /** The queue pair the request was posted on. */
    public QueuePair qp() {
        return qp;
    }

    /** The key a SEND_WITH_INV invalidated here, if {@link #withInvalidate()}. */
    public int invalidatedRkey() {
        return invalidatedRkey;
    }

    /** The immediate, if {@link #withImm()}. */
    public int immData() {
        return immData;
    }

    /** True if the completion carries an immediate. */
    public boolean withImm() {
        return withImm;
    }

    /** True if the peer invalidated one of our keys with this message. */
    public boolean withInvalidate() {
        return withInv;
    }

    /**
     * True if a GRH was received ({@code IBV_WC_GRH}): every receive of an unreliable-datagram QP on
     * a RoCE-style port, whose buffer's first 40 bytes then hold it (counted in {@link #byteLen()}).
     */
    public boolean withGrh() {
        return source != null;
    }

    /** The sending QP's number ({@code src_qp}) of a datagram received by a UD QP; else 0. */
    public int srcQp() {
        return srcQp;
    }

    /**
     * The sender's address of a datagram received by a UD QP (the GRH's source GID, and its port
     * where the provider has one): {@link ProtectionDomain#createAhFromWc} answers it; else null.
     */
    public AhAttributes source() {
        return source;
    }

    @Override
    public String toString() {
        return "WorkCompletion[wrId " + wrId + ", " + status + ", " + opcode + ", " + byteLen + " bytes"
                + (withImm ? ", imm " + immData : "") + (withInv ? ", invalidated 0x" + Integer.toHexString(invalidatedRkey) : "")
                + (source != null ? ", from QP 0x" + Integer.toHexString(srcQp) + " at " + source.dgid().getHostAddress() : "")
                + "]";
    }
}
