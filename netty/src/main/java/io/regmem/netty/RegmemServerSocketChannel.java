package io.regmem.netty;

import io.netty.channel.AbstractServerChannel;
import io.netty.channel.ChannelPromise;
import io.netty.channel.EventLoop;
import io.netty.channel.IoEventLoop;
import io.netty.channel.socket.ServerSocketChannel;
import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.CmEvent;
import io.regmem.registration.CmId;
import java.net.BindException;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.util.concurrent.RejectedExecutionException;

/**
 * A Netty {@link ServerSocketChannel} that listens with a regmem connection-manager ID at its bound
 * {@link InetSocketAddress} (port 0: the system picks one, {@code localAddress()} says which). Each
 * connection request (its requester authenticated by the device's secret) becomes a
 * {@link RegmemSocketChannel} read up the pipeline, which {@code ServerBootstrap} registers on a worker
 * event loop: that loop makes the connection's QP on its CQ and accepts; the child turns active
 * ({@code channelActive}) once the requester confirmed. A request nobody registers is rejected.
 */
public final class RegmemServerSocketChannel extends AbstractServerChannel implements ServerSocketChannel {
    private static final System.Logger LOG = System.getLogger("io.regmem.netty");
    private final RegmemServerSocketChannelConfig config = new RegmemServerSocketChannelConfig(this);
    private volatile CmId listener;
    private volatile InetSocketAddress local;
    private volatile boolean closed;
    private final LoopRegistration registration = new LoopRegistration();
    private boolean readPending;

    /** A server channel (ServerBootstrap makes it). */
    public RegmemServerSocketChannel() {
    }

    @Override
    public RegmemServerSocketChannelConfig config() {
        return config;
    }

    @Override
    public boolean isOpen() {
        return !closed;
    }

    @Override
    public boolean isActive() {
        return !closed && listener != null;
    }

    @Override
    public InetSocketAddress localAddress() {
        return (InetSocketAddress) super.localAddress();
    }

    @Override
    public InetSocketAddress remoteAddress() {
        return null;
    }

    @Override
    protected SocketAddress localAddress0() {
        return local;
    }

    @Override
    protected boolean isCompatible(EventLoop loop) {
        return loop instanceof IoEventLoop l && l.isCompatible(ServerUnsafe.class);
    }

    @Override
    protected AbstractUnsafe newUnsafe() {
        return new ServerUnsafe();
    }

    @Override
    protected void doRegister(ChannelPromise promise) {
        registration.register(eventLoop(), (ServerUnsafe) unsafe(), promise, () -> {
            RegmemTransport t = registration.handler().transport();
            config.defaultReceiveBytes(t.receives * t.receiveSize);
        });
    }

    @Override
    protected void doDeregister() {
        registration.cancel();
    }

    @Override
    protected void doBind(SocketAddress localAddress) throws Exception {
        InetSocketAddress a = localAddress instanceof InetSocketAddress i && i.isUnresolved() ? Connections.resolve(i)
                : (InetSocketAddress) localAddress;
        CmId l = registration.handler().transport().device().createCmId();
        try {
            l.onEvent(this::onCmEvent);
            l.bindAddr(Connections.hostPort(a));
            l.listen();
        } catch (RuntimeException e) {
            l.close();
            if (e instanceof RdmaException r && (r.errno() == Errno.EADDRINUSE || r.errno() == Errno.EADDRNOTAVAIL)) {
                BindException b = new BindException(this + ": " + a + ": " + e.getMessage()); // (as a TCP channel's bind)
                b.initCause(e);
                throw b;
            }
            throw e;
        }
        local = Connections.address(l.localAddress(), a);
        listener = l;
    }

    /** A request came (on the requester's or regmem's thread): the event loop takes it. */
    private boolean onCmEvent(CmEvent e) {
        if (e.type() == CmEvent.Type.CONNECT_REQUEST && !closed) {
            try {
                eventLoop().execute(this::acceptRequests);
            } catch (RejectedExecutionException gone) { // the loop shut down: the close rejects what waits
                LOG.log(System.Logger.Level.DEBUG, () -> this + ": a request came while the event loop shut down");
            }
        }
        return false;
    }

    /** Reads every waiting request up the pipeline as a child channel, while this channel reads. */
    private void acceptRequests() {
        CmId l = listener;
        if (l == null || closed || !config.isAutoRead() && !readPending) {
            return;
        }
        int n = 0;
        CmId req;
        while ((req = l.getRequest()) != null) {
            RegmemSocketChannel child = new RegmemSocketChannel(this, req, Connections.address(req.peerAddress(), // (a requester
                    new InetSocketAddress(local.getAddress(), 0)), local); // of this JVM: this host, no port of its own)
            readPending = false;
            n++;
            pipeline().fireChannelRead(child);
        }
        if (n > 0) {
            pipeline().fireChannelReadComplete();
        }
    }

    @Override
    protected void doBeginRead() {
        readPending = true;
        acceptRequests();
    }

    @Override
    protected void doClose() {
        closed = true;
        CmId l = listener;
        listener = null;
        if (l == null) {
            return;
        }
        CmId req;
        while ((req = l.getRequest()) != null) {
            Connections.reject(req);
        }
        try {
            l.close();
        } catch (RuntimeException e) {
            LOG.log(System.Logger.Level.DEBUG, () -> this + ": closing the listener failed: " + e);
        }
    }

    private final class ServerUnsafe extends AbstractUnsafe implements RegmemIoHandler.RegmemIoHandle {
        @Override
        public void connect(SocketAddress remoteAddress, SocketAddress localAddress, ChannelPromise promise) {
            safeSetFailure(promise, new UnsupportedOperationException("a server channel does not connect"));
        }

        @Override
        public void close() {
            close(voidPromise());
        }
    }
}
