package io.regmem.registration.ucx;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.link.HostPort;
import io.regmem.registration.link.Link;
import io.regmem.registration.link.Listener;
import io.regmem.registration.link.Refusal;
import io.regmem.registration.shm.SameHostLane;
import io.regmem.registration.spi.CmContext;
import io.regmem.registration.spi.LocalRendezvous;
import io.regmem.registration.spi.ProviderCm;
import io.regmem.registration.spi.QpContext;
import java.io.IOException;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.util.concurrent.locks.LockSupport;

/**
 * UCX connection setup by {@code host:port}. A listener binds a TCP socket there (and enters a
 * JVM-wide table). Connecting to a listener of this JVM is done in place: the request ID appears
 * at once and accepting gives each QP its device's endpoint to the other's worker. Connecting to
 * another process goes through the socket ({@link Link}): the requester sends its worker
 * address and QP number, the listener's thread makes the request ID, accepting answers with its
 * own and waits until the requester's QP is ready, so that nothing is sent to a QP that cannot take
 * it. The socket then stays open: closing it is the disconnect, and its end (also when the peer
 * process dies) moves the QP to the error state and reports {@code DISCONNECTED}.
 * In-process steps run under one JVM-wide lock, never on the data path; socket reads run on
 * virtual threads of their own.
 *
 * <p>A listener takes a connection from another process only through the authenticated handshake
 * that every provider connecting processes shares ({@link Listener}, {@link Link}): a peer that does
 * not prove it holds the device's secret costs the listener one log line (System.Logger
 * {@code io.regmem.registration.ucx}, WARNING) and a closed socket, nothing of what it sent reaches
 * UCX, and connections that idle, trickle or reconnect cannot keep a real client out.
 */
final class UcxCm implements ProviderCm {
    private static final System.Logger LOG = System.getLogger("io.regmem.registration.ucx");
    /** What the shared handshake calls this provider and its address. */
    static final Link.Kind KIND = new Link.Kind("ucx", "worker address");
    private static final Object CM = new Object();
    /** Connection setup between ucx IDs of this JVM (no socket: the two QPs connect directly). */
    private static final LocalRendezvous LOCAL = new LocalRendezvous();

    private final CmContext ctx;
    /** Guarded by {@link #CM}. */
    private String listenAddress;
    /** This ID's end of the in-JVM rendezvous. */
    private final LocalRendezvous.End local;
    /** The listening socket, while listening. Guarded by CM. */
    private Listener server;
    /** The bootstrap connection to another process (a request made by one, or a connect to one). */
    private volatile Link link;
    /** A request from another process: what its requester sent, and its address (written before link). */
    private Link.Peer peer;
    private UcxHello hello;
    private final UcxDevice device;

    UcxCm(UcxDevice device, CmContext ctx) {
        this.device = device;
        this.ctx = ctx;
        this.local = LOCAL.end(ctx);
        ctx.attach(this);
    }

    @Override
    public LocalRendezvous.End localEnd() {
        return local;
    }

    /** Checks {@code host:port}: a non-empty host and a port in [1, 65535]. */
    private String checked(String address) {
        HostPort.parse(ctx.name(), "ucx", address);
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
        byte[] secret = device.secret(); // before anything is bound: a listener without one takes nobody
        local.listen(a); // EBUSY if an ID of this JVM listens there
        synchronized (CM) {
            try {
                server = Listener.open(ctx.name(), host(a), port(a), secret, device.handshakeMillis(), KIND, LOG,
                        this::requested);
            } catch (RdmaException e) {
                local.unlisten();
                throw e;
            }
            listenAddress = a;
        }
    }

    /** An authenticated HELLO on this ID's listener: the request ID (or, if it stopped listening, a rejection). */
    private void requested(Listener from, Link l, Link.Peer p) {
        UcxHello hello;
        try {
            hello = UcxHello.decode(p.address());
        } catch (IOException e) {
            from.refused(l.peerAddress(), e.getMessage());
            l.sendRefused(Refusal.ofAddress(e));
            l.close();
            return;
        }
        synchronized (CM) {
            if (server != from || ctx.isDestroyed()) {
                l.close(); // stopped listening meanwhile: the requester sees a rejection
                return;
            }
            UcxCm request = UcxContexts.cm(ctx.newRequest(p.privateData(), l.peerAddress()));
            request.peer = p;
            request.hello = hello;
            request.link = l; // last: its volatile write publishes peer and hello to a reader that skips CM
            // A requester that goes away before the answer: the request stays until accept or reject fails on it.
        }
    }

    @Override
    public void connect(String address, byte[] privateData) {
        String a = checked(address);
        if (local.connect(a, privateData)) {
            return; // an ID of this JVM listens there
        }
        byte[] secret = device.secret();
        UcxQp mine = qp(ctx.qp());
        Link l = Link.connect(ctx.name(), KIND, host(a), port(a), secret, device.handshakeMillis());
        link = l;
        Thread.ofVirtual().name("regmem-ucx-connect-" + a).start(() -> handshake(l, mine, a, privateData));
    }

