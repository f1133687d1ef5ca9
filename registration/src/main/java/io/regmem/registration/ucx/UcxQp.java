package io.regmem.registration.ucx;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.Access;
import io.regmem.registration.GracePeriod;
import io.regmem.registration.Opcode;
import io.regmem.registration.QueuePair;
import io.regmem.registration.WcStatus;
import io.regmem.registration.spi.PostedWr;
import io.regmem.registration.spi.ProviderQp;
import io.regmem.registration.spi.QpContext;
import io.regmem.registration.spi.Segments;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;

/**
 * A UCX queue pair: one endpoint to the peer's worker. Each posted RDMA WRITE or READ is started
 * when its doorbell rings ({@link #sendPosted}): the local entries are checked through the verbs
 * layer's key tables inside a grace-period section, the remote range against the exporter's
 * envelope (bounds and rights), then one {@code ucp_put_nbx}/{@code ucp_get_nbx} per local piece, and
 * for a WRITE an endpoint flush, whose completion means the bytes are at the target (a put alone
 * completes when the local buffer may be reused). Requests complete in order ({@link #reap}) when
 * every UCX request of theirs has.
 *
 * <p>Locks: the post lock (doorbells) or the execution lock (reaping, stopping) first, then the
 * device's worker lock; never the other way round.
 */
final class UcxQp implements ProviderQp {
    /** Handles of imported keys: this tag in the top byte, the index + 1 below it. */
    private static final int KEY_TAG = 0x5C00_0000;
    private static final int ERR_NOT_STARTED = Integer.MIN_VALUE;

    final UcxDevice device;
    final QpContext ctx;
    private final GracePeriod.Reader reader;
    private final Segments local = new Segments();
    private final Op[] ops;
    private final int mask;
    /** Imported keys, copy-on-write under {@code this}. */
    private volatile Imported[] keys = new Imported[0];
    /** The endpoint to the peer's worker, or NULL before the connection and after it ends. Under the worker lock. */
    private MemorySegment ep = MemorySegment.NULL;
    /** One past the newest request started (a sequence number; execution lock; any thread reads it). */
    private volatile long started;
    /** One past the newest request reaped (execution lock). */
    private long reaped;
    /**
     * A request failed before it started (its error completion is pending): nothing after it starts,
     * as a responder discards what follows a NAK; they are flushed once the error completes. Execution lock.
     */
    private boolean halted;

    /** A peer's key as imported on this QP: its envelope and UCX's unpacked key for this endpoint. */
    private record Imported(byte[] envelope, RemoteKeyEnvelope.Decoded key, MemorySegment rkey) {
    }

    /** One send request's UCX requests and its outcome. */
    private static final class Op {
        MemorySegment[] reqs = new MemorySegment[4];
        int n;
        /** WcStatus ordinal of a failure decided at start, or -1; ERR_NOT_STARTED if never started. */
        int failed;
        int ucsStatus;
        long bytes;

        void reset() {
            n = 0;
            failed = -1;
            ucsStatus = UcpLayout.UCS_OK;
            bytes = 0;
        }

        void add(MemorySegment req) {
            if (n == reqs.length) {
                reqs = Arrays.copyOf(reqs, n * 2);
            }
            reqs[n++] = req;
        }
    }

    UcxQp(UcxDevice device, QpContext ctx) {
        this.device = device;
        this.ctx = ctx;
        this.reader = device.grace.newReader();
        int depth = Integer.highestOneBit(Math.max(1, ctx.queuePair().maxSendWr() - 1)) << 1;
        this.ops = new Op[depth];
        for (int i = 0; i < depth; i++) {
            ops[i] = new Op();
        }
        this.mask = depth - 1;
        ctx.attach(this);
    }

    /** Connects to the peer's worker (the CM, once both ends agreed); then the QP is ready. */
    void connect(byte[] peerWorker) {
        device.workerLock.lock();
        try {
            ep = device.worker.connect(peerWorker);
        } finally {
            device.workerLock.unlock();
        }
        ctx.ready();
    }

