package io.regmem.registration.ucx;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.CmId;
import io.regmem.registration.spi.CmContext;
import io.regmem.registration.spi.ProviderCm;
import io.regmem.registration.spi.QpContext;
import java.util.concurrent.ConcurrentHashMap;

/**
 * UCX connection setup by {@code host:port}. A listener binds a TCP socket there (and enters a
 * JVM-wide table). Connecting to a listener of this JVM is done in place: the request ID appears
 * at once and accepting gives each QP its device's endpoint to the other's worker. Connecting to
 * another process goes through the socket ({@link UcxLink}): the requester sends its worker
 * address and QP number, the listener's thread makes the request ID, accepting answers with its
 * own and waits until the requester's QP is ready, so that nothing is sent to a QP that cannot take
 * it. The socket then stays open: closing it is the disconnect, and its end (also when the peer
 * process dies) moves the QP to the error state and reports {@code DISCONNECTED}.
 * In-process steps run under one JVM-wide lock, never on the data path; socket reads run on
 * virtual threads of their own.
 */
final class UcxCm implements ProviderCm {
    private static final Object CM = new Object();
    private static final ConcurrentHashMap<String, UcxCm> LISTENERS = new ConcurrentHashMap<>();

    private final CmContext ctx;
    /** Guarded by {@link #CM}. */
    private String listenAddress;
    /** The other end: for a request, the active ID; for the active ID, its request. Guarded by CM. */
    private UcxCm remote;
    /** The listening socket, while listening. Guarded by CM. */
    private java.net.ServerSocket server;
    /** The bootstrap connection to another process (a request made by one, or a connect to one). */
    private volatile UcxLink link;
    /** A request from another process: what its requester sent. */
    private UcxLink.Peer peer;

    UcxCm(CmContext ctx) {
        this.ctx = ctx;
        ctx.attach(this);
    }

    /** Checks {@code host:port}: a non-empty host and a port in [1, 65535]. */
    private String checked(String address) {
        int colon = address.lastIndexOf(':');
        int port = -1;
        if (colon > 0) {
            try {
                port = Integer.parseInt(address.substring(colon + 1));
            } catch (NumberFormatException e) {
                port = -1;
            }
        }
        if (port < 1 || port > 65535) {
            throw new RdmaException(Errno.EINVAL, ctx.cmId() + ": ucx address '" + address + "' is not host:port "
                    + "(a host and a port in [1, 65535])");
        }
        return address;
    }

    private static String host(String address) {
        return address.substring(0, address.lastIndexOf(':'));
    }

    private static int port(String address) {
        return Integer.parseInt(address.substring(address.lastIndexOf(':') + 1));
    }

    /**
     * @throws RdmaException {@link Errno#EBUSY} if the address is listened on in this JVM or its port is
     *                       taken; {@link Errno#EINVAL} for an address that is not host:port or not local
     */
    @Override
    public void listen(String address) {
        String a = checked(address);
        synchronized (CM) {
            if (LISTENERS.putIfAbsent(a, this) != null) {
                throw new RdmaException(Errno.EBUSY, ctx.cmId() + ": '" + a + "' is already listened on");
            }
            java.net.ServerSocket s = null;
            try {
                s = new java.net.ServerSocket();
                s.setReuseAddress(true);
                s.bind(new java.net.InetSocketAddress(host(a), port(a)));
            } catch (java.io.IOException | RuntimeException e) {
                LISTENERS.remove(a, this);
                closeQuietly(s);
                throw new RdmaException(e instanceof java.net.BindException ? Errno.EBUSY : Errno.EINVAL,
                        ctx.cmId() + ": cannot listen at '" + a + "': " + e.getMessage(), e);
            }
            listenAddress = a;
            server = s;
            java.net.ServerSocket listening = s;
            Thread.ofVirtual().name("regmem-ucx-listen-" + a).start(() -> acceptLoop(listening));
        }
    }

    private static void closeQuietly(java.io.Closeable c) {
        if (c != null) {
            try {
                c.close();
            } catch (java.io.IOException ignored) {
                // closing: nothing to report
            }
        }
    }

