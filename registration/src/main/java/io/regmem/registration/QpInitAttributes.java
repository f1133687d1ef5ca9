package io.regmem.registration;

import java.util.Objects;

/**
 * What a queue pair is created with ({@code struct ib_qp_init_attr}): its completion queues and
 * queue limits. Defaults: 128 send and receive WRs, 1 SGE each way, every send signaled, no rw contexts.
 */
public final class QpInitAttributes {
    private CompletionQueue sendCq;
    private CompletionQueue recvCq;
    private int maxSendWr = 128;
    private int maxRecvWr = 128;
    private int maxSendSge = 1;
    private int maxRecvSge = 1;
    private boolean signalAll = true;
    private int maxRdmaCtxs;
    private boolean integrity;

    /** Attributes with the defaults; set the completion queues before use. */
    public QpInitAttributes() {
    }

    /** Attributes whose send and receive completions go to {@code cq}. */
    public static QpInitAttributes of(CompletionQueue cq) {
        return new QpInitAttributes().sendCq(cq).recvCq(cq);
    }

    /** The CQ for send completions (required). */
    public QpInitAttributes sendCq(CompletionQueue cq) {
        this.sendCq = Objects.requireNonNull(cq, "sendCq");
        return this;
    }

    /** The CQ for receive completions (required). */
    public QpInitAttributes recvCq(CompletionQueue cq) {
        this.recvCq = Objects.requireNonNull(cq, "recvCq");
        return this;
    }

    /** Outstanding send WRs, in [1, device maxQpWr]. */
    public QpInitAttributes maxSendWr(int n) {
        this.maxSendWr = n;
        return this;
    }

    /** Outstanding receive WRs, in [1, device maxQpWr]. */
    public QpInitAttributes maxRecvWr(int n) {
        this.maxRecvWr = n;
        return this;
    }

    /** SGEs per send WR, in [1, device maxSendSge]. */
    public QpInitAttributes maxSendSge(int n) {
        this.maxSendSge = n;
        return this;
    }

    /** SGEs per receive WR, in [1, device maxRecvSge]. */
    public QpInitAttributes maxRecvSge(int n) {
        this.maxRecvSge = n;
        return this;
    }

    /** True: every send WR completes with a CQE; false: only those marked signaled. */
    public QpInitAttributes signalAll(boolean all) {
        this.signalAll = all;
        return this;
    }

    /** RDMA read/write contexts to reserve resources for (their MR pool and send-queue room). */
    public QpInitAttributes maxRdmaCtxs(int n) {
        this.maxRdmaCtxs = n;
        return this;
    }

    /**
     * Integrity (T10-PI signature) offload for this QP's rw contexts ({@code IB_QP_CREATE_INTEGRITY_EN}):
     * each of the {@link #maxRdmaCtxs(int)} contexts also gets a signature MR, and the send queue
     * grows by 3 WRs per context.
     */
    public QpInitAttributes integrity(boolean on) {
        this.integrity = on;
        return this;
    }

    /** Whether integrity offload is asked for. */
    public boolean integrity() {
        return integrity;
    }

    /** The send CQ. */
    public CompletionQueue sendCq() {
        return sendCq;
    }

    /** The receive CQ. */
    public CompletionQueue recvCq() {
        return recvCq;
    }

    /** Outstanding send WRs. */
    public int maxSendWr() {
        return maxSendWr;
    }

    /** Outstanding receive WRs. */
    public int maxRecvWr() {
        return maxRecvWr;
    }

    /** SGEs per send WR. */
    public int maxSendSge() {
        return maxSendSge;
    }

    /** SGEs per receive WR. */
    public int maxRecvSge() {
        return maxRecvSge;
    }

    /** Whether every send is signaled. */
    public boolean signalAll() {
        return signalAll;
    }

    /** RDMA read/write contexts reserved for. */
    public int maxRdmaCtxs() {
        return maxRdmaCtxs;
    }
}
