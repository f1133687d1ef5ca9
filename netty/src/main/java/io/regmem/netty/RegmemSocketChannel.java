package io.regmem.netty;

import io.netty.buffer.ByteBuf;
import io.netty.channel.AbstractChannel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelMetadata;
import io.netty.channel.ChannelOutboundBuffer;
import io.netty.channel.ChannelPromise;
import io.netty.channel.ConnectTimeoutException;
import io.netty.channel.EventLoop;
import io.netty.channel.IoEventLoop;
import io.netty.channel.socket.ChannelInputShutdownEvent;
import io.netty.channel.socket.ServerSocketChannel;
import io.netty.channel.socket.SocketChannel;
import io.regmem.registration.CmId;
import io.regmem.registration.WcStatus;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.channels.AlreadyConnectedException;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.ConnectionPendingException;
import java.util.concurrent.TimeUnit;

/**
 * A Netty {@link SocketChannel} over one regmem RC connection, on an event loop of
 * {@link RegmemIoHandler}: addressed by {@link InetSocketAddress} as Netty's TCP channels are, a byte
 * stream in order with no message boundaries promised, so every codec works. A write of a buffer of the
 * transport's allocator is sent from its memory (the SEND holds a reference until it completes); any
 * other buffer is copied once into a registered one; a {@code FileRegion} is read piece by piece into
 * registered buffers. Received bytes arrive in registered buffers:
 * pieces of 2 KiB or less are copied into a buffer of the channel's {@code ALLOCATOR} (so the receive
 * goes back at once); larger ones are handed up as they are, a new receive posted in their place.
 * Credits keep a writer from overrunning the peer's receives: writes wait in the channel's outbound
 * buffer (and {@code isWritable} turns false past the high water mark) until the peer grants more.
 * {@code shutdownOutput} sends the end of the stream; the peer sees its input shut down (with
 * {@code ALLOW_HALF_CLOSURE}) or closes. A peer that dies or disconnects closes the channel
 * ({@code channelInactive}); writes not yet sent fail. The connection is made by the regmem device of
 * the event loop's transport, authenticated by its secret: a peer without it never reaches the pipeline.
 */
public final class RegmemSocketChannel extends AbstractChannel implements SocketChannel {
    private static final ChannelMetadata METADATA = new ChannelMetadata(false, 16);

    private enum State { OPEN, CONNECTING, ACTIVE, CLOSED }

    private final RegmemSocketChannelConfig config = new RegmemSocketChannelConfig(this);
    private volatile State state = State.OPEN;
    private volatile InetSocketAddress local;
    private volatile InetSocketAddress remote;
    private final LoopRegistration registration = new LoopRegistration();
    private Connection conn;
    /** A request accepted by a server channel: the connection is made on this channel's event loop. */
    private CmId request;
    private ChannelPromise connectPromise;
    private boolean connecting;
    /** The connection broke before the connect or accept finished: the channel closes once it is active. */
    private boolean brokenWhileConnecting;
    private volatile boolean inputShutdown;
    private volatile boolean outputShutdown;
    private boolean writeWaiting;
    private final Inbound inbound = new Inbound(this);

    /** A channel to connect (Bootstrap makes it). */
    public RegmemSocketChannel() {
        super(null);
    }

    /** A channel of a request {@code parent} accepts. */
    RegmemSocketChannel(RegmemServerSocketChannel parent, CmId request, InetSocketAddress remote,
                        InetSocketAddress local) {
        super(parent);
        this.request = request;
        this.remote = remote;
        this.local = local;
        config.setReceiveBufferSize(parent.config().receiveBufferSizeSet()); // (a listener's, as TCP's: childOption overrides)
    }

    @Override
    public ServerSocketChannel parent() {
        return (ServerSocketChannel) super.parent();
    }

    @Override
    public RegmemSocketChannelConfig config() {
        return config;
    }

    @Override
    public ChannelMetadata metadata() {
        return METADATA;
    }

