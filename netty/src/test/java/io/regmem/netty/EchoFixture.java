package io.regmem.netty;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.ServerChannel;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import java.net.InetSocketAddress;
import java.util.Arrays;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;

/**
 * A Netty echo server and byte-checking clients on 127.0.0.1, on the NIO or the epoll transport,
 * with a given allocator on both sides. The server writes back the very buffers it read.
 */
final class EchoFixture implements AutoCloseable {
    /** The transports the fixture runs on. */
    enum Transport {
        NIO(NioIoHandler.newFactory(), NioServerSocketChannel.class, NioSocketChannel.class),
        EPOLL(Epoll.isAvailable() ? EpollIoHandler.newFactory() : null, EpollServerSocketChannel.class,
                EpollSocketChannel.class);

        final IoHandlerFactory factory;
        final Class<? extends ServerChannel> server;
        final Class<? extends SocketChannel> client;

        Transport(IoHandlerFactory factory, Class<? extends ServerChannel> server, Class<? extends SocketChannel> client) {
            this.factory = factory;
            this.server = server;
            this.client = client;
        }

        boolean available() {
            return factory != null;
        }
    }

    private final EventLoopGroup boss;
    private final EventLoopGroup workers;
    private final EventLoopGroup clients;
    private final Channel serverChannel;
    private final Transport transport;
    private final ByteBufAllocator alloc;
    /** The first thing that went wrong on an event loop (a buffer of the wrong allocator, an exception). */
    final AtomicReference<Throwable> failure = new AtomicReference<>();

    EchoFixture(Transport transport, ByteBufAllocator alloc, Consumer<ByteBuf> onServerRead) throws InterruptedException {
        this.transport = transport;
        this.alloc = alloc;
        this.boss = new MultiThreadIoEventLoopGroup(1, transport.factory);
        this.workers = new MultiThreadIoEventLoopGroup(2, transport.factory);
        this.clients = new MultiThreadIoEventLoopGroup(2, transport.factory);
        ServerBootstrap sb = new ServerBootstrap().group(boss, workers).channel(transport.server)
                .option(ChannelOption.ALLOCATOR, alloc).childOption(ChannelOption.ALLOCATOR, alloc)
                .childOption(ChannelOption.TCP_NODELAY, true)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                            @Override
                            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                try {
                                    onServerRead.accept((ByteBuf) msg);
                                } catch (RuntimeException | AssertionError e) {
                                    failure.compareAndSet(null, e);
                                }
                                ctx.write(msg); // the same buffer goes back: zero copy
                            }

                            @Override
                            public void channelReadComplete(ChannelHandlerContext ctx) {
                                ctx.flush();
                            }

                            @Override
                            public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                                failure.compareAndSet(null, cause);
                                ctx.close();
                            }
                        });
                    }
                });
        this.serverChannel = sb.bind(new InetSocketAddress("127.0.0.1", 0)).sync().channel();
    }

    /** A connected client; {@link Client#exchange(byte[])} sends a message and waits for its echo. */
    Client connect() throws InterruptedException {
        Client c = new Client();
        Bootstrap b = new Bootstrap().group(clients).channel(transport.client)
                .option(ChannelOption.ALLOCATOR, alloc).option(ChannelOption.TCP_NODELAY, true)
                .handler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        ch.pipeline().addLast(c);
                    }
                });
        c.channel = b.connect(serverChannel.localAddress()).sync().channel();
        return c;
    }

    /** A client: one message at a time, its echo compared byte for byte as it arrives. */
    final class Client extends ChannelInboundHandlerAdapter {
        Channel channel;
        private volatile byte[] expected;
        private int offset;
        private volatile CompletableFuture<Void> done;

        /** Sends {@code message} (in a buffer of the fixture's allocator) and waits for its echo. */
        void exchange(byte[] message) throws Exception {
            CompletableFuture<Void> f = new CompletableFuture<>();
            offset = 0;
            expected = message;
            done = f;
            ByteBuf out = channel.alloc().directBuffer(message.length).writeBytes(message);
            channel.writeAndFlush(out);
            f.get(60, TimeUnit.SECONDS);
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf in = (ByteBuf) msg;
            try {
                byte[] want = expected;
                int n = in.readableBytes();
                if (want == null || offset + n > want.length) {
                    done.completeExceptionally(new AssertionError("echo longer than the message: " + (offset + n)));
                    return;
                }
                byte[] got = new byte[n];
                in.readBytes(got);
                if (!Arrays.equals(got, 0, n, want, offset, offset + n)) {
                    done.completeExceptionally(new AssertionError("echo differs from the message in bytes ["
                            + offset + ", " + (offset + n) + ") of " + want.length));
                    return;
                }
                offset += n;
                if (offset == want.length) {
                    done.complete(null);
                }
            } finally {
                in.release();
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            failure.compareAndSet(null, cause);
            CompletableFuture<Void> f = done;
            if (f != null) {
                f.completeExceptionally(cause);
            }
            ctx.close();
        }

        void close() throws InterruptedException {
            channel.close().sync();
        }
    }

    @Override
    public void close() throws InterruptedException {
        serverChannel.close().sync();
        for (EventLoopGroup g : new EventLoopGroup[] {clients, workers, boss}) {
            g.shutdownGracefully(0, 2, TimeUnit.SECONDS).sync();
        }
    }
}
