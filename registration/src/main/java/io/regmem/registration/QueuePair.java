package io.regmem.registration;

/**
 * A reliable-connected queue pair, created and destroyed through its {@link CmId}
 * ({@code rdma_create_qp} / {@code rdma_destroy_qp}). It holds one reference on its PD and on each
 * of its CQs for its whole life. Posting and draining arrive with the soft provider's data path.
 */
public final class QueuePair extends RdmaResource {
    /** The states a QP moves through ({@code enum ib_qp_state}). */
    public enum State {
        /** Created, not yet connected. */
        INIT,
        /** Ready to receive. */
        RTR,
        /** Ready to send. */
        RTS,
        /** An error moved it here: everything outstanding completes with a flush status. */
        ERROR
    }

    private final CmId cmId;
    private final ProtectionDomain pd;
    private final CompletionQueue sendCq;
    private final CompletionQueue recvCq;
    private final int maxSendWr;
    private final int maxRecvWr;
    private final int maxSendSge;
    private final int maxRecvSge;
    private final boolean signalAll;
    private final int maxRdmaCtxs;
    private volatile State state = State.INIT;

    QueuePair(CmId cmId, ProtectionDomain pd, QpInitAttributes attrs, int maxSendWr) {
        super(pd.device, "QueuePair", null);
        this.cmId = cmId;
        this.pd = pd;
        this.sendCq = attrs.sendCq();
        this.recvCq = attrs.recvCq();
        this.maxSendWr = maxSendWr;
        this.maxRecvWr = attrs.maxRecvWr();
        this.maxSendSge = attrs.maxSendSge();
        this.maxRecvSge = attrs.maxRecvSge();
        this.signalAll = attrs.signalAll();
        this.maxRdmaCtxs = attrs.maxRdmaCtxs();
    }

    /** The CM ID this QP is attached to. */
    public CmId cmId() {
        return cmId;
    }

    /** The QP's protection domain. */
    public ProtectionDomain pd() {
        return pd;
    }

    /** The send completion queue. */
    public CompletionQueue sendCq() {
        return sendCq;
    }

    /** The receive completion queue. */
    public CompletionQueue recvCq() {
        return recvCq;
    }

    /** Outstanding send WRs, including the room reserved for rw contexts. */
    public int maxSendWr() {
        return maxSendWr;
    }

    /** Outstanding receive WRs. */
    public int maxRecvWr() {
        return maxRecvWr;
    }

    /** SGEs per send WR (the rw write limit). */
    public int maxSendSge() {
        return maxSendSge;
    }

    /** SGEs per receive WR. */
    public int maxRecvSge() {
        return maxRecvSge;
    }

    /** SGEs per RDMA READ WR: min(maxSendSge, device maxSgeRd), the rw read limit. */
    public int maxReadSge() {
        return Math.min(maxSendSge, device.attributes().maxSgeRd());
    }

    /** True if every send completes with a CQE. */
    public boolean signalAll() {
        return signalAll;
    }

    /** rw contexts reserved for. */
    public int maxRdmaCtxs() {
        return maxRdmaCtxs;
    }

    /** The QP's state. */
    public State state() {
        return state;
    }

    void state(State s) {
        this.state = s;
    }
}
