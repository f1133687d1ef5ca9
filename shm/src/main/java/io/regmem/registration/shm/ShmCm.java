package io.regmem.registration.shm;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.link.HostPort;
import io.regmem.registration.link.Link;
import io.regmem.registration.link.Listener;
import io.regmem.registration.link.Refusal;
import io.regmem.registration.spi.CmContext;
import io.regmem.registration.spi.LocalRendezvous;
import io.regmem.registration.spi.ProviderCm;
import io.regmem.registration.spi.QpContext;
import java.io.IOException;
import java.net.SocketTimeoutException;

/**
 * shm connection setup by {@code host:port}, as ucx's: a listener binds a TCP socket there. Between
 * two IDs of this JVM the connection is made in place (one memfd, mapped by each side). Between
 * processes, the authenticated handshake every provider shares ({@link Link}, {@link Listener})
 * carries each side's {@link LaneOffer}; accepting hands the requester a one-time abstract socket
 * where it passes the lane's memfd ({@link LaneSetup}); the TCP socket then stays open as the
 * connection's life line: closing it is the disconnect, and its end (at once when the peer process
 * dies, SIGKILL included) moves the QP to the error state, after it took what the peer had already
 * written into the rings, and reports {@code DISCONNECTED}. A peer on another host is refused.
 */
final class ShmCm implements ProviderCm {
    private static final System.Logger LOG = System.getLogger("io.regmem.registration.shm");
    static final Link.Kind KIND = new Link.Kind("shm", "lane offer");
    private static final Object CM = new Object();
    private static final LocalRendezvous LOCAL = new LocalRendezvous();

    private final ShmDevice device;
    private final CmContext ctx;
    private final LocalRendezvous.End local;
    /** Guarded by CM. */
    private Listener server;
    /** The life line to another process (a request made by one, or a connect to one). */
    private volatile Link link;
    /** A request from another process: what its requester offered (written before link). */
    private LaneOffer peerOffer;

    ShmCm(ShmDevice device, CmContext ctx) {
        this.device = device;
        this.ctx = ctx;
        this.local = LOCAL.end(ctx);
        ctx.attach(this);
    }

    @Override
    public LocalRendezvous.End localEnd() {
        return local;
    }

    @Override
    public void listen(String address) {
        HostPort a = HostPort.parse(ctx.name(), "shm", address);
        byte[] secret = device.secret();
        local.listen(address);
        synchronized (CM) {
            try {
                server = Listener.open(ctx.name(), a.host(), a.port(), secret, device.handshakeMillis, KIND, LOG, this::requested);
            } catch (RdmaException e) {
                local.unlisten();
                throw e;
            }
        }
    }

    /** An authenticated HELLO: the request ID, if its offer is a same-host lane's. */
    private void requested(Listener from, Link l, Link.Peer p) {
        LaneOffer offer;
        try {
            offer = LaneOffer.decode(p.address(), false);
            String unreachable = LaneSetup.unreachable(offer);
            if (unreachable != null) {
                throw new Refusal.Refused(Refusal.UNREACHABLE, unreachable + "; the shm provider connects processes that "
                        + "share a host and a network namespace (use ucx otherwise)");
            }
        } catch (IOException e) {
            from.refused(l.peerAddress(), e.getMessage());
            l.sendRefused(e instanceof Refusal.Refused r ? r.reason() : Refusal.ofAddress(e));
            l.close();
            return;
        }
        synchronized (CM) {
            if (server != from || ctx.isDestroyed()) {
                l.close();
                return;
            }
            ShmCm request = ShmContexts.cm(ctx.newRequest(p.privateData(), l.peerAddress()));
            request.peerOffer = offer;
            request.link = l; // last: its volatile write publishes peerOffer to a reader that skips CM
        }
    }

    @Override
    public void connect(String address, byte[] privateData) {
        HostPort a = HostPort.parse(ctx.name(), "shm", address);
        if (local.connect(address, privateData)) {
            return;
        }
        byte[] secret = device.secret();
        ShmQp mine = ShmContexts.qp(ctx.qp());
        Link l = Link.connect(ctx.name(), KIND, a.host(), a.port(), secret, device.handshakeMillis);
        link = l;
        Thread.ofVirtual().name("regmem-shm-connect-" + address).start(() -> handshake(l, mine, address, privateData));
    }

