package io.regmem.registration.spi;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.UdParam;
import java.util.HashMap;
import java.util.Map;
import java.util.function.Predicate;

/**
 * Connection setup between IDs of one provider in this JVM, the part every provider shares: the
 * names IDs listen under, the request a connect makes at the listener, and the accept, reject,
 * disconnect and destroy rules between the two ends. A provider keeps one rendezvous (its namespace
 * of listeners) and one {@link End} per CM ID, and links the two QPs its own way when a request is
 * accepted ({@link QpLinker}). Never on the data path: one lock serialises the whole rendezvous.
 */
public final class LocalRendezvous {
    private final Object lock = new Object();
    /** Listening ends by name. Guarded by {@link #lock}. */
    private final Map<String, End> listeners = new HashMap<>();

    /** An empty rendezvous: no listener yet (a provider keeps one for its devices). */
    public LocalRendezvous() {
    }

    /** What a provider does when a request is accepted: connect its two QPs to each other. */
    @FunctionalInterface
    public interface QpLinker {
        /** Connects the accepting side's QP ({@code passive}) and the requester's ({@code active}); both are this provider's. */
        void link(QpContext passive, QpContext active);
    }

    /** A new end for one CM ID of this rendezvous. */
    public End end(CmContext ctx) {
        return new End(ctx);
    }

    /** One CM ID's side of the rendezvous. */
    public final class End {
        private final CmContext ctx;
        /** Guarded by {@link #lock}. */
        private String listenName;
        /** The other end: for a request, the requester; for the requester, its request. Guarded by lock. */
        private End remote;

        private End(CmContext ctx) {
            this.ctx = ctx;
        }

        private LocalRendezvous owner() {
            return LocalRendezvous.this;
        }

        /**
         * Listens under {@code address}.
         *
         * @throws RdmaException {@link Errno#EBUSY} if an ID of this rendezvous listens there already
         */
        public void listen(String address) {
            synchronized (lock) {
                if (listeners.putIfAbsent(address, this) != null) {
                    throw new RdmaException(Errno.EBUSY, ctx.name() + ": '" + address + "' is already listened on");
                }
                listenName = address;
            }
        }

        /** Stops listening (no effect if not listening). */
        public void unlisten() {
            synchronized (lock) {
                if (listenName != null) {
                    listeners.remove(listenName, this);
                    listenName = null;
                }
            }
        }

        /**
         * Connects to the ID listening under {@code address} in this JVM, if there is one: a request
         * ID ({@link CmContext#newRequest}) at the listener, linked to this end.
         *
         * @return false if nobody of this rendezvous listens there (nothing changed)
         */
        public boolean connect(String address, byte[] privateData) {
            return connect(address, privateData, null) != null;
        }

        /**
         * As {@link #connect(String, byte[])}, if {@code admits} takes the listening ID's context (a
         * provider's own check of the requester, as its handshake's across processes).
         *
         * @return null if nobody of this rendezvous listens there, {@code FALSE} if the listener is there and
         *         {@code admits} refused it (nothing changed in either case), else {@code TRUE}
         */
        public Boolean connect(String address, byte[] privateData, Predicate<CmContext> admits) {
            synchronized (lock) {
                End listener = listeners.get(address);
                if (listener == null) {
                    return null;
                }
                if (admits != null && !admits.test(listener.ctx)) {
                    return Boolean.FALSE;
                }
                End request = endOf(listener.ctx.newRequest(privateData, ctx.deviceName()));
                request.remote = this;
                remote = request;
                return Boolean.TRUE;
            }
        }

        /**
         * Accepts the pending request: links the QPs, then the requester is ESTABLISHED with
         * {@code privateData} and this end too. For IDs of the UDP port space, the UD address
         * exchange instead: nothing is linked, the requester is ESTABLISHED with this end's UD
         * parameters, and this end reports nothing.
         *
         * @throws RdmaException {@link Errno#EINVAL} without a pending request whose requester still
         *                       waits and has a QP (nothing changed)
         */
        public void accept(byte[] privateData, QpLinker linker) {
            synchronized (lock) {
                End active = remote;
                if (active == null || active.ctx.isDestroyed() || active.ctx.qp() == null || !active.ctx.isConnecting()) {
                    throw new RdmaException(Errno.EINVAL, ctx.name() + ": accept needs a pending request, a QP, and a "
                            + "requester that still waits");
                }
                UdParam ud = ctx.datagramParam();
                if (ud != null) { // the UD address exchange: no link, nothing between the two QPs afterwards
                    active.remote = null;
                    remote = null;
                    active.ctx.establishedDatagram(privateData, ud);
                    ctx.answeredDatagram();
                    return;
                }
                linker.link(ctx.qp(), active.ctx.qp());
                active.ctx.established(privateData);
                ctx.established(null);
            }
        }

        /** Refuses the pending request: the requester is REJECTED with {@code privateData}; no effect without one. */
        public void reject(byte[] privateData) {
            synchronized (lock) {
                End active = remote;
                if (active != null) {
                    active.remote = null;
                    active.ctx.rejected(privateData);
                }
                remote = null;
            }
        }

        /** This end's QP and the other end's go to the error state; the other end reports DISCONNECTED. */
        public void disconnect() {
            synchronized (lock) {
                QpContext qp = ctx.qp();
                if (qp != null) {
                    qp.toError();
                }
                End other = remote;
                if (other != null) {
                    QpContext peer = other.ctx.qp();
                    if (peer != null) { // the peer loses its connection, as a disconnect request would tell it, after
                        peer.peerDisconnected(); // it took what this side had sent it (as from a peer process that goes)
                    }
                    other.ctx.disconnected();
                }
            }
        }

        /** Stops listening and unlinks; a request of this end's that was never accepted is refused. */
        public void destroy() {
            synchronized (lock) {
                if (listenName != null) {
                    listeners.remove(listenName, this);
                    listenName = null;
                }
                End other = remote;
                if (other != null) {
                    if (other.remote == this) {
                        other.remote = null;
                    }
                    if (other.ctx.isConnecting()) {
                        other.ctx.failed("the listener was destroyed before it answered");
                    }
                }
                remote = null;
            }
        }
    }

    /** The end a provider made for {@code ctx} ({@link ProviderCm#localEnd()}). */
    private End endOf(CmContext ctx) {
        End e = ctx.provider().localEnd();
        if (e == null || e.owner() != this) {
            throw new IllegalStateException(ctx.name() + ": its provider half has no end of this rendezvous");
        }
        return e;
    }
}
