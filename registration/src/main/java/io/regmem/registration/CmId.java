package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;

/**
 * A connection-manager ID ({@code rdma_create_id}): the handle a connection is made through. It
 * carries at most one queue pair. Its rules (kernel-semantics section 1): the QP's PD must belong
 * to this ID's device ({@link Errno#EINVAL} otherwise); the ID cannot be destroyed while a QP is
 * attached ({@link Errno#EBUSY}: the kernel silently orphans the QP instead); destroying the QP
 * twice is an error; destroying the ID inside its own event handler is refused ({@link Errno#EBUSY}:
 * the handler returns true instead, see {@link CmEventHandler}).
 */
public final class CmId extends RdmaResource implements AutoCloseable {
    /** Where an ID stands in connection setup. */
    public enum ConnState {
        /** Not connected, not listening. */
        IDLE,
        /** Accepting connection requests under a name. */
        LISTENING,
        /** Active side: a request is waiting for the peer's accept. */
        CONNECTING,
        /** Passive side: a request from a peer, to accept or reject. */
        REQUESTED,
        /** Both QPs are ready to send. */
        CONNECTED,
        /** Disconnected or rejected: the QP is in the error state. */
        DISCONNECTED
    }

    private QueuePair qp;
    private ConnState conn = ConnState.IDLE;
    private String listenName;
    private final java.util.ArrayDeque<CmId> requests = new java.util.ArrayDeque<>();
    /** The other end: for a request, the active ID; for the active ID, its request. */
    private CmId remote;
    /** For a request: the listener it came through. */
    private CmId listener;
    private volatile CmEventHandler handler;
    /** The ID whose event handler this thread is running, if any. */
    private static final ThreadLocal<CmId> IN_HANDLER = new ThreadLocal<>();

    CmId(RdmaDevice device) {
        super(device, "CmId", null);
    }

    /**
     * Creates this ID's queue pair ({@code rdma_create_qp}): a reliable-connected QP in the INIT
     * state, holding a reference on the PD and on each CQ. With {@code maxRdmaCtxs = c} its send
     * queue grows by {@code f * c} WRs (f = 3 when the device can use MRs for rw or integrity is on,
     * else 1), clamped to the device's {@code maxQpWr}, and it gets a pool of c fast-reg MRs for rw
     * contexts ({@link QueuePair#rdmaMrs()}; plus c signature MRs with integrity). On failure
     * nothing is created and no count changes.
     *
     * @throws RdmaException {@link Errno#EINVAL} for a PD or CQ of another device, missing CQs or
     *                       limits beyond the device's; {@link Errno#EBUSY} if a QP is already attached;
     *                       {@link Errno#EBADF} if this ID, the PD or a CQ was destroyed
     */
    public QueuePair createQp(ProtectionDomain pd, QpInitAttributes attrs) {
        synchronized (device.lock) {
            checkAlive("createQp");
            if (pd.device != device) {
                throw new RdmaException(Errno.EINVAL, this + ": createQp with " + pd + " of device " + pd.device.name()
                        + "; this ID is bound to " + device.name());
            }
            pd.checkAlive("createQp");
            if (qp != null) {
                throw new RdmaException(Errno.EBUSY, this + ": already has " + qp + "; a CM ID carries one QP");
            }
            CompletionQueue scq = attrs.sendCq();
            CompletionQueue rcq = attrs.recvCq();
            if (scq == null || rcq == null) {
                throw new RdmaException(Errno.EINVAL, this + ": createQp needs a send CQ and a receive CQ");
            }
            for (CompletionQueue cq : new CompletionQueue[] {scq, rcq}) {
                if (cq.device != device) {
                    throw new RdmaException(Errno.EINVAL, this + ": " + cq + " belongs to device " + cq.device.name());
                }
                cq.checkAlive("createQp");
            }
            DeviceAttributes a = device.attributes();
            check(attrs.maxSendWr(), a.maxQpWr(), "maxSendWr", "maxQpWr");
            check(attrs.maxRecvWr(), a.maxQpWr(), "maxRecvWr", "maxQpWr");
            check(attrs.maxSendSge(), a.maxSendSge(), "maxSendSge", "maxSendSge");
            check(attrs.maxRecvSge(), a.maxRecvSge(), "maxRecvSge", "maxRecvSge");
            if (attrs.maxRdmaCtxs() < 0) {
                throw new RdmaException(Errno.EINVAL, this + ": maxRdmaCtxs " + attrs.maxRdmaCtxs() + " is negative");
            }
            int ctxs = attrs.maxRdmaCtxs();
            long extra = io.regmem.registration.rw.RdmaRw.maxSendWr(device, 1, ctxs, attrs.integrity());
            int sendWr = (int) Math.min(a.maxQpWr(), attrs.maxSendWr() + extra);
            QueuePair created = new QueuePair(this, pd, attrs, sendWr);
            try {
                created.createMrPools(ctxs, attrs.integrity()); // throws: nothing created
            } catch (RuntimeException e) {
                created.reader.close();
                throw e;
            }
            pd.retain();
            scq.retain();
            rcq.retain();
            qp = created;
            device.addQp(created);
            device.tracker.add(created);
            return created;
        }
    }