    /**
     * Starts the announced requests. Under the execution lock too (after the post lock, as the verbs
     * layer orders them), so that a request is never started after the QP's error state flushed it.
     */
    @Override
    public void sendPosted(long firstSeq, int count) {
        ctx.lock().lock();
        try {
            for (long seq = firstSeq; seq < firstSeq + count; seq++) {
                start(ctx.sendAt(seq));
            }
        } finally {
            ctx.lock().unlock();
        }
    }

    /** Starts one request (both locks held); a failure decided here completes it in order at the next reap. */
    private void start(PostedWr w) {
        Op op = ops[(int) w.seq() & mask];
        op.reset();
        if (halted || ctx.state() != QueuePair.State.RTS) {
            op.failed = ERR_NOT_STARTED; // flushed once the error state is seen
            return;
        }
        Opcode opcode = w.opcode();
        if (opcode != Opcode.RDMA_WRITE && opcode != Opcode.RDMA_READ) {
            op.failed = WcStatus.REM_INV_REQ_ERR.ordinal(); // UCX carries one-sided RDMA only (so far)
            halted = true;
            started = w.seq() + 1;
            return;
        }
        boolean read = opcode == Opcode.RDMA_READ;
        Imported k = imported(w.rkey());
        long total = w.totalLength();
        long raddr = w.remoteAddress();
        if (k == null || !covers(k.key(), raddr, total, read ? Access.REMOTE_READ : Access.REMOTE_WRITE)) {
            op.failed = WcStatus.REM_ACCESS_ERR.ordinal();
            halted = true;
            started = w.seq() + 1;
            return;
        }
        reader.enter();
        try {
            local.clear();
            if (!ctx.memory().gatherLocal(ctx, w, local, read)) {
                op.failed = WcStatus.LOC_PROT_ERR.ordinal();
                halted = true;
                started = w.seq() + 1;
                return;
            }
            device.workerLock.lock();
            try {
                long off = 0;
                for (int i = 0; i < local.count(); i++) {
                    long addr = local.segment(i).address() + local.offset(i);
                    long len = local.length(i);
                    MemorySegment req = read
                            ? device.ucp.get(ep, addr, len, raddr + off, k.rkey(), device.worker.noParams)
                            : device.ucp.put(ep, addr, len, raddr + off, k.rkey(), device.worker.noParams);
                    op.add(req);
                    off += len;
                }
                if (!read) {
                    op.add(device.ucp.flush(ep, device.worker.noParams));
                }
            } finally {
                device.workerLock.unlock();
            }
            op.bytes = total;
            started = w.seq() + 1;
        } finally {
            local.clear();
            reader.exit();
        }
    }

    /** True if {@code [addr, addr + len)} lies in the exported region and the region grants {@code right}. */
    private static boolean covers(RemoteKeyEnvelope.Decoded k, long addr, long len, Access right) {
        return Access.has(k.access(), right) && addr >= k.address() && len <= k.length() && addr - k.address() <= k.length() - len;
    }

    private Imported imported(int handle) {
        Imported[] ks = keys;
        int i = (handle ^ KEY_TAG) - 1;
        return (handle & 0xFF00_0000) == KEY_TAG && i >= 0 && i < ks.length ? ks[i] : null;
    }

    /**
     * Completes, in order, the requests whose UCX requests are all done (execution lock held); in the
     * error state, waits for the started ones and flushes the rest.
     */
    void reap() {
        PostedWr w;
        while ((w = ctx.nextSend()) != null && w.seq() < started) {
            Op op = ops[(int) w.seq() & mask];
            if (op.failed == ERR_NOT_STARTED) {
                break; // never started: the QP is in the error state, flushed below
            }
            if (!done(op)) {
                return;
            }
            reaped = w.seq() + 1;
            WcStatus status = op.failed >= 0 ? WcStatus.values()[op.failed] : statusOf(op.ucsStatus);
            ctx.completeSend(status, status == WcStatus.SUCCESS ? op.bytes : 0);
        }
        if (ctx.state() == QueuePair.State.ERROR) {
            drain();
            ctx.flush();
        }
    }

