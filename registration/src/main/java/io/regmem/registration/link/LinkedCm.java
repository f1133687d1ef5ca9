package io.regmem.registration.link;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.UdParam;
import io.regmem.registration.spi.CmContext;
import io.regmem.registration.spi.LocalRendezvous;
import io.regmem.registration.spi.ProviderCm;
import io.regmem.registration.spi.QpContext;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.SocketTimeoutException;
import java.net.UnknownHostException;
import java.security.MessageDigest;
import java.util.function.Supplier;

/**
 * The connection layer of every provider that connects by {@code host:port} (shm, ucx): a
 * {@link ProviderCm} that does all but the data path's set-up. It listens (a {@link Listener}: a TCP
 * socket there, admission with the MaxStartups-style drop, the secret's authenticated handshake),
 * turns each authenticated request into a request ID, connects IDs of one JVM through the
 * provider's {@link LocalRendezvous} and other processes through a {@link Link}, reports the CM
 * events, and keeps the link open as the connection's life line: closing it is the disconnect, and
 * its end (at once when the peer process dies, SIGKILL included) ends the connection and reports
 * {@code DISCONNECTED}. In-process steps run under one JVM-wide lock, never on the data path; the
 * handshake and the life line run on virtual threads of their own, and nothing escapes them.
 *
 * <p>A provider supplies what differs: what its HELLO and ACCEPT carry and how a connection's data
 * path is made from them ({@link #admit}, {@link #request}, {@link #acceptRequest}), how two QPs of
 * one JVM are linked ({@link #linkLocal}) and what its QP does when the peer goes
 * ({@link #peerGone(QpContext)}).
 */
public abstract class LinkedCm implements ProviderCm {
    /** Guards every ID's listener and the publication of a request's link. */
    private static final Object CM = new Object();

    protected final CmContext ctx;
    protected final Link.Kind kind;
    protected final System.Logger log;
    private final LocalRendezvous.End local;
    private final Supplier<byte[]> secret;
    private final int handshakeMillis;
    /** The listening socket, while listening. Guarded by CM. */
    private Listener server;
    /** A socket {@link #bind} bound that {@link #listen} has not started yet. Guarded by CM. */
    private ServerSocket bound;
    /** The life line to another process (a request made by one, or a connect to one). */
    private volatile Link link;
    /** A request ID's: its application accepted or rejected it. */
    private volatile boolean answered;
    /** A request from another process: what {@link #admit} made of its HELLO (written before link). */
    private Object requested;

    /**
     * A subclass attaches itself to {@code ctx} ({@code ctx.attach(this)}) at the end of its constructor.
     *
     * @param secret          the device's secret, asked for before anything is bound or sent (it
     *                        throws where the device has none)
     * @param handshakeMillis how long each half of the handshake may take
     */
    protected LinkedCm(CmContext ctx, LocalRendezvous rendezvous, Link.Kind kind, System.Logger log, Supplier<byte[]> secret,
            int handshakeMillis) {
        this.ctx = ctx;
        this.secret = secret;
        this.handshakeMillis = handshakeMillis;
        this.kind = kind;
        this.log = log;
        this.local = rendezvous.end(ctx);
    }

    /**
     * The listener's side: what an authenticated HELLO's address says, decoded and checked; it is
     * handed back to {@link #acceptRequest}.
     *
     * @throws IOException to refuse the requester ({@link Refusal.Refused} names the reason; any
     *                     other: a malformed address)
     */
    protected abstract Object admit(Link.Peer hello) throws IOException;

    /**
     * The requester's side, after the listener's challenge: sends HELLO, takes the answer
     * ({@link #awaitAccept}), connects {@code qp} and sends READY.
     *
     * @return the accepting side's ACCEPT, or null if the request ended (rejected, or the ID went:
     *         {@link #awaitAccept} has then told the ID and closed the link)
     */
    protected abstract Link.Peer request(Link l, QpContext qp, String address, byte[] privateData) throws IOException;