    private void check(int value, int limit, String what, String deviceLimit) {
        if (value < 1 || value > limit) {
            throw new RdmaException(Errno.EINVAL, this + ": " + what + " " + value + " is not in [1, " + deviceLimit
                    + "=" + limit + "]");
        }
    }

    /** The attached queue pair, or null. */
    public QueuePair qp() {
        synchronized (device.lock) {
            return qp;
        }
    }

    /**
     * Destroys the attached queue pair ({@code rdma_destroy_qp}) and drops its PD and CQ references.
     *
     * @throws RdmaException {@link Errno#EINVAL} if no QP is attached (a second destroy);
     *                       {@link Errno#EBUSY} while rw contexts hold MRs of the QP's pools
     *                       ({@code mrs_used > 0}; the QP stays usable); {@link Errno#EBADF} if this ID
     *                       was destroyed
     */
    public void destroyQp() {
        destroyQp(false);
    }

    /** Destroys the QP; {@code force} (device teardown) ignores rw contexts still holding pool MRs. */
    void destroyQp(boolean force) {
        synchronized (device.lock) {
            checkAlive("destroyQp");
            if (qp == null) {
                throw new RdmaException(Errno.EINVAL, this + ": destroyQp with no QP attached (already destroyed?)");
            }
            QueuePair q = qp;
            int held = q.rdmaMrs().used() + q.sigMrs().used();
            if (held > 0 && !force) {
                throw new RdmaException(Errno.EBUSY, this + ": cannot destroy " + q + ": " + held + " pool MR(s) are "
                        + "still held by live rw contexts (mrs_used); destroy the contexts first");
            }
            Fabric.LOCK.lock();
            try {
                q.state(QueuePair.State.ERROR);
                if (q.peer != null) {
                    SoftEngine.toError(q.peer); // the peer loses its connection
                    q.peer.peer = null;
                    q.peer = null;
                }
            } finally {
                Fabric.LOCK.unlock();
            }
            device.removeQp(q);
            q.reader.close(); // off the fabric's QP lists, so it never executes again
            q.destroyMrPools();
            q.markDestroyed();
            q.pd().release();
            q.sendCq().release();
            q.recvCq().release();
            qp = null;
        }
    }

    // ---- connection setup (soft: within this JVM) -------------------------------------------------

    /**
     * Listens for connection requests under {@code name} ({@code rdma_listen}).
     *
     * @throws RdmaException {@link Errno#EBUSY} if another ID listens under that name;
     *                       {@link Errno#EINVAL} if this ID is not idle
     */
    public void listen(String name) {
        synchronized (device.lock) {
            checkAlive("listen");
            Fabric.LOCK.lock();
            try {
                if (conn != ConnState.IDLE) {
                    throw new RdmaException(Errno.EINVAL, this + ": listen in state " + conn);
                }
                if (Fabric.LISTENERS.putIfAbsent(name, this) != null) {
                    throw new RdmaException(Errno.EBUSY, this + ": '" + name + "' is already listened on");
                }
                listenName = name;
                conn = ConnState.LISTENING;
            } finally {
                Fabric.LOCK.unlock();
            }
        }
    }