    @Override
    public boolean isOpen() {
        return state != State.CLOSED;
    }

    @Override
    public boolean isActive() {
        return state == State.ACTIVE;
    }

    @Override
    public boolean isInputShutdown() {
        return inputShutdown || !isActive();
    }

    @Override
    public boolean isOutputShutdown() {
        return outputShutdown || !isActive();
    }

    @Override
    public boolean isShutdown() {
        return inputShutdown && outputShutdown || !isActive();
    }

    @Override
    public InetSocketAddress localAddress() {
        return (InetSocketAddress) super.localAddress();
    }

    @Override
    public InetSocketAddress remoteAddress() {
        return (InetSocketAddress) super.remoteAddress();
    }

    @Override
    protected SocketAddress localAddress0() {
        return local;
    }

    @Override
    protected SocketAddress remoteAddress0() {
        return remote;
    }

    @Override
    protected AbstractUnsafe newUnsafe() {
        return new RegmemUnsafe();
    }

    /** A loop of the transport's kind; once the channel has its connection, only its own ({@link LoopRegistration#pin}). */
    @Override
    protected boolean isCompatible(EventLoop loop) {
        return loop instanceof IoEventLoop l && l.isCompatible(RegmemUnsafe.class) && registration.accepts(loop);
    }

    @Override
    protected void doRegister(ChannelPromise promise) {
        registration.register(eventLoop(), (RegmemUnsafe) unsafe(), promise, () -> {
            RegmemTransport t = registration.handler().transport();
            config.defaultAllocator(t.allocator());
            config.defaultWindows(t.receives * t.receiveSize, t.sends * t.receiveSize);
            if (request != null) {
                startAccept();
            }
        });
    }

    @Override
    protected void doDeregister() {
        registration.cancel();
    }

    /** Makes the connection of an accepted request here and accepts it, off the event loop. */
    private void startAccept() {
        CmId req = request;
        request = null;
        try {
            conn = newConnection(req);
        } catch (RuntimeException e) {
            Connections.reject(req);
            throw e;
        }
        byte[] offer = conn.offer();
        connecting = true;
        Thread.ofVirtual().name("regmem-netty-accept").start(() -> {
            Throwable failed = Connections.accept(req, offer);
            Connections.execute(eventLoop(), () -> connected(failed, req), conn);
        });
    }

    private Connection newConnection(CmId id) {
        RegmemTransport t = registration.handler().transport();
        Connection c = new Connection(registration.handler(), id, config.receives(t.receiveSize, t.receives), config.sends(t.receiveSize, t.sends));
        c.channel = this;
        registration.pin(eventLoop());
        inbound.size(c.receives + Chunks.MAX);
        return c;
    }

    @Override
    protected void doBind(SocketAddress localAddress) {
        throw Connections.noBind(localAddress);
    }

    /** The connect (or accept) finished, on the event loop: active, or failed and closed. */
    private void connected(Throwable failed, CmId id) {
        connecting = false;
        ChannelPromise p = connectPromise;
        connectPromise = null;
        if (state == State.CLOSED) { // closed meanwhile: the connection ends now
            conn.close(0); // (not established: it disconnects at once)
            return;
        }
        if (failed == null) {
            try {
                conn.established(id.privateData());
                local = Connections.address(id.localAddress(), local != null || remote == null ? local
                        : new InetSocketAddress(remote.getAddress(), 0)); // (a listener of this JVM: this host, no port of its own)
            } catch (RuntimeException e) {
                failed = e;
            }
        }
        if (failed != null) {
            IOException cause = Connections.connectFailure(failed, remote);
            if (p != null) {
                p.tryFailure(cause);
            } else {
                pipeline().fireExceptionCaught(cause);
            }
            unsafe().close(unsafe().voidPromise());
            return;
        }
        state = State.ACTIVE;
        boolean promiseSet = p == null || p.trySuccess();
        pipeline().fireChannelActive();
        if (!promiseSet) {
            unsafe().close(unsafe().voidPromise());
            return;
        }
        inbound.deliver();
        batchDone();
        conn.grant(); // (the receives of what went up above are posted again, and their credits go back if the peer is short)
        if (brokenWhileConnecting) { // (what the peer sent before it went was handed up above, its end too)
            connectionBroken(null);
        }
    }