    /** The requester's side: challenge, HELLO with its offer, the answer; then the lane, READY, and the life line. */
    private void handshake(Link l, ShmQp mine, String address, byte[] privateData) {
        try {
            long deadline = l.deadline();
            l.readChallenge(deadline);
            l.sendHello(0, Link.token(), LaneSetup.offer(device.ringBytes).encode(), privateData);
            Object answer = l.readAnswer(l.deadline(), () -> { });
            if (answer instanceof Link.Rejected r) {
                l.close();
                rejectedIfWaiting(r.privateData());
                return;
            }
            Link.Peer p = (Link.Peer) answer;
            LaneOffer theirs = LaneSetup.listenerOffer(p.address(), device.ringBytes);
            if (ctx.isDestroyed() || !ctx.isConnecting()) {
                l.close();
                return;
            }
            Lane lane = LaneSetup.join(theirs, device.ringBytes, l.deadline(), device.pull, device.sleeps());
            mine.onBroken = this::peerBroke;
            mine.connect(lane);
            l.sendReady();
            ctx.established(p.privateData());
        } catch (IOException | RuntimeException e) {
            l.close();
            if (!ctx.isDestroyed() && ctx.isConnecting()) {
                LOG.log(System.Logger.Level.WARNING, "regmem shm: " + ctx.name() + ": connecting to " + address + " failed: "
                        + e.getMessage());
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

    /** The life line ended: the QP takes what the peer wrote, then errs; the ID reports DISCONNECTED. */
    private void peerGone() {
        try {
            endConnection();
        } catch (RuntimeException | Error e) { // (the link's thread is regmem's: nothing escapes it)
            LOG.log(System.Logger.Level.WARNING, "regmem shm: " + ctx.name() + ": ending the connection after its peer went "
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
            ShmContexts.qp(qp).peerGone();
        }
        ctx.disconnected();
    }

    /** The peer broke the lane's rules: the life line is cut (the peer's QP errs too). */
    void peerBroke() {
        Link l = link();
        if (l != null) {
            l.close();
        }
    }

    private Link link() {
        Link l = link;
        if (l == null) {
            synchronized (CM) {
                l = link;
            }
        }
        return l;
    }

    @Override
    public void accept(byte[] privateData) {
        Link l = link();
        if (l != null) {
            acceptRemote(l, privateData);
            return;
        }
        local.accept(privateData, (passive, active) -> ShmQp.linkLocal(ShmContexts.qp(passive), ShmContexts.qp(active)));
    }

    /**
     * Accepts a request from another process: ACCEPT with this side's offer and a one-time socket,
     * the requester's memfd on it, then its authenticated READY (all within the handshake's time);
     * then the life line is watched. A failure closes the link (the requester sees a rejection) and
     * leaves the QP in the error state.
     */
    private void acceptRemote(Link l, byte[] privateData) {
        ShmQp mine = ShmContexts.qp(ctx.qp());
        long ring = peerOffer.ringBytes();
        try (LaneSetup.Listening listening = new LaneSetup.Listening(ring)) {
            l.sendAccept(0, Link.token(), listening.offer.encode(), privateData);
            long deadline = l.deadline();
            Lane lane = listening.complete(peerOffer, deadline, device.pull, device.sleeps(), l::peerClosed);
            try {
                l.awaitReady(deadline, () -> { });
            } catch (IOException | RuntimeException e) {
                lane.close();
                throw e;
            }
            mine.onBroken = this::peerBroke;
            mine.connect(lane);
        } catch (IOException | RuntimeException e) {
            ctx.qp().toError();
            l.close();
            Errno errno = e instanceof SocketTimeoutException ? Errno.ETIMEDOUT
                    : e instanceof RdmaException r ? r.errno() : Errno.ECONNRESET;
            throw new RdmaException(errno, ctx.name() + ": accept of the request from " + l.peerAddress() + " failed: "
                    + e.getMessage(), e);
        }
        ctx.established(null);
        Thread.ofVirtual().name("regmem-shm-link").start(() -> {
            l.awaitEnd();
            peerGone();
        });
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
                qp.toError();
            }
            l.close();
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
            if (server != null) {
                server.close();
                server = null;
            }
        }
    }
}
