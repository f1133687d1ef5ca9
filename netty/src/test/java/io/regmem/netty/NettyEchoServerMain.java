package io.regmem.netty;

import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.testkit.ChildSide;
import java.net.InetSocketAddress;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The other process of {@link RegmemChannelProcessTest} and {@link RegmemChannelNamespacesTest}: a Netty
 * echo server on the regmem transport over a device of the provider in its first argument (default
 * shm; its secret from {@code REGMEM_SECRET}), bound to the address in its second (default 127.0.0.1)
 * on a port of the system's choice, which it says ({@code PORT n}). Every channel that reaches its pipeline is counted
 * ({@code CHANNELS} says how many); what it reads it writes back. The end of its input shuts it down
 * and says {@code CLEAN}.
 */
public final class NettyEchoServerMain {
    private NettyEchoServerMain() {
    }

    public static void main(String[] args) throws Throwable {
        ConcurrentLinkedQueue<String> commands = ChildSide.commands();
        AtomicInteger channels = new AtomicInteger();
        String provider = args.length > 0 ? args[0] : "shm";
        String host = args.length > 1 ? args[1] : "127.0.0.1";
        try (RdmaDevice dev = RdmaDevice.open(provider, Map.of());
             RegmemTransport transport = RegmemTransport.builder(dev).build()) {
            EventLoopGroup boss = new MultiThreadIoEventLoopGroup(1, transport.ioHandlerFactory());
            EventLoopGroup workers = new MultiThreadIoEventLoopGroup(1, transport.ioHandlerFactory());
            Channel server = new ServerBootstrap().group(boss, workers).channel(RegmemServerSocketChannel.class)
                    .childHandler(new ChannelInitializer<SocketChannel>() {
                        @Override
                        protected void initChannel(SocketChannel ch) {
                            channels.incrementAndGet();
                            ch.pipeline().addLast(new PatternStream.Echo(new AtomicReference<>())); // (an error closes the channel)
                        }
                    }).bind(new InetSocketAddress(host, 0)).sync().channel();
            ChildSide.say("PORT " + ((InetSocketAddress) server.localAddress()).getPort());
            for (;;) {
                String c = commands.poll();
                if (c == null) {
                    Thread.sleep(5);
                } else if (c.equals("CHANNELS")) {
                    ChildSide.say("CHANNELS " + channels.get());
                } else if (c.equals("END")) {
                    break;
                }
            }
            server.close().sync();
            workers.shutdownGracefully(0, 2, TimeUnit.SECONDS).sync();
            boss.shutdownGracefully(0, 2, TimeUnit.SECONDS).sync();
        }
        ChildSide.say("CLEAN");
    }
}