    /**
     * Asks the ID listening under {@code name} for a connection ({@code rdma_connect}). This ID must
     * have its QP. The listener sees a new ID in {@link #getRequest()}; once that one accepts, both
     * QPs are ready to send.
     *
     * @throws RdmaException {@link Errno#ENOENT} if nobody listens under the name; {@link Errno#EINVAL}
     *                       without a QP or when not idle
     */
    public void connect(String name) {
        CmEvent event;
        synchronized (device.lock) {
            checkAlive("connect");
            Fabric.LOCK.lock();
            try {
                if (qp == null || conn != ConnState.IDLE) {
                    throw new RdmaException(Errno.EINVAL, this + ": connect needs a QP and an idle ID (state " + conn + ")");
                }
                CmId listener = Fabric.LISTENERS.get(name);
                if (listener == null) {
                    throw new RdmaException(Errno.ENOENT, this + ": nobody listens under '" + name + "'");
                }
                // Not under the listener device's lock: that would order a device lock after the fabric
                // lock, against every other path. The tracker is concurrent.
                CmId request = new CmId(listener.device);
                request.conn = ConnState.REQUESTED;
                request.remote = this;
                request.listener = listener;
                request.handler = listener.handler; // a request inherits its listener's handler
                listener.device.tracker.add(request);
                listener.requests.addLast(request);
                remote = request;
                conn = ConnState.CONNECTING;
                event = new CmEvent(CmEvent.Type.CONNECT_REQUEST, request, listener);
            } finally {
                Fabric.LOCK.unlock();
            }
        }
        deliver(event);
    }

    /**
     * The next pending connection request of a listening ID ({@code rdma_get_request}), or null.
     * The caller owns the returned ID: it creates a QP on it and calls {@link #accept()}, or
     * {@link #reject()}s it.
     */
    public CmId getRequest() {
        Fabric.LOCK.lock();
        try {
            checkAlive("getRequest");
            return requests.pollFirst();
        } finally {
            Fabric.LOCK.unlock();
        }
    }

    /**
     * Accepts a connection request ({@code rdma_accept}): links the two QPs and moves both to RTS.
     *
     * @throws RdmaException {@link Errno#EINVAL} unless this is a pending request with a QP whose
     *                       requester still waits
     */
    public void accept() {
        CmId active;
        synchronized (device.lock) {
            checkAlive("accept");
            Fabric.LOCK.lock();
            try {
                active = remote;
                if (conn != ConnState.REQUESTED || qp == null || active == null || active.isDestroyed()
                        || active.qp == null || active.conn != ConnState.CONNECTING) {
                    throw new RdmaException(Errno.EINVAL, this + ": accept needs a pending request, a QP, and a "
                            + "requester that still waits (state " + conn + ")");
                }
                qp.peer = active.qp;
                active.qp.peer = qp;
                qp.state(QueuePair.State.RTS);
                active.qp.state(QueuePair.State.RTS);
                conn = ConnState.CONNECTED;
                active.conn = ConnState.CONNECTED;
                if (listener != null) {
                    listener.requests.remove(this);
                }
            } finally {
                Fabric.LOCK.unlock();
            }
        }
        deliver(new CmEvent(CmEvent.Type.ESTABLISHED, active, null), new CmEvent(CmEvent.Type.ESTABLISHED, this, null));
    }

    /** Rejects a pending request ({@code rdma_reject}): the requester ends DISCONNECTED. */
    public void reject() {
        CmId active;
        Fabric.LOCK.lock();
        try {
            checkAlive("reject");
            if (conn != ConnState.REQUESTED) {
                throw new RdmaException(Errno.EINVAL, this + ": reject of a non-request (state " + conn + ")");
            }
            active = remote;
            if (active != null) {
                active.conn = ConnState.DISCONNECTED;
                active.remote = null;
            }
            if (listener != null) {
                listener.requests.remove(this);
            }
            conn = ConnState.DISCONNECTED;
        } finally {
            Fabric.LOCK.unlock();
        }
        if (active != null) {
            deliver(new CmEvent(CmEvent.Type.REJECTED, active, null));
        }
    }