    @Override
    protected void doDisconnect() {
        doClose();
    }

    @Override
    protected void doClose() {
        state = State.CLOSED;
        if (request != null) { // accepted, never registered
            Connections.reject(request);
            request = null;
        }
        ChannelPromise p = connectPromise;
        connectPromise = null;
        if (p != null) {
            p.tryFailure(new ClosedChannelException());
            Connections.abandon(conn.id); // (its thread ends now, and connected() finishes the connection)
        }
        inbound.releaseAll();
        Connection c = conn;
        if (c != null && !connecting) {
            long linger = config.lingerNanos();
            c.close(linger);
            if (c.lingering()) {
                eventLoop().schedule(() -> c.batchDone(), linger + 1_000_000, TimeUnit.NANOSECONDS);
            }
        }
    }

    @Override
    protected void doShutdownOutput() {
        outputShutdown = true;
        if (conn != null) {
            conn.sendFin(); // (if no credit allows it now, the connection sends it when one comes: batchDone)
        }
    }

    @Override
    public ChannelFuture shutdownOutput() {
        return shutdownOutput(newPromise());
    }

    @Override
    public ChannelFuture shutdownOutput(ChannelPromise promise) {
        Connections.onLoop(eventLoop(), () -> {
            if (!Connections.notYetConnected(state == State.OPEN || state == State.CONNECTING, promise)) {
                ((AbstractUnsafe) unsafe()).shutdownOutput(promise);
            }
        });
        return promise;
    }

    @Override
    public ChannelFuture shutdownInput() {
        return shutdownInput(newPromise());
    }

    @Override
    public ChannelFuture shutdownInput(ChannelPromise promise) {
        Connections.onLoop(eventLoop(), () -> {
            if (Connections.notYetConnected(state == State.OPEN || state == State.CONNECTING, promise)) {
                return;
            }
            inputShutdown = true;
            inbound.dropAll(conn); // (what arrives from now on is dropped too, its receive posted again)
            promise.trySuccess();
        });
        return promise;
    }

    @Override
    public ChannelFuture shutdown() {
        return shutdown(newPromise());
    }

    @Override
    public ChannelFuture shutdown(ChannelPromise promise) {
        return Connections.shutdownBoth(this, promise);
    }

    @Override
    protected void doBeginRead() {
        inbound.beginRead(inputShutdown); // (a read of a shut input only says, once, that all was read)
    }

    void clearReadPending() {
        inbound.clearReadPending();
    }

    Connection connection() {
        return conn;
    }

    boolean inputShutdown() {
        return inputShutdown;
    }

    /** A receive completed with {@code length} bytes in {@code buf} (receive {@code i}); {@code fin}: the peer's stream ended. */
    void received(int i, ByteBuf buf, int length, boolean fin) {
        inbound.received(conn, i, buf, length, fin);
    }

    /** The peer's stream ended (after every byte before it was read). */
    void inputEnded() {
        if (inputShutdown) {
            return;
        }
        if (config.isAllowHalfClosure()) {
            inputShutdown = true;
            pipeline().fireUserEventTriggered(ChannelInputShutdownEvent.INSTANCE);
            inbound.endSeen(); // (the read after it says all was read: ChannelInputShutdownReadComplete)
        } else {
            unsafe().close(unsafe().voidPromise());
        }
    }

    /** After a batch of completions: the read ends, writes that waited for credits go on. */
    void batchDone() {
        inbound.readComplete();
        if (state != State.ACTIVE) {
            return;
        }
        if (outputShutdown) {
            conn.sendFin();
        }
        if (writeWaiting && conn.canSend()) {
            writeWaiting = false;
            ((RegmemUnsafe) unsafe()).flushNow();
        }
    }

