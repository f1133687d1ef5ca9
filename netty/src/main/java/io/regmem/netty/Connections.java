package io.regmem.netty;

import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelPromise;
import io.netty.channel.ConnectTimeoutException;
import io.netty.channel.EventLoop;
import io.netty.channel.FileRegion;
import io.netty.channel.socket.SocketChannel;
import io.netty.util.concurrent.Future;
import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.CmId;
import java.io.IOException;
import java.net.ConnectException;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.net.UnknownHostException;
import java.nio.channels.NotYetConnectedException;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;

/** What the channels share about making connections: addresses, the blocking calls off the loop, failures as Netty's. */
final class Connections {
    private static final System.Logger LOG = System.getLogger("io.regmem.netty");

    private Connections() {
    }

    /** {@code address} resolved (an unresolved one looked up now). */
    static InetSocketAddress resolve(SocketAddress address) throws UnknownHostException {
        if (!(address instanceof InetSocketAddress a)) {
            throw new IllegalArgumentException("a RegmemSocketChannel connects to an InetSocketAddress, not " + address);
        }
        if (a.isUnresolved()) {
            a = new InetSocketAddress(InetAddress.getByName(a.getHostString()), a.getPort());
        }
        return a;
    }

    /** The {@code host:port} form regmem's {@code connect} and {@code bindAddr} take. */
    static String hostPort(InetSocketAddress a) {
        String host = a.getAddress().getHostAddress();
        return (a.getAddress() instanceof Inet6Address ? "[" + host + "]" : host) + ":" + a.getPort();
    }

    /** {@code hostPort} ({@code host:port}, as regmem reports an ID's address) as a socket address, or {@code fallback}. */
    static InetSocketAddress address(String hostPort, InetSocketAddress fallback) {
        if (hostPort == null) {
            return fallback;
        }
        int colon = hostPort.lastIndexOf(':');
        if (colon <= 0) {
            return fallback;
        }
        try {
            String host = hostPort.substring(0, colon);
            if (host.startsWith("[") && host.endsWith("]")) {
                host = host.substring(1, host.length() - 1);
            }
            return new InetSocketAddress(InetAddress.getByName(host), Integer.parseInt(hostPort.substring(colon + 1)));
        } catch (IOException | RuntimeException e) {
            return fallback;
        }
    }

    /**
     * Connects {@code id} and waits for the answer (blocking: a virtual thread's; at most
     * {@code waitMillis}, the channel's connect timeout, or a minute): what failed, or null.
     */
    static Throwable connect(CmId id, String address, byte[] offer, long waitMillis) {
        try {
            id.connect(address, offer);
            id.awaitConnected(waitMillis > 0 ? waitMillis : 60_000, TimeUnit.MILLISECONDS);
            return null;
        } catch (RdmaException e) {
            String why = id.failureReason();
            return why == null || e.getMessage().contains(why) ? e : new RdmaException(e.errno(), id + ": connect: " + why, e);
        } catch (RuntimeException | Error e) {
            return e;
        }
    }

    /** Accepts {@code request} (blocking: a virtual thread's); what failed, or null. */
    static Throwable accept(CmId request, byte[] offer) {
        try {
            request.accept(offer);
            return null;
        } catch (RuntimeException | Error e) {
            return e;
        }
    }

    /** Rejects a request nobody will serve, and destroys its ID. */
    static void reject(CmId request) {
        try {
            if (request.connState() == CmId.ConnState.REQUESTED) {
                request.reject();
            }
        } catch (RuntimeException e) {
            LOG.log(System.Logger.Level.DEBUG, () -> request + ": reject failed: " + e);
        }
        try {
            if (request.qp() == null) {
                request.close();
            }
        } catch (RuntimeException e) {
            LOG.log(System.Logger.Level.DEBUG, () -> request + ": close failed: " + e);
        }
    }

    /** Runs {@code task} on {@code loop}; a loop that shut down meanwhile leaves {@code conn} to its handler's destroy. */
    static void execute(EventLoop loop, Runnable task, Connection conn) {
        try {
            loop.execute(task);
        } catch (RejectedExecutionException e) {
            LOG.log(System.Logger.Level.DEBUG, () -> conn + ": its event loop shut down before the connection was made");
        }
    }