    /**
     * Disconnects ({@code rdma_disconnect}): both QPs move to the error state, so everything
     * outstanding at either end is flushed. Idempotent.
     */
    public void disconnect() {
        CmId other = null;
        boolean wasConnected;
        Fabric.LOCK.lock();
        try {
            checkAlive("disconnect");
            wasConnected = conn == ConnState.CONNECTED;
            if (qp != null) {
                SoftEngine.toError(qp);
                if (qp.peer != null) {
                    SoftEngine.toError(qp.peer);
                }
            }
            conn = ConnState.DISCONNECTED;
            if (remote != null && remote.conn == ConnState.CONNECTED) {
                remote.conn = ConnState.DISCONNECTED;
                other = remote;
            }
        } finally {
            Fabric.LOCK.unlock();
        }
        if (wasConnected) {
            deliver(new CmEvent(CmEvent.Type.DISCONNECTED, this, null),
                    other == null ? null : new CmEvent(CmEvent.Type.DISCONNECTED, other, null));
        }
    }

    /**
     * Sets the handler of this ID's connection events (see {@link CmEventHandler}); requests that
     * come through a listening ID inherit its handler. Null removes it.
     */
    public void onEvent(CmEventHandler h) {
        this.handler = h;
    }

    /** Runs the handlers of the given events (nulls skipped), outside every lock. */
    private static void deliver(CmEvent... events) {
        for (CmEvent e : events) {
            if (e == null) {
                continue;
            }
            CmId id = e.id();
            CmEventHandler h = id.handler;
            if (h == null) {
                continue;
            }
            CmId outer = IN_HANDLER.get();
            IN_HANDLER.set(id);
            boolean destroy;
            try {
                destroy = h.onEvent(e);
            } finally {
                IN_HANDLER.set(outer);
            }
            if (destroy && !id.isDestroyed()) {
                id.destroyAfterEvent();
            }
        }
    }

    /** What a handler's "true" asks for: reject a request, disconnect and free the QP, destroy the ID. */
    private void destroyAfterEvent() {
        if (connState() == ConnState.REQUESTED) {
            reject();
        } else if (connState() == ConnState.CONNECTED) {
            disconnect();
        }
        if (qp() != null) {
            destroyQp();
        }
        close();
    }

    /** Where this ID stands in connection setup. */
    public ConnState connState() {
        Fabric.LOCK.lock();
        try {
            return conn;
        } finally {
            Fabric.LOCK.unlock();
        }
    }

    /**
     * Destroys the ID ({@code rdma_destroy_id}).
     *
     * @throws RdmaException {@link Errno#EBUSY} while a QP is attached (nothing changes: call
     *                       {@link #destroyQp()} first); {@link Errno#EBADF} if already destroyed
     */
    @Override
    public void close() {
        if (IN_HANDLER.get() == this) {
            throw new RdmaException(Errno.EBUSY, this + ": destroyed inside its own event handler; return true "
                    + "from the handler instead and regmem destroys it afterwards");
        }
        java.util.List<CmEvent> refused = new java.util.ArrayList<>();
        synchronized (device.lock) {
            checkAlive("close");
            if (qp != null) {
                throw new RdmaException(Errno.EBUSY, this + ": cannot destroy while " + qp
                        + " is attached; destroyQp() first (the kernel would orphan the QP)");
            }
            Fabric.LOCK.lock();
            try {
                if (listenName != null) {
                    Fabric.LISTENERS.remove(listenName, this);
                }
                CmId pending;
                while ((pending = requests.pollFirst()) != null) {
                    pending.conn = ConnState.DISCONNECTED; // refused: never accepted
                    if (pending.remote != null) {
                        pending.remote.conn = ConnState.DISCONNECTED;
                        refused.add(new CmEvent(CmEvent.Type.REJECTED, pending.remote, null));
                    }
                    pending.markDestroyed();
                }
                if (listener != null) {
                    listener.requests.remove(this);
                }
                if (remote != null && remote.remote == this) {
                    remote.remote = null;
                }
            } finally {
                Fabric.LOCK.unlock();
            }
            markDestroyed();
        }
        deliver(refused.toArray(CmEvent[]::new));
    }
}