    /**
     * The requester's side of the handshake, then its life line: the listener's challenge, HELLO,
     * then an authenticated ACCEPT (connect the QP, READY) or REJECT; then the end. A listener that
     * does not prove it holds the secret is a rejection, and a log line; its worker address never
     * reaches UCX.
     */
    private void handshake(Link l, UcxQp mine, String address, byte[] privateData) {
        try {
            long deadline = l.deadline();
            l.readChallenge(deadline);
            // A worker of its own for the connections to this listener: a peer process that dies in
            // the middle of a send stops only its own connections' receives (UcxChannel).
            byte[] worker = mine.useChannel("listener " + address);
            SameHostLane lane = device.lanes.lane();
            l.sendHello(mine.number, mine.localToken, new UcxHello(worker, lane == null ? null : lane.requesterOffer()).encode(),
                    privateData);
            // The answer waits for the listener's application to accept; its wire-up needs this worker.
            Object answer = l.readAnswer(l.deadline(), () -> progressQuietly(mine.device));
            if (answer instanceof Link.Rejected r) {
                l.close();
                rejectedIfWaiting(r.privateData());
                return;
            }
            Link.Peer p = (Link.Peer) answer;
            if (ctx.isDestroyed() || !ctx.isConnecting()) {
                l.close();
                return;
            }
            UcxHello theirs = UcxHello.decode(p.address());
            if (theirs.laneOffer() != null) {
                if (lane == null) {
                    throw new IOException("the listener answered a same-host lane this device did not offer");
                }
                String why = UcxLaneSetup.join(l, mine, lane, theirs.laneOffer());
                if (why == null) {
                    l.sendReady();
                } else { // over UCX, as if the lane were off: the listener answers again
                    LOG.log(System.Logger.Level.DEBUG, "regmem ucx: " + ctx.name() + ": no same-host lane to " + address + ": "
                            + why + "; the connection goes over UCX");
                    l.sendNoLane();
                    Object again = l.readAnswer(l.deadline(), () -> progressQuietly(mine.device));
                    if (again instanceof Link.Rejected r) {
                        l.close();
                        rejectedIfWaiting(r.privateData());
                        return;
                    }
                    Link.Peer q = (Link.Peer) again;
                    UcxHello overUcx = UcxHello.decode(q.address());
                    if (overUcx.laneOffer() != null) {
                        throw new IOException("the listener offered the same-host lane again after NO_LANE");
                    }
                    mine.connect(overUcx.worker(), q.qp(), q.token());
                    l.sendReady();
                }
            } else {
                mine.connect(theirs.worker(), p.qp(), p.token());
                l.sendReady();
            }
            took(mine, address);
            ctx.established(p.privateData());
        } catch (IOException | RuntimeException e) {
            l.close();
            if (!ctx.isDestroyed() && ctx.isConnecting()) {
                LOG.log(System.Logger.Level.WARNING, "regmem ucx: " + ctx.name() + ": connecting to " + address
                        + " failed: " + e.getMessage());
            }
            failedIfWaiting(e);
            return;
        }
        l.awaitEnd();
        peerGone();
    }

    /** The request failed on its way (not the peer's rejection): the ID reports REJECTED with {@code e} as the reason. */
    private void failedIfWaiting(Exception e) {
        if (!ctx.isDestroyed() && ctx.isConnecting()) {
            ctx.failed(e instanceof IOException ? e.getMessage() : e.toString());
        }
    }

