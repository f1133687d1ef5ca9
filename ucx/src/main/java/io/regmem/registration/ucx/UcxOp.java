package io.regmem.registration.ucx;

import io.regmem.registration.WcStatus;
import io.regmem.registration.spi.Segments;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;

/**
 * One send request of a {@link UcxQp} while UCX carries it: its UCX requests, its header, the
 * receiver's verdict and, for a READ, the bytes that came back. One per queue slot, reused.
 */
final class UcxOp {
    /** {@link #failed} of a request that never started (the QP stopped first). */
    static final int ERR_NOT_STARTED = Integer.MIN_VALUE;
    /** {@link #ack} while no verdict came. */
    static final int ACK_PENDING = -1;

    /** Its UCX requests (0: finished at once or already reaped). */
    long[] reqs = new long[4];
    int n;
    /** WcStatus ordinal of a failure decided at start, or -1; ERR_NOT_STARTED if never started. */
    int failed;
    int ucsStatus;
    long bytes;
    boolean awaitAck;
    /** The request's sequence number (set before it is sent: its acknowledgement is matched by it). */
    long seq = -1;
    /** The receiver's verdict (a WcStatus ordinal), or ACK_PENDING. Written by the AM callback. */
    volatile int ack;
    MemorySegment header;
    /** An atomic's operands (compare/add, swap: {@link UcxAm#ATOMIC_OPERANDS} bytes), sent as its message's data. */
    MemorySegment operands;
    MemorySegment iov = MemorySegment.NULL;
    /** A READ's response bytes (UCX's persistent data, released after they are placed), or 0. */
    long respData;
    long respLength;
    /** The answer came by rendezvous: its bytes were received into {@link #stage} (placed by the reap). */
    boolean respRndv;
    /**
     * A bounce buffer of the QP's {@link UcxStaging} that this request's UCX requests use (a
     * rendezvous WRITE's bytes, a READ's rendezvous answer), or null; given back when they are done.
     */
    MemorySegment stage;
    /**
     * Its UCX requests touch no memory of the application's (a READ's header, a rendezvous WRITE from
     * its bounce buffer): a deregistration does not wait for them.
     */
    boolean ownMemoryOnly;
    /**
     * Where a READ's bytes or an atomic's value found will be placed: its local entries, resolved
     * when it started (inside that grace-period section). While {@link #answerHeld}, a deregistration
     * of their region waits for the answer ({@link UcxQp#answersInto}), so that it never fails a
     * request its target already executed.
     */
    final Segments answerTo = new Segments();
    /** True from the start of a READ or atomic sent as a message until its completion (or its end). */
    boolean answerHeld;

    void reset() {
        n = 0;
        failed = -1;
        ucsStatus = UcpLayout.UCS_OK;
        bytes = 0;
        awaitAck = false;
        respData = 0;
        respLength = 0;
        respRndv = false;
        stage = null;
        ownMemoryOnly = false;
        answerHeld = false;
        answerTo.clear();
        ack = ACK_PENDING;
        oneSided = false;
        needsFlush = false;
    }

    /** Carried by UCX puts or gets alone (no message, no answer, nothing to place). */
    boolean oneSided;
    /** A one-sided WRITE: complete only once an endpoint flush issued after its puts has finished. */
    boolean needsFlush;

    /** Adds what a UCX call returned: a request to wait for, or an error status; 0 (done at once) is not kept. */
    void add(long req) {
        if (req == 0) {
            return;
        }
        if (n == reqs.length) {
            reqs = Arrays.copyOf(reqs, n * 2);
        }
        reqs[n++] = req;
    }

    /** True once every UCX request of this request finished and, unless ignored, its acknowledgement came. */
    boolean done(UcxDevice device, boolean ignoreAck) {
        // Read first: the AM callback adds an answer's own UCX request (a rendezvous receive) before
        // it publishes the answer, so an answer seen here has its request among those polled below.
        boolean answered = ack != ACK_PENDING;
        if (n > 0) {
            device.lockWorker();
            try {
                for (int i = 0; i < n; i++) {
                    long r = reqs[i];
                    if (r == 0) {
                        continue;
                    }
                    int s = device.worker.poll(r);
                    if (s == UcpLayout.UCS_INPROGRESS) {
                        return false;
                    }
                    reqs[i] = 0;
                    if (s != UcpLayout.UCS_OK && ucsStatus == UcpLayout.UCS_OK) {
                        ucsStatus = s;
                    }
                }
                n = 0;
            } finally {
                device.workerLock.unlock();
            }
        }
        return ignoreAck || !awaitAck || ucsStatus != UcpLayout.UCS_OK || answered;
    }

    /** Hands this request's unfinished UCX requests to the device (a peer that never answers). */
    void abandon(UcxDevice device) {
        device.lockWorker();
        try {
            for (int i = 0; i < n; i++) {
                if (reqs[i] != 0) {
                    device.abandon(reqs[i]);
                    reqs[i] = 0;
                }
            }
            n = 0;
        } finally {
            device.workerLock.unlock();
        }
    }

    /**
     * The completion status a request gets when one of its UCX requests ended with {@code ucs}: a
     * cancel is a flush; any other failure of the transport (reset, unreachable, timeout, I/O error)
     * is what a NIC reports when its retries to a peer run out. The target's own verdicts travel in
     * acknowledgements, never as UCX errors.
     */
    static WcStatus statusOf(int ucs) {
        return switch (ucs) {
            case UcpLayout.UCS_OK -> WcStatus.SUCCESS;
            case UcpLayout.UCS_ERR_CANCELED -> WcStatus.WR_FLUSH_ERR;
            default -> WcStatus.RETRY_EXC_ERR;
        };
    }
}