    /**
     * The listener's side of an accept: makes the data path from {@code admitted} ({@link #admit}'s),
     * sends ACCEPT and waits for the authenticated READY (within the handshake's time).
     */
    protected abstract void acceptRequest(Link l, QpContext qp, Object admitted, byte[] privateData) throws IOException;

    /** Connects two QPs of this JVM (an accepted in-JVM request). */
    protected abstract void linkLocal(QpContext passive, QpContext active);

    /** The life line ended: the QP takes what the peer had sent, then errs. */
    protected abstract void peerGone(QpContext qp);

    /** This side disconnects: the QP errs (before the life line is closed). */
    protected void disconnecting(QpContext qp) {
        qp.toError();
    }

    @Override
    public final LocalRendezvous.End localEnd() {
        return local;
    }

    /**
     * Resolves {@code host:port}'s host by name (the address stays as given).
     *
     * @throws RdmaException {@link Errno#EINVAL} for an address that is not host:port;
     *                       {@link Errno#EHOSTUNREACH} for a host that does not resolve
     */
    @Override
    public String resolve(String address) {
        HostPort a = HostPort.parse(ctx.name(), kind.provider(), address); // EINVAL: not host:port
        try {
            InetAddress.getByName(a.host());
        } catch (UnknownHostException e) {
            throw new RdmaException(Errno.EHOSTUNREACH, ctx.name() + ": resolveAddr(" + address + "): host " + a.host()
                    + " does not resolve");
        }
        return address;
    }

    /**
     * Binds a TCP socket at {@code address} (port 0: one the system picks) that {@link #listen} then
     * takes connections on.
     *
     * @throws RdmaException {@link Errno#EADDRINUSE} if the port is taken; {@link Errno#EINVAL} for an
     *                       address that is not host:port or not local
     */
    @Override
    public final String bind(String address) {
        HostPort a = HostPort.parseForBind(ctx.name(), kind.provider(), address);
        ServerSocket s = Listener.bind(ctx.name(), a.host(), a.port(), Errno.EADDRINUSE, ctx.reuseAddress());
        synchronized (CM) {
            bound = s;
        }
        return a.host() + ":" + s.getLocalPort();
    }

    /**
     * @throws RdmaException {@link Errno#EBUSY} if the address is listened on in this JVM or its port is
     *                       taken; {@link Errno#EINVAL} for an address that is not host:port or not local
     */
    @Override
    public final void listen(String address) {
        HostPort a = HostPort.parse(ctx.name(), kind.provider(), address);
        byte[] secret = this.secret.get(); // before anything is bound: a listener without one takes nobody
        local.listen(address); // EBUSY if an ID of this JVM listens there
        synchronized (CM) {
            try {
                server = bound != null
                        ? Listener.start(bound, a.host(), secret, handshakeMillis, kind, log, this::requested)
                        : Listener.start(Listener.bind(ctx.name(), a.host(), a.port(), Errno.EBUSY, ctx.reuseAddress()), a.host(),
                                secret, handshakeMillis, kind, log, this::requested);
                bound = null;
            } catch (RdmaException e) {
                local.unlisten();
                throw e;
            }
        }
    }

    /** An authenticated HELLO on this ID's listener: the request ID (or, if it stopped listening, a rejection). */
    private void requested(Listener from, Link l, Link.Peer p) {
        Object admitted;
        try {
            boolean ud = UdHello.is(p.address());
            if (ud != ctx.udpPortSpace()) {
                throw new Refusal.Refused(Refusal.ANOTHER_PORT_SPACE, ud ? "a UD address exchange reached a TCP port space "
                        + "listener" : "a connection request reached a UDP port space listener");
            }
            admitted = ud ? UdHello.decode(p.address()) : admit(p);
        } catch (IOException e) {
            from.refused(l.peerAddress(), e.getMessage());
            l.sendRefused(e instanceof Refusal.Refused r ? r.reason() : Refusal.ofAddress(e));
            l.close();
            return;
        }
        synchronized (CM) {
            if (server != from || ctx.isDestroyed()) {
                l.sendRefused(Refusal.WITHDRAWN); // stopped listening meanwhile: the requester sees a rejection
                l.close();
                return;
            }
            LinkedCm request = (LinkedCm) ctx.newRequest(p.privateData(), l.peerAddress()).attachment();
            request.requested = admitted;
            request.link = l; // last: its volatile write publishes requested to a reader that skips CM
            // A requester that goes away before the answer: the request stays until accept or reject fails on it.
        }
    }