    private void rejectedIfWaiting(byte[] privateData) {
        if (!ctx.isDestroyed() && ctx.isConnecting()) {
            ctx.rejected(privateData);
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
        try {
            endConnection();
        } catch (RuntimeException | Error e) { // (the link's thread is regmem's: nothing escapes it)
            LOG.log(System.Logger.Level.WARNING, "regmem ucx: " + ctx.name() + ": ending the connection after its peer went "
                    + "failed", e);
        }
    }

    /** The connection's end after its peer went: the QP errs, the ID reports DISCONNECTED. */
    private void endConnection() {
        if (ctx.isDestroyed()) {
            return;
        }
        QpContext qp = ctx.qp();
        if (qp != null) {
            UcxQp mine = qp(qp);
            SameHostLane.Qp lane = mine.lane;
            if (lane != null) {
                lane.peerGone(); // what the peer wrote into the rings is taken, then the QP errs
            } else {
                mine.device.retireChannel(mine.channel); // the peer may be gone: no new connection joins its channel
                long deadline = System.nanoTime() + VERDICT_GRACE_NANOS;
                while (mine.busy() && System.nanoTime() < deadline && !ctx.isDestroyed()) {
                    LockSupport.parkNanos(1_000_000L);
                }
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
    private Link link() {
        Link l = link;
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
    public void accept(byte[] privateData) {
        Link l = link();
        if (l != null) {
            acceptRemote(l, privateData);
            return;
        }
        local.accept(privateData, UcxCm::linkLocal);
    }

    /** Connects two QPs of this JVM (an accepted in-JVM request) to each other's workers. */
    private static void linkLocal(QpContext passive, QpContext active) {
        UcxQp mine = qp(passive);
        UcxQp theirs = qp(active);
        SameHostLane myLane = mine.device.lanes.lane();
        SameHostLane theirLane = theirs.device.lanes.lane();
        if (myLane != null && theirLane != null) {
            SameHostLane.linkLocal(mine.useLane(myLane, null), theirs.useLane(theirLane, null));
            took(mine, "a QP of this JVM");
            return;
        }
        mine.useMainChannel(); // (a QP whose connection to another process failed may hold a channel)
        theirs.useMainChannel();
        byte[] myWorker = mine.device.workerAddress();
        byte[] theirWorker = theirs.device.workerAddress();
        theirs.connect(myWorker, mine.number, mine.localToken);
        mine.connect(theirWorker, theirs.number, theirs.localToken);
        theirs.localPeer = mine;
        mine.localPeer = theirs;
        took(mine, "a QP of this JVM");
    }

    /** The debug line that says which way a connection took. */
    private static void took(UcxQp qp, String peer) {
        if (LOG.isLoggable(System.Logger.Level.DEBUG)) {
            LOG.log(System.Logger.Level.DEBUG, "regmem ucx: " + qp.ctx.name() + ": connected to " + peer
                    + (qp.lane != null ? " over the same-host lane" : " over UCX (" + qp.channel + ")"));
        }
    }

    /**
     * Accepts a request from another process: connects the QP (the requester's worker address was
     * authenticated with its HELLO), answers ACCEPT and waits for the authenticated READY (at most
     * the handshake's time); then the link is watched for its end. A failure closes the link (the
     * requester sees a rejection) and leaves the QP in the error state.
     */
    private void acceptRemote(Link l, byte[] privateData) {
        UcxQp mine = qp(ctx.qp());
        SameHostLane lane = hello.laneOffer() == null ? null : device.lanes.lane();
        try {
            if (lane == null) {
                acceptOverUcx(l, mine, privateData, false);
            } else if (!UcxLaneSetup.accept(l, mine, lane, hello, privateData)) {
                // A peer of this host the lane cannot reach (another namespace): UCX's shared-memory
                // transports would not reach it either, so its channel has network transports only.
                acceptOverUcx(l, mine, privateData, SameHostLane.sameHost(hello.laneOffer()));
            }
        } catch (IOException | RuntimeException e) {
            ctx.qp().toError();
            l.close();
            Errno errno = e instanceof SocketTimeoutException ? Errno.ETIMEDOUT
                    : e instanceof RdmaException r ? r.errno() : Errno.ECONNRESET;
            throw new RdmaException(errno, ctx.name() + ": accept of the request from " + l.peerAddress() + " failed: "
                    + e.getMessage(), e);
        }
        took(mine, l.peerAddress());
        ctx.established(null);
        Thread.ofVirtual().name("regmem-ucx-link").start(() -> {
            l.awaitEnd();
            peerGone();
        });
    }

    /**
     * Accepts over UCX: the QP connects to the requester's worker, ACCEPT with this side's, then READY;
     * {@code networkOnly}: on a channel without shared-memory transports.
     */
    private void acceptOverUcx(Link l, UcxQp mine, byte[] privateData, boolean networkOnly) throws IOException {
        Object peerKey = ByteBuffer.wrap(hello.worker().clone());
        byte[] worker = mine.useChannel(networkOnly ? new UcxChannels.OverNetwork(peerKey) : peerKey); // one per requester worker
        mine.connect(hello.worker(), peer.qp(), peer.token());
        l.sendAccept(mine.number, mine.localToken, new UcxHello(worker, null).encode(), privateData);
        l.awaitReady(l.deadline(), () -> progressQuietly(mine.device));
    }

    private static void progressQuietly(UcxDevice device) {
        try {
            device.progress();
        } catch (RdmaException closed) {
            // the device is closing: the handshake fails on its own
        }
    }

    private static UcxQp qp(QpContext qp) {
        return UcxContexts.qp(qp);
    }

    @Override
    public void reject(byte[] privateData) {
        Link l = link();
        if (l != null) {
            try {
                l.sendReject(privateData);
            } catch (IOException gone) {
                // the requester went away: nothing to tell
            }
            l.close();
            return;
        }
        local.reject(privateData);
    }

    @Override
    public void disconnect() {
        Link l = link();
        if (l != null) {
            QpContext qp = ctx.qp();
            if (qp != null) {
                UcxQp mine = qp(qp);
                if (mine.lane == null) {
                    mine.device.retireChannel(mine.channel);
                }
                qp.toError();
            }
            l.close(); // the peer's link ends: its QP errs and its ID reports DISCONNECTED
            return;
        }
        local.disconnect();
    }

    @Override
    public void destroy() {
        Link l = link();
        if (l != null) {
            l.close();
        }
        local.destroy();
        synchronized (CM) {
            if (listenAddress != null) {
                listenAddress = null;
                server.close();
                server = null;
            }
        }
    }
}
