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

    /*
     * The references below are stored only when they change: a CQ's entries and a poller's array see the
     * same QP, status, opcode and source again and again, and every reference store pays the collector's
     * barrier.
     */

    /** Fills this CQ entry (the CQ's {@code add}, its producer's lock held). */
    void fill(QueuePair qp, boolean recv, long seq, long wrId, WcStatus status, Opcode op, long bytes, boolean withImm, int imm,
              boolean withInv, int invRkey, int srcQp, AhAttributes source) {
        if (this.qp != qp) {
            this.qp = qp;
        }
        this.fromRecvQueue = recv;
        this.queueSeq = seq;
        this.wrId = wrId;
        if (this.status != status) {
            this.status = status;
        }
        if (this.opcode != op) {
            this.opcode = op;
        }
        this.byteLen = bytes;
        this.withImm = withImm;
        this.immData = withImm ? imm : 0;
        this.withInv = withInv;
        this.invalidatedRkey = withInv ? invRkey : 0;
        this.srcQp = srcQp;
        if (this.source != source) {
            this.source = source;
        }
    }

    /** Copies CQ entry {@code from} into this one of a poller's array. */
    void copyFrom(WorkCompletion from) {
        wrId = from.wrId;
        if (status != from.status) {
            status = from.status;
        }
        if (opcode != from.opcode) {
            opcode = from.opcode;
        }
        byteLen = from.byteLen;
        if (qp != from.qp) {
            qp = from.qp;
        }
        invalidatedRkey = from.invalidatedRkey;
        immData = from.immData;
        withImm = from.withImm;
        withInv = from.withInv;
        fromRecvQueue = from.fromRecvQueue;
        queueSeq = from.queueSeq;
        srcQp = from.srcQp;
        if (source != from.source) {
            source = from.source;
        }
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
