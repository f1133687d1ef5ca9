package io.regmem.registration.link;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.io.Closeable;
import java.io.EOFException;
import java.io.IOException;
import java.net.BindException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The listening side of {@link Link}, the same for every provider that connects processes: a TCP
 * socket at {@code host:port} whose accept loop runs the authenticated handshake of each connection
 * up to the requester's HELLO, and hands the provider only the connections whose HELLO checked
 * ({@link Requests#requested}).
 *
 * <p>A connection that does not prove it holds the secret, sends anything malformed or too long, or
 * takes longer than the handshake's time, costs the listener one log line (the provider's logger,
 * WARNING) and a closed socket, and nothing of what it sent reaches the provider. At most
 * {@link #MAX_PENDING_HANDSHAKES} unauthenticated handshakes run at once; a connection beyond them
 * drops the oldest of them (as sshd's {@code MaxStartups} drops early), never the newest: connections
 * that idle, trickle or reconnect cannot keep a real client out, whose handshake takes a round trip;
 * file descriptors and threads stay bounded. Each handshake ends exactly once (authenticated, failed
 * or dropped). The accept loop and the handshakes run on virtual threads of their own.
 */
public final class Listener implements AutoCloseable {
    /** Unauthenticated handshakes a listener runs at once; a connection beyond them drops the oldest. */
    public static final int MAX_PENDING_HANDSHAKES = 128;
    /** The listening socket's backlog: connections the kernel holds until the accept loop takes them. */
    private static final int BACKLOG = 1024;

    /** What the provider does with an authenticated HELLO. */
    @FunctionalInterface
    public interface Requests {
        /**
         * A requester proved it holds the secret and sent {@code peer}: make the request (the link is
         * the provider's from here: it answers, or closes it). Called on the handshake's thread; must
         * not throw.
         */
        void requested(Listener listener, Link link, Link.Peer peer);
    }

    private final ServerSocket server;
    /** The thread of {@link #acceptLoop} (set once it starts). */
    private volatile Thread acceptor;
    private final String address;
    private final byte[] secret;
    private final int handshakeMillis;
    private final Link.Kind kind;
    private final System.Logger log;
    private final Requests requests;
    /** Unauthenticated handshakes under way, counted in {@link #handshakes}, oldest first. */
    private final ConcurrentLinkedDeque<Pending> pending = new ConcurrentLinkedDeque<>();
    /** Handshakes in {@link #pending} not yet ended. */
    private final AtomicInteger handshakes = new AtomicInteger();

    /** One unauthenticated handshake. */
    private static final class Pending {
        final Socket socket;
        final Object from;
        /** Claimed once: by its thread (authenticated, or failed) or by the accept loop (dropped). */
        final AtomicBoolean ended = new AtomicBoolean();
        /** The thread of its handshake (set before it starts). */
        volatile Thread thread;

        Pending(Socket socket) {
            this.socket = socket;
            this.from = socket.getRemoteSocketAddress();
        }
    }

    private Listener(ServerSocket server, String address, byte[] secret, int handshakeMillis, Link.Kind kind,
            System.Logger log, Requests requests) {
        this.server = server;
        this.address = address;
        this.secret = secret;
        this.handshakeMillis = handshakeMillis;
        this.kind = kind;
        this.log = log;
        this.requests = requests;
    }

    /**
     * Binds {@code host:port} (port 0: one the system picks) without taking connections yet
     * ({@code rdma_bind_addr}); {@link #start} then listens on it.
     *
     * @param inUse        the errno of a taken port ({@link Errno#EADDRINUSE} for a bind, EBUSY for a listen)
     * @param reuseAddress {@code SO_REUSEADDR} (the ID's {@code REUSEADDR} option)
     * @throws RdmaException {@code inUse} if the port is taken; {@link Errno#EINVAL} for an address that is not local
     */
    public static ServerSocket bind(String who, String host, int port, Errno inUse, boolean reuseAddress) {
        ServerSocket s = null;
        try {
            s = new ServerSocket();
            s.setReuseAddress(reuseAddress);
            s.bind(new InetSocketAddress(host, port), BACKLOG);
            return s;
        } catch (IOException | RuntimeException e) {
            closeQuietly(s);
            throw new RdmaException(e instanceof BindException ? inUse : Errno.EINVAL,
                    who + ": cannot " + (inUse == Errno.EBUSY ? "listen at" : "bind") + " '" + host + ":" + port + "': "
                    + e.getMessage(), e);
        }
    }

    /** Starts taking connections on {@code bound} (a socket {@link #bind} made for {@code host}). */
    public static Listener start(ServerSocket bound, String host, byte[] secret, int handshakeMillis, Link.Kind kind,
            System.Logger log, Requests requests) {
        String address = host + ":" + bound.getLocalPort();
        Listener l = new Listener(bound, address, secret, handshakeMillis, kind, log, requests);
        l.acceptor = Thread.ofVirtual().name("regmem-" + kind.provider() + "-listen-" + address).start(l::acceptLoop);
        return l;
    }

    /** The port it listens on. */
    public int port() {
        return server.getLocalPort();
    }

    /**
     * Stops listening; handshakes under way fail (their sockets are closed here: their requesters see
     * a rejection). When it returns the port is free of this listener's sockets (a connection it
     * already handed on keeps its own): the JDK closes a socket that a thread is blocked in
     * {@code accept} (or a virtual thread in a read) on only once that thread has left it, so this
     * waits for the accepting thread, then resets what it accepted whose handshake has not ended and
     * waits for those handshakes' threads to leave their reads (at most a second in all).
     */
    @Override
    public void close() {
        closeQuietly(server);
        long deadline = System.nanoTime() + 1_000_000_000L;
        boolean interrupted = awaitExit(acceptor, deadline);
        List<Thread> reading = new ArrayList<>();
        for (Pending p; (p = pending.pollFirst()) != null; ) {
            if (end(p)) { // (its thread's reads fail now; ended, it says nothing of it)
                reset(p.socket);
                if (p.thread != null) {
                    reading.add(p.thread);
                }
            }
        }
        for (Thread t : reading) {
            interrupted |= awaitExit(t, deadline);
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }

    /** Waits until {@code t} (null: none; this thread: not) has ended or the deadline passed; true if interrupted meanwhile. */
    private static boolean awaitExit(Thread t, long deadline) {
        boolean interrupted = false;
        if (t != null && t != Thread.currentThread()) {
            while (t.isAlive() && System.nanoTime() < deadline) {
                try {
                    t.join(Duration.ofNanos(Math.max(1, deadline - System.nanoTime())));
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
        }
        return interrupted;
    }

    /**
     * Closes {@code s} with a reset: nothing of the connection lingers on the port (no LAST_ACK, no
     * TIME_WAIT), so that the port is free once the listener closed. For a handshake that ends with
     * nothing to tell the requester (the listener closes, or the requester went).
     */
    private static void reset(Socket s) {
        try {
            s.setSoLinger(true, 0);
        } catch (IOException e) {
            // closed already
        }
        closeQuietly(s);
    }

    /** Takes connections until the socket closes; each handshake on a thread of its own. */
    private void acceptLoop() {
        while (!server.isClosed()) {
            Socket socket;
            try {
                socket = server.accept();
            } catch (IOException closed) {
                return;
            }
            Pending p = new Pending(socket);
            pending.addLast(p);
            if (handshakes.incrementAndGet() > MAX_PENDING_HANDSHAKES) {
                dropOldest();
            }
            Thread t = Thread.ofVirtual().name("regmem-" + kind.provider() + "-hello").unstarted(() -> {
                try {
                    hello(p);
                } finally {
                    end(p);
                }
            });
            p.thread = t;
            t.start();
        }
    }

    /** Ends the oldest unauthenticated handshake: its socket closed, its thread's reads fail. */
    private void dropOldest() {
        for (Pending old; (old = pending.pollFirst()) != null; ) {
            if (end(old)) {
                refused(old.from, "dropped unauthenticated: " + MAX_PENDING_HANDSHAKES
                        + " handshakes were under way, this one the oldest");
                closeQuietly(old.socket);
                return;
            }
        }
    }

    /** Ends a handshake's count and place once; true for the call that did. */
    private boolean end(Pending p) {
        if (!p.ended.compareAndSet(false, true)) {
            return false;
        }
        handshakes.decrementAndGet();
        pending.remove(p);
        return true;
    }

    /** Logs a refused connection (the provider's logger, WARNING). */
    public void refused(Object peer, String why) {
        log.log(System.Logger.Level.WARNING, "regmem " + kind.provider() + ": listener " + address
                + " refused a connection from " + peer + ": " + why);
    }

    /**
     * The listener's side of the handshake up to the request: challenge, then the requester's
     * authenticated HELLO; then the provider's request (or, for a connection that is not a regmem
     * peer with the secret, a log line and a closed socket).
     */
    private void hello(Pending pend) {
        Link l;
        Link.Peer p;
        try {
            l = new Link(pend.socket, secret, handshakeMillis, kind);
        } catch (IOException e) {
            reset(pend.socket);
            return; // gone before anything was said
        }
        try {
            long deadline = l.deadline();
            l.sendChallenge();
            p = l.readHello(deadline);
        } catch (IOException | RuntimeException e) {
            if (!pend.ended.get()) { // (a dropped one was logged by the accept loop)
                refused(pend.from, e.getMessage());
                if (e instanceof Refusal.Refused r) {
                    l.sendRefused(r.reason()); // the requester learns why
                }
            }
            if (e instanceof EOFException) {
                reset(pend.socket); // the requester went: nothing to tell it
            }
            l.close();
            return;
        }
        if (!end(pend)) {
            l.close(); // dropped just as it authenticated: the requester sees a rejection and may retry
            return;
        }
        requests.requested(this, l, p);
    }

    private static void closeQuietly(Closeable c) {
        if (c != null) {
            try {
                c.close();
            } catch (IOException ignored) {
                // closing: nothing to report
            }
        }
    }
}