    /** Takes connections from other processes until the socket closes; each handshake on a thread of its own. */
    private void acceptLoop(java.net.ServerSocket s) {
        while (!s.isClosed()) {
            java.net.Socket socket;
            try {
                socket = s.accept();
            } catch (java.io.IOException closed) {
                return;
            }
            Thread.ofVirtual().name("regmem-ucx-hello").start(() -> hello(s, socket));
        }
    }

    /** Reads a requester's HELLO and makes its request ID (or drops a connection that is not one). */
    private void hello(java.net.ServerSocket s, java.net.Socket socket) {
        UcxLink l;
        UcxLink.Peer p;
        try {
            l = new UcxLink(socket);
            p = l.readHello();
        } catch (java.io.IOException e) {
            closeQuietly(socket);
            return; // not a regmem peer, or gone before it said who it is
        }
        synchronized (CM) {
            if (server != s || ctx.cmId().isDestroyed()) {
                l.close(); // stopped listening meanwhile: the requester sees a rejection
                return;
            }
            UcxCm request = (UcxCm) ctx.newRequest().attachment();
            request.link = l;
            request.peer = p;
            // A requester that goes away before the answer: the request stays until accept or reject fails on it.
        }
    }

    @Override
    public void connect(String address) {
        String a = checked(address);
        synchronized (CM) {
            UcxCm listener = LISTENERS.get(a);
            if (listener != null) {
                UcxCm request = (UcxCm) listener.ctx.newRequest().attachment();
                request.remote = this;
                remote = request;
                return;
            }
        }
        UcxQp mine = qp(ctx.qp());
        UcxLink l = UcxLink.connect(ctx.cmId().toString(), host(a), port(a));
        try {
            l.sendHello(mine.number, mine.device.workerAddress());
        } catch (java.io.IOException e) {
            l.close();
            throw new RdmaException(Errno.ENOENT, ctx.cmId() + ": the listener at '" + a + "' closed the connection: "
                    + e.getMessage(), e);
        }
        link = l;
        Thread.ofVirtual().name("regmem-ucx-connect-" + a).start(() -> awaitAnswer(l, mine));
    }

    /** The requester's side of the handshake, then its life line: ACCEPT (connect, READY) or REJECT, then the end. */
    private void awaitAnswer(UcxLink l, UcxQp mine) {
        try {
            int type = l.readType(() -> progressQuietly(mine.device)); // the acceptor's wire-up needs this worker
            if (type != UcxLink.ACCEPT) {
                l.close();
                rejectedIfWaiting();
                return;
            }
            UcxLink.Peer p = l.readAccept();
            if (ctx.cmId().isDestroyed() || ctx.state() != CmId.ConnState.CONNECTING) {
                l.close();
                return;
            }
            mine.connect(p.worker(), p.qp());
            l.sendByte(UcxLink.READY);
            ctx.established();
        } catch (java.io.IOException | RdmaException e) {
            l.close();
            rejectedIfWaiting(); // the listener went away (or sent something else) before the connection was up
            return;
        }
        l.awaitEnd();
        peerGone();
    }

    private void rejectedIfWaiting() {
        if (!ctx.cmId().isDestroyed() && ctx.state() == CmId.ConnState.CONNECTING) {
            ctx.rejected();
        }
    }

    /**
     * The link ended (the peer disconnected, or its process died): the QP errs, the ID reports
     * DISCONNECTED. A peer that refused a request and then closed sent its verdict over UCX before
     * the socket closed: the QP waits up to {@link #VERDICT_GRACE_NANOS} for the requests it still has
     * under way to be answered (the user's polls reap them), so that they complete with the peer's
     * verdict rather than a flush; a killed peer answers nothing and the wait runs out.
     */
    private void peerGone() {
        if (ctx.cmId().isDestroyed()) {
            return;
        }
        QpContext qp = ctx.qp();
        if (qp != null) {
            UcxQp mine = qp(qp);
            long deadline = System.nanoTime() + VERDICT_GRACE_NANOS;
            while (mine.busy() && System.nanoTime() < deadline && !ctx.cmId().isDestroyed()) {
                java.util.concurrent.locks.LockSupport.parkNanos(1_000_000L);
            }
            qp.toError();
        }
        ctx.disconnected();
    }

