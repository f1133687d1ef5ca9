package io.regmem.registration;

import java.util.Objects;

/**
 * What a queue pair is created with ({@code struct ib_qp_init_attr}, and the retry settings verbs
 * sets at {@code ibv_modify_qp} to RTR and RTS): its completion queues, queue limits and RNR retry.
 * Defaults: 128 send and receive WRs, 1 SGE each way, every send signaled, no rw contexts,
 * {@code rnrRetry} 0 and {@code minRnrTimer} 12 (0.64 ms).
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
    private int rnrRetry;
    private int minRnrTimer = 12;
    private int maxInlineData;
    private SharedReceiveQueue srq;
    private int qkey = RDMA_UDP_QKEY;
    private boolean blockSelfMulticastLoopback;

    /** The Q_Key rdma_cm gives the QPs of its UDP port space ({@code RDMA_UDP_QKEY}). */
    public static final int RDMA_UDP_QKEY = 0x01234567;

    /** The largest {@link #maxInlineData(int)} a QP may ask for. */
    public static final int MAX_INLINE_DATA = 1024;

    /** {@code min_rnr_timer}'s codes 1 to 31 in units of 10 us (the IBA's table; code 0 is 655.36 ms). */
    private static final int[] RNR_TIMER_10US = {65536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384,
        512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152};

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

    /**
     * True (the default, unlike verbs' {@code sq_sig_all = 0}): every send WR completes with a CQE,
     * and {@code WorkRequest.signaled(false)} changes nothing; false: only those marked signaled (and
     * failures) do, as in verbs.
     */
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

    /**
     * How often a SEND, SEND_WITH_IMM, SEND_WITH_INV or WRITE_WITH_IMM of this QP is retried when it
     * finds no receive posted at the peer ({@code rnr_retry}, in [0, 7]): 0 fails it at once with
     * {@link WcStatus#RNR_RETRY_EXC_ERR}, 1 to 6 retry that many times, the peer's
     * {@link #minRnrTimer(int)} apart, before failing it so; 7 retries for ever (until a receive is
     * posted, or the QP leaves RTS). librdmacm's {@code rdma_connect} without connection parameters
     * uses 7; a zeroed {@code ibv_qp_attr} or {@code rdma_conn_param}, 0, regmem's default.
     */
    public QpInitAttributes rnrRetry(int n) {
        this.rnrRetry = n;
        return this;
    }

    /**
     * How long a peer that found no receive posted here waits before it retries ({@code min_rnr_timer},
     * the IBA's code in [0, 31]: 1 is 0.01 ms, 12 is 0.64 ms, 31 is 491.52 ms, 0 is 655.36 ms;
     * {@link #minRnrTimerNanos(int)}). A responder's setting, as in verbs: it is this QP's receive
     * side that tells its peer how long to wait.
     */
    public QpInitAttributes minRnrTimer(int code) {
        this.minRnrTimer = code;
        return this;
    }

    /**
     * Bytes a send request may carry inline ({@code max_inline_data} in {@code ibv_qp_cap}), in
     * [0, {@link #MAX_INLINE_DATA}]; default 0 (no inline requests). An inline request
     * ({@link WorkRequest#inline(java.lang.foreign.MemorySegment)}) is copied into the send queue when
     * it is posted.
     */
    public QpInitAttributes maxInlineData(int bytes) {
        this.maxInlineData = bytes;
        return this;
    }

    /**
     * The shared receive queue the QP's receives come from ({@code ib_qp_init_attr.srq}; null, the
     * default: the QP's own receive queue). It must be of the QP's PD. With an SRQ,
     * {@link QueuePair#postRecv} is refused, {@link #maxRecvSge(int)} is ignored (as
     * {@code ibv_create_qp(3)} says; the SRQ's own {@code maxSge} rules) and {@link #maxRecvWr(int)} is
     * not used, though still checked against the device's {@code maxQpWr} (as mlx5 does).
     */
    public QpInitAttributes srq(SharedReceiveQueue srq) {
        this.srq = srq;
        return this;
    }

    /**
     * An unreliable-datagram QP's Q_Key (default {@link #RDMA_UDP_QKEY}, as rdma_cm sets for its UDP
     * port space); a datagram that names another is dropped at this QP. Its top bit must be clear (a
     * send's Q_Key with the top bit set means the sender's own). Ignored for RC QPs.
     */
    public QpInitAttributes qkey(int qkey) {
        this.qkey = qkey;
        return this;
    }

    /** The UD Q_Key ({@link #qkey(int)}). */
    public int qkey() {
        return qkey;
    }

    /**
     * True: this UD QP does not receive its own multicast sends ({@code IBV_QP_CREATE_BLOCK_SELF_MCAST_LB});
     * false (the default): a QP attached to a group it sends to receives its own datagrams, as
     * every other member does.
     */
    public QpInitAttributes blockSelfMulticastLoopback(boolean block) {
        this.blockSelfMulticastLoopback = block;
        return this;
    }

    /** Whether multicast loopback to the sending QP is blocked ({@link #blockSelfMulticastLoopback(boolean)}). */
    public boolean blockSelfMulticastLoopback() {
        return blockSelfMulticastLoopback;
    }

    /** The shared receive queue ({@link #srq(SharedReceiveQueue)}), or null. */
    public SharedReceiveQueue srq() {
        return srq;
    }

    /** Bytes a send request may carry inline ({@link #maxInlineData(int)}). */
    public int maxInlineData() {
        return maxInlineData;
    }

    /** The RNR retry count ({@link #rnrRetry(int)}). */
    public int rnrRetry() {
        return rnrRetry;
    }

    /** The RNR timer code ({@link #minRnrTimer(int)}). */
    public int minRnrTimer() {
        return minRnrTimer;
    }

    /**
     * The wait a {@code min_rnr_timer} code stands for, in nanoseconds.
     *
     * @throws IllegalArgumentException for a code outside [0, 31]
     */
    public static long minRnrTimerNanos(int code) {
        if (code < 0 || code >= RNR_TIMER_10US.length) {
            throw new IllegalArgumentException("min_rnr_timer code " + code + " is outside [0, 31]");
        }
        return RNR_TIMER_10US[code] * 10_000L;
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
