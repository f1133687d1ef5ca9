package io.regmem.registration.ucx;

/**
 * The endpoint flush that a QP's one-sided WRITEs wait for. A WRITE's puts complete locally; the
 * WRITE completes only once an endpoint flush issued after them has finished (the bytes are at the
 * target then). One flush covers every request started before it, so WRITEs in flight together share
 * one: it is issued when the oldest request is such a WRITE and none under way covers it. The QP
 * reaps in order, so at most one flush is under way, and it covers the oldest request. Execution
 * lock of the QP held for every method.
 */
final class UcxWriteFlush {
    private final UcxDevice device;
    private final UcxOp flush = new UcxOp();
    /** Requests below this sequence number are covered by the flush issued last. */
    private long issuedThrough;
    /** Requests below this are covered by a flush that finished, with {@link #status}. */
    private long doneThrough;
    private int status = UcpLayout.UCS_OK;

    UcxWriteFlush(UcxDevice device) {
        this.device = device;
    }

    /**
     * True once a finished flush covers the WRITE {@code seq} (a failure of the flush becomes
     * {@code op}'s status); otherwise issues one on {@code qp}'s endpoint (none: the peer is gone, a
     * reset) covering every request below {@code started}, unless one that covers {@code seq} is under way.
     */
    boolean covers(long seq, UcxOp op, UcxQp qp, long started) {
        if (seq >= doneThrough) {
            if (seq >= issuedThrough) {
                device.lockWorker();
                try {
                    long endpoint = qp.endpoint();
                    flush.reset();
                    flush.add(endpoint == 0 ? UcpLayout.UCS_ERR_CONNECTION_RESET
                            : device.ucp.flush(endpoint, device.worker.noParams.address()));
                } finally {
                    device.workerLock.unlock();
                }
                issuedThrough = started;
            }
            if (!flush.done(device, true)) {
                return false;
            }
            doneThrough = issuedThrough;
            status = flush.ucsStatus;
        }
        if (op.ucsStatus == UcpLayout.UCS_OK) {
            op.ucsStatus = status;
        }
        return true;
    }

    /**
     * Ends the flush under way, if any (the QP stops): waits for it until {@code deadline}
     * ({@link System#nanoTime()}), then leaves it to the worker. Everything below {@code started} counts
     * as covered afterwards.
     */
    void drain(long deadline, long started) {
        while (!flush.done(device, true)) {
            if (System.nanoTime() > deadline) {
                flush.abandon(device);
                break;
            }
            device.progress();
        }
        doneThrough = issuedThrough = Math.max(issuedThrough, started);
    }
}