    /**
     * The link of a request from another process. A request is published to {@code getRequest()}
     * inside the block (under {@code CM}) that then sets its link, so a reader that finds none yet
     * takes {@code CM} to be sure: after it, the link is there if the request has one.
     */
    private UcxLink link() {
        UcxLink l = link;
        if (l == null) {
            synchronized (CM) {
                l = link;
            }
        }
        return l;
    }

    /** How long a QP whose link ended waits for answers to what it still has under way. */
    static final long VERDICT_GRACE_NANOS = 200_000_000L;

    @Override
    public void accept() {
        UcxLink l = link();
        if (l != null) {
            acceptRemote(l);
            return;
        }
        synchronized (CM) {
            UcxCm active = remote;
            if (active == null || active.ctx.cmId().isDestroyed() || active.ctx.qp() == null
                    || active.ctx.state() != CmId.ConnState.CONNECTING) {
                throw new RdmaException(Errno.EINVAL, ctx.cmId() + ": accept needs a pending request, a QP, and a "
                        + "requester that still waits (state " + ctx.state() + ")");
            }
            UcxQp mine = qp(ctx.qp());
            UcxQp theirs = qp(active.ctx.qp());
            byte[] myWorker = mine.device.workerAddress();
            byte[] theirWorker = theirs.device.workerAddress();
            theirs.connect(myWorker, mine.number);
            mine.connect(theirWorker, theirs.number);
            theirs.localPeer = mine;
            mine.localPeer = theirs;
            active.ctx.established();
            ctx.established();
        }
    }

    /**
     * Accepts a request from another process: connects the QP, answers ACCEPT and waits for READY
     * (at most {@link UcxLink#HANDSHAKE_MILLIS}); then the link is watched for its end.
     */
    private void acceptRemote(UcxLink l) {
        UcxQp mine = qp(ctx.qp());
        try {
            mine.connect(peer.worker(), peer.qp());
            l.sendAccept(mine.number, mine.device.workerAddress());
            if (l.readType(() -> progressQuietly(mine.device)) != UcxLink.READY) {
                throw new java.io.IOException("no READY");
            }
        } catch (java.io.IOException e) {
            ctx.qp().toError();
            l.close();
            throw new RdmaException(Errno.EINVAL, ctx.cmId() + ": accept: the requester went away (" + e.getMessage() + ")", e);
        }
        ctx.established();
        Thread.ofVirtual().name("regmem-ucx-link").start(() -> {
            l.awaitEnd();
            peerGone();
        });
    }

    private static void progressQuietly(UcxDevice device) {
        try {
            device.progress();
        } catch (RdmaException closed) {
            // the device is closing: the handshake fails on its own
        }
    }

    private static UcxQp qp(QpContext qp) {
        return (UcxQp) qp.attachment();
    }

    @Override
    public void reject() {
        UcxLink l = link();
        if (l != null) {
            try {
                l.sendByte(UcxLink.REJECT);
            } catch (java.io.IOException gone) {
                // the requester went away: nothing to tell
            }
            l.close();
            return;
        }
        synchronized (CM) {
            UcxCm active = remote;
            if (active != null) {
                active.remote = null;
                active.ctx.rejected();
            }
            remote = null;
        }
    }

    @Override
    public void disconnect() {
        UcxLink l = link();
        if (l != null) {
            QpContext qp = ctx.qp();
            if (qp != null) {
                qp.toError();
            }
            l.close(); // the peer's link ends: its QP errs and its ID reports DISCONNECTED
            return;
        }
        synchronized (CM) {
            QpContext qp = ctx.qp();
            if (qp != null) {
                qp.toError();
            }
            UcxCm other = remote;
            if (other != null) {
                QpContext peer = other.ctx.qp();
                if (peer != null) {
                    peer.toError(); // the peer loses its connection, as a disconnect request would tell it
                }
                other.ctx.disconnected();
            }
        }
    }

    @Override
    public void destroy() {
        UcxLink l = link();
        if (l != null) {
            l.close();
        }
        synchronized (CM) {
            if (listenAddress != null) {
                LISTENERS.remove(listenAddress, this);
                listenAddress = null;
                closeQuietly(server);
                server = null;
            }
            UcxCm other = remote;
            if (other != null) {
                if (other.remote == this) {
                    other.remote = null;
                }
                if (other.ctx.state() == CmId.ConnState.CONNECTING) {
                    other.ctx.rejected();
                }
            }
            remote = null;
        }
    }
}
