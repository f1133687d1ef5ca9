package io.regmem.bench;

import io.netty.channel.Channel;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.ServerChannel;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.local.LocalChannel;
import io.netty.channel.local.LocalIoHandler;
import io.netty.channel.local.LocalServerChannel;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.regmem.netty.RegmemIoHandler;
import io.regmem.netty.RegmemServerSocketChannel;
import io.regmem.netty.RegmemSocketChannel;
import java.util.concurrent.TimeUnit;

/**
 * One process's side of a two-process Netty benchmark, by transport name: one event loop and the
 * channel classes of {@code regmem-PROVIDER[:options]} ({@link BenchTransports}; {@code regmem} is its
 * transport, else null), {@code epoll}, {@code nio}, or {@code local} (Netty's in-JVM transport, for
 * a floor with both ends in one process).
 */
record NettySide(EventLoopGroup group, Class<? extends ServerChannel> server, Class<? extends Channel> client,
                 BenchTransports regmem) {

    static NettySide of(String transport) {
        if (transport.startsWith("regmem-")) {
            BenchTransports t = BenchTransports.open(transport);
            return new NettySide(new MultiThreadIoEventLoopGroup(1, RegmemIoHandler.newFactory(t.transport())),
                    RegmemServerSocketChannel.class, RegmemSocketChannel.class, t);
        }
        if ("local".equals(transport)) { // (Netty's in-JVM transport: client and server on one event loop)
            return new NettySide(new MultiThreadIoEventLoopGroup(1, LocalIoHandler.newFactory()), LocalServerChannel.class,
                    LocalChannel.class, null);
        }
        boolean epoll = "epoll".equals(transport);
        IoHandlerFactory f = epoll ? EpollIoHandler.newFactory() : NioIoHandler.newFactory();
        return new NettySide(new MultiThreadIoEventLoopGroup(1, f), epoll ? EpollServerSocketChannel.class
                : NioServerSocketChannel.class, epoll ? EpollSocketChannel.class : NioSocketChannel.class, null);
    }

    /** Shuts the event loop down, then closes the regmem transport and its device, if any. */
    void close() throws InterruptedException {
        group.shutdownGracefully(0, 2, TimeUnit.SECONDS).sync();
        if (regmem != null) {
            regmem.close();
        }
    }
}