    /** Its read side (the pieces and chunks received, in their order). */
    Inbound inbound() {
        return inbound;
    }

    /**
     * The peer broke the protocol or a chunk of the stream was lost ({@code deliver}: what came before goes
     * up first), or handling a completion failed: the pipeline hears {@code cause}, the channel closes.
     */
    void failed(Throwable cause, boolean deliver) {
        if (deliver && !connecting) {
            inbound.deliver();
            inbound.readComplete();
        }
        pipeline().fireExceptionCaught(cause);
        unsafe().close(unsafe().voidPromise());
    }

    /**
     * The connection broke (the peer went, or disconnected): the channel closes, after what arrived
     * before is handed up. Before the connect or accept finished, that waits until it has: a peer that
     * wrote, closed and went at once is still seen active, its bytes read and its end seen, as on TCP.
     */
    void connectionBroken(WcStatus status) {
        if (state == State.CLOSED) {
            return;
        }
        if (connecting) {
            brokenWhileConnecting = true;
            return;
        }
        inbound.deliver();
        inbound.readComplete();
        unsafe().close(unsafe().voidPromise());
    }

    @Override
    protected Object filterOutboundMessage(Object msg) {
        return Connections.outbound(msg);
    }

    @Override
    protected void doWrite(ChannelOutboundBuffer in) throws IOException {
        int r = conn.write(in);
        if (r == FilePieces.WAIT) {
            writeWaiting = true; // the next grant of credits (batchDone) flushes again
        } else if (r == FilePieces.STALLED) {
            eventLoop().execute(((RegmemUnsafe) unsafe())::flushNow); // (a FileRegion gave nothing: later, as NIO)
        }
    }

    private final class RegmemUnsafe extends AbstractUnsafe implements RegmemIoHandler.RegmemIoHandle {
        @Override
        public void connect(SocketAddress remoteAddress, SocketAddress localAddress, ChannelPromise promise) {
            if (promise.isDone() || !ensureOpen(promise)) { // (cancellable while it is under way, as epoll's and NIO's)
                return;
            }
            if (state == State.ACTIVE) {
                promise.setFailure(new AlreadyConnectedException());
                return;
            }
            if (connectPromise != null || connecting) {
                promise.setFailure(new ConnectionPendingException());
                return;
            }
            InetSocketAddress to;
            CmId id;
            try {
                to = Connections.resolve(remoteAddress);
                Connections.anySource(localAddress);
                id = registration.handler().transport().device().createCmId();
                try {
                    conn = newConnection(id);
                } catch (RuntimeException e) {
                    id.close();
                    throw e;
                }
            } catch (Exception e) {
                promise.setFailure(annotateConnectException(e, remoteAddress));
                closeIfClosed();
                return;
            }
            remote = to;
            state = State.CONNECTING;
            connectPromise = promise;
            connecting = true;
            promise.addListener(f -> Connections.closeIfCancelled(f, RegmemSocketChannel.this));
            byte[] offer = conn.offer();
            String address = Connections.hostPort(to);
            Thread.ofVirtual().name("regmem-netty-connect").start(() -> {
                Throwable failed = Connections.connect(id, address, offer, config.getConnectTimeoutMillis());
                Connections.execute(eventLoop(), () -> connected(failed, id), conn);
            });
            int millis = config.getConnectTimeoutMillis();
            if (millis > 0) {
                eventLoop().schedule(() -> {
                    ChannelPromise p = connectPromise;
                    if (p != null && p == promise && p.tryFailure(new ConnectTimeoutException("connection timed out after "
                            + millis + " ms: " + to))) {
                        close(voidPromise());
                    }
                }, millis, TimeUnit.MILLISECONDS);
            }
        }

        /** Flushes what waits in the outbound buffer (credits came). */
        void flushNow() {
            flush0();
        }

        @Override
        public void close() {
            close(voidPromise());
        }
    }

    @Override
    public String toString() {
        return super.toString() + (conn == null ? "" : " " + conn);
    }
}