    /** True once every UCX request of {@code op} finished; records the first failure. */
    private boolean done(Op op) {
        if (op.n == 0) {
            return true;
        }
        device.workerLock.lock();
        try {
            for (int i = 0; i < op.n; i++) {
                MemorySegment r = op.reqs[i];
                if (r == null) {
                    continue;
                }
                int s = device.worker.poll(r);
                if (s == UcpLayout.UCS_INPROGRESS) {
                    return false;
                }
                op.reqs[i] = null;
                if (s != UcpLayout.UCS_OK && op.ucsStatus == UcpLayout.UCS_OK) {
                    op.ucsStatus = s;
                }
            }
            op.n = 0;
            return true;
        } finally {
            device.workerLock.unlock();
        }
    }

    private static WcStatus statusOf(int ucs) {
        return switch (ucs) {
            case UcpLayout.UCS_OK -> WcStatus.SUCCESS;
            case UcpLayout.UCS_ERR_CANCELED -> WcStatus.WR_FLUSH_ERR;
            case UcpLayout.UCS_ERR_CONNECTION_RESET, UcpLayout.UCS_ERR_UNREACHABLE, UcpLayout.UCS_ERR_ENDPOINT_TIMEOUT ->
                    WcStatus.RETRY_EXC_ERR;
            default -> WcStatus.REM_OP_ERR;
        };
    }

    /**
     * Ends every started request (execution lock held): closes the endpoint forcibly, which fails what
     * the transport still holds, and progresses the worker until each request is done. After it no
     * UCX request of this QP touches memory.
     */
    private void drain() {
        if (started <= reaped && ep.address() == 0) {
            return;
        }
        closeEndpoint();
        long deadline = System.nanoTime() + 10_000_000_000L;
        for (long seq = reaped; seq < started; seq++) {
            Op op = ops[(int) seq & mask];
            while (!done(op)) {
                device.progress();
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException(ctx.queuePair() + ": ucx requests still running 10 s after the endpoint closed");
                }
            }
        }
        reaped = Math.max(reaped, started);
    }

    private void closeEndpoint() {
        MemorySegment req;
        device.workerLock.lock();
        try {
            if (ep.address() == 0) {
                return;
            }
            req = device.worker.startClose(ep);
            ep = MemorySegment.NULL;
        } finally {
            device.workerLock.unlock();
        }
        while (true) {
            device.workerLock.lock();
            try {
                if (device.worker.poll(req) != UcpLayout.UCS_INPROGRESS) {
                    return;
                }
            } finally {
                device.workerLock.unlock();
            }
            device.progress();
        }
    }

    /** True if requests were started and not yet reaped (any thread). */
    boolean busy() {
        return started > reaped;
    }

    @Override
    public void recvPosted(long firstSeq, int count) {
        // Receives are consumed by SENDs, which UCX does not carry yet: they wait, and are flushed.
    }

    @Override
    public void stop() {
        drain();
    }

    @Override
    public int importRemoteKey(MemorySegment exported) {
        RemoteKeyEnvelope.Decoded d = RemoteKeyEnvelope.decode(exported, ctx.queuePair().toString());
        byte[] bytes = exported.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
        synchronized (this) {
            Imported[] ks = keys;
            for (int i = 0; i < ks.length; i++) {
                if (Arrays.equals(ks[i].envelope(), bytes)) {
                    return KEY_TAG | (i + 1);
                }
            }
            if (ks.length >= 0xFF_FFFE) {
                throw new RdmaException(Errno.ENOMEM, ctx.queuePair() + ": importRemoteKey: " + ks.length + " keys imported");
            }
            MemorySegment rkey;
            device.workerLock.lock();
            try {
                if (ep.address() == 0) {
                    throw new RdmaException(Errno.EINVAL, ctx.queuePair() + ": importRemoteKey needs a connected QP "
                            + "(UCX unpacks a key for the endpoint to its exporter)");
                }
                rkey = device.worker.unpack(ep, d.packed());
            } finally {
                device.workerLock.unlock();
            }
            Imported[] next = Arrays.copyOf(ks, ks.length + 1);
            next[ks.length] = new Imported(bytes, d, rkey);
            keys = next;
            return KEY_TAG | ks.length + 1;
        }
    }

    @Override
    public void destroy() {
        drain();
        synchronized (this) {
            device.workerLock.lock();
            try {
                for (Imported k : keys) {
                    device.ucp.rkeyDestroy(k.rkey());
                }
            } finally {
                device.workerLock.unlock();
            }
            keys = new Imported[0];
        }
        reader.close();
        device.removeQp(this);
    }
}