    @Override
    public final void connect(String address, byte[] privateData) {
        HostPort a = HostPort.parse(ctx.name(), kind.provider(), address);
        byte[] secret = this.secret.get();
        Boolean inJvm = local.connect(address, privateData, l -> l.attachment() instanceof LinkedCm c
                && MessageDigest.isEqual(c.secret.get(), secret));
        if (inJvm != null) { // an ID of this JVM listens there: no handshake, but the same secret is needed
            if (!inJvm) {
                ctx.failed("the listener at " + address + " refused the connection: " + Refusal.SECRET_DIFFERS.meaning(),
                        CmContext.Failure.REFUSED);
            }
            return;
        }
        QpContext qp = ctx.qp();
        Link l = Link.connect(ctx.name(), kind, a.host(), a.port(), secret, handshakeMillis);
        link = l;
        ctx.sourceAddress(l.localAddress());
        Thread.ofVirtual().name("regmem-" + kind.provider() + "-connect-" + address)
                .start(() -> handshake(l, qp, address, privateData));
    }

    /** The requester's side: the challenge, the provider's request, ESTABLISHED; then the life line. */
    private void handshake(Link l, QpContext qp, String address, byte[] privateData) {
        try {
            l.readChallenge(l.deadline());
            if (ctx.udpPortSpace()) {
                exchangeDatagramParams(l, privateData);
                return; // (nothing between the two QPs afterwards: no life line)
            }
            Link.Peer accepted = request(l, qp, address, privateData);
            if (accepted == null) {
                return;
            }
            ctx.established(accepted.privateData());
        } catch (IOException | RuntimeException e) {
            l.close();
            if (!ctx.isDestroyed() && ctx.isConnecting()) {
                log.log(System.Logger.Level.WARNING, "regmem " + kind.provider() + ": " + ctx.name() + ": connecting to "
                        + address + " failed: " + e.getMessage());
                ctx.failed(e instanceof IOException ? e.getMessage() : e.toString(), e instanceof SocketTimeoutException
                        ? CmContext.Failure.UNREACHABLE : e instanceof Refusal.Heard ? CmContext.Failure.REFUSED
                        : CmContext.Failure.BROKEN);
            }
            return;
        }
        watch(l);
    }

    /**
     * The requester's side of rdma_cm's UD address exchange (SIDR): HELLO with this ID's UD
     * parameters, then ESTABLISHED carrying the listener's from its ACCEPT; the link closes.
     */
    private void exchangeDatagramParams(Link l, byte[] privateData) throws IOException {
        UdParam mine = ctx.datagramParam();
        if (mine == null) {
            throw new IOException("the UD address exchange needs the ID's UD QP");
        }
        l.sendHello(mine.qpNum(), 0, UdHello.encode(mine), privateData);
        Link.Peer p = awaitAccept(l, () -> { });
        if (p == null) {
            return;
        }
        UdParam theirs = UdHello.decode(p.address());
        l.close();
        ctx.establishedDatagram(p.privateData(), theirs);
    }

    /**
     * The listener's answer: its ACCEPT, or null if it rejected the request or this ID stopped
     * waiting (then the link is closed, and a rejection is reported to an ID still connecting).
     *
     * @param whileWaiting run between reads (a provider whose wire-up needs its progress)
     */
    protected final Link.Peer awaitAccept(Link l, Runnable whileWaiting) throws IOException {
        Object answer = l.readAnswer(l.deadline(), whileWaiting);
        if (answer instanceof Link.Rejected r) {
            l.close();
            if (!ctx.isDestroyed() && ctx.isConnecting()) {
                ctx.rejected(r.privateData());
            }
            return null;
        }
        if (ctx.isDestroyed() || !ctx.isConnecting()) {
            l.close();
            return null;
        }
        return (Link.Peer) answer;
    }