    /** Runs {@code task} on {@code loop} now if this is its thread, else later there. */
    static void onLoop(EventLoop loop, Runnable task) {
        if (loop.inEventLoop()) {
            task.run();
        } else {
            loop.execute(task);
        }
    }

    /** A failed connect as Netty's TCP channels report it: {@link ConnectTimeoutException} for a timeout, {@link ConnectException} for a refusal, an {@link IOException} else. */
    static IOException connectFailure(Throwable failed, InetSocketAddress remote) {
        if (failed instanceof RdmaException e && e.errno() == Errno.ETIMEDOUT) { // (as the loop's own CONNECT_TIMEOUT_MILLIS says it)
            ConnectTimeoutException t = new ConnectTimeoutException("connection timed out: " + remote + " (" + e.getMessage() + ")");
            t.initCause(e);
            return t;
        }
        if (failed instanceof RdmaException e && (e.errno() == Errno.ECONNREFUSED || e.errno() == Errno.EHOSTUNREACH
                || e.errno() == Errno.EACCES)) {
            ConnectException c = new ConnectException("Connection refused: " + remote + " (" + e.getMessage() + ")");
            c.initCause(e);
            return c;
        }
        if (failed instanceof IOException io) {
            return io;
        }
        return new IOException("connecting to " + remote + " failed: " + failed, failed);
    }

    /**
     * Fails {@code promise} with {@link NotYetConnectedException}, as a TCP channel's shutdown fails
     * before its connection, if the channel is {@code before} its connection; true if it did.
     */
    static boolean notYetConnected(boolean before, ChannelPromise promise) {
        return before && promise.tryFailure(new NotYetConnectedException());
    }

    /** Shuts {@code ch}'s output and then its input down; {@code promise} fails with the first failure. */
    static ChannelFuture shutdownBoth(SocketChannel ch, ChannelPromise promise) {
        ch.shutdownOutput().addListener(out -> ch.shutdownInput().addListener(in -> {
            Throwable cause = out.cause() != null ? out.cause() : in.cause();
            if (cause != null) {
                promise.tryFailure(cause);
            } else {
                promise.trySuccess();
            }
        }));
        return promise;
    }

    /** A connect's local address: null, or any address with port 0 (what the system picks); else refused, as a bind. */
    static void anySource(SocketAddress local) {
        if (local != null && !(local instanceof InetSocketAddress a && a.getPort() == 0
                && !a.isUnresolved() && a.getAddress().isAnyLocalAddress())) {
            throw noBind(local);
        }
    }

    /** What a client channel's bind throws: it binds no local address. */
    static UnsupportedOperationException noBind(SocketAddress local) {
        return new UnsupportedOperationException("RegmemSocketChannel binds no local address (" + local
                + "): the system picks a connection's source");
    }

    /** What a channel writes: a {@code ByteBuf} or a {@link FileRegion}, else {@link UnsupportedOperationException}. */
    static Object outbound(Object msg) {
        if (msg instanceof ByteBuf || msg instanceof FileRegion) {
            return msg;
        }
        throw new UnsupportedOperationException("RegmemSocketChannel writes ByteBufs and FileRegions, not " + msg.getClass().getName());
    }

    /** Abandons the connect under way on {@code id} (its channel closed, or its connect was cancelled or timed out). */
    static void abandon(CmId id) {
        try {
            if (id.connState() != CmId.ConnState.DISCONNECTED) {
                id.disconnect(); // (the connect's thread then stops waiting: awaitConnected fails at once)
            }
        } catch (RuntimeException e) { // (it ended meanwhile)
            LOG.log(System.Logger.Level.DEBUG, () -> id + ": abandoning its connect: " + e);
        }
    }

    /** A connect promise's listener: a cancelled connect closes its channel (which abandons the attempt), as on epoll. */
    static void closeIfCancelled(Future<?> connect, Channel ch) {
        if (connect.isCancelled()) {
            ch.unsafe().close(ch.unsafe().voidPromise());
        }
    }
}