    /** Watches the life line on this thread until it ends, then ends the connection. */
    private void watch(Link l) {
        l.awaitEnd();
        try {
            if (ctx.isDestroyed()) {
                return;
            }
            QpContext qp = ctx.qp();
            if (qp != null) {
                peerGone(qp);
            }
            ctx.disconnected();
        } catch (RuntimeException | Error e) { // (the link's thread is regmem's: nothing escapes it)
            log.log(System.Logger.Level.WARNING, "regmem " + kind.provider() + ": " + ctx.name()
                    + ": ending the connection after its peer went failed", e);
        }
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

    @Override
    public final void accept(byte[] privateData) {
        answered = true;
        Link l = link();
        if (l == null) {
            local.accept(privateData, this::linkLocal);
            return;
        }
        QpContext qp = ctx.qp();
        if (requested instanceof UdParam) {
            answerDatagramParams(l, privateData);
            return;
        }
        try {
            acceptRequest(l, qp, requested, privateData);
        } catch (IOException | RuntimeException e) {
            qp.toError();
            l.close();
            Errno errno = e instanceof SocketTimeoutException ? Errno.ETIMEDOUT
                    : e instanceof RdmaException r ? r.errno() : Errno.ECONNRESET;
            throw new RdmaException(errno, ctx.name() + ": accept of the request from " + l.peerAddress() + " failed: "
                    + e.getMessage(), e);
        }
        ctx.established(null);
        Thread.ofVirtual().name("regmem-" + kind.provider() + "-link").start(() -> watch(l));
    }

    /** The listener's side of the UD address exchange: ACCEPT with this request ID's UD parameters; no event. */
    private void answerDatagramParams(Link l, byte[] privateData) {
        UdParam mine = ctx.datagramParam();
        if (mine == null) {
            throw new RdmaException(Errno.EINVAL, ctx.name() + ": accept of a UD address exchange needs a UD QP on the "
                    + "request ID");
        }
        try {
            l.sendAccept(mine.qpNum(), 0, UdHello.encode(mine), privateData);
        } catch (IOException e) {
            l.close();
            throw new RdmaException(Errno.ECONNRESET, ctx.name() + ": accept of the UD address exchange from "
                    + l.peerAddress() + " failed: " + e.getMessage(), e);
        }
        l.close();
        ctx.answeredDatagram();
    }

    @Override
    public final void reject(byte[] privateData) {
        answered = true;
        Link l = link();
        if (l == null) {
            local.reject(privateData);
            return;
        }
        try {
            l.sendReject(privateData);
        } catch (IOException gone) {
            // the requester went away: nothing to tell
        }
        l.close();
    }

    @Override
    public final void disconnect() {
        Link l = link();
        if (l == null) {
            local.disconnect();
            return;
        }
        QpContext qp = ctx.qp();
        if (qp != null) {
            disconnecting(qp);
        }
        l.close(); // the peer's link ends: its QP errs and its ID reports DISCONNECTED
    }

    /** Closes the life line, if any (a provider whose peer broke its data path's rules ends the connection so). */
    protected final void cut() {
        Link l = link();
        if (l != null) {
            l.close();
        }
    }

    @Override
    public final void destroy() {
        Link l0 = link;
        if (requested != null && !answered && l0 != null) {
            l0.sendRefused(Refusal.WITHDRAWN); // a request destroyed unanswered: its requester is told, not left to guess
        }
        cut();
        local.destroy();
        Listener l;
        ServerSocket b;
        synchronized (CM) { // taken out under the lock (no request is admitted after), closed outside it
            l = server;
            b = bound;
            server = null;
            bound = null;
        }
        if (l != null) {
            l.close(); // waits for its accepting thread: not under the JVM-wide lock
        }
        if (b != null) {
            try {
                b.close();
            } catch (IOException ignored) {
                // closed as far as it goes
            }
        }
    }
}
