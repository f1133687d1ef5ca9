package io.regmem.bench;

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
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.regmem.core.BufferPool;
import io.regmem.netty.RegmemByteBufAllocator;
import java.net.InetSocketAddress;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * A Netty echo round trip over TCP on 127.0.0.1 (TCP_NODELAY), the same server and client on
 * regmem's allocator or on Netty's default (adaptive), NIO or epoll transport: the benchmark thread
 * writes a message of {@code size} bytes and spins until the whole echo has come back; the server
 * writes back the buffers it read. Sample time: the mean gives messages per second (one connection,
 * one message in flight), the percentiles the p99. Event loops: one for the server's connection, one
 * for the client's; they sleep in epoll_wait/select between messages (Netty's default).
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "-Xms1g", "-Xmx1g",
        "--sun-misc-unsafe-memory-access=allow", "--add-opens=java.base/java.nio=ALL-UNNAMED",
        "--add-opens=java.base/jdk.internal.misc=ALL-UNNAMED", "-Dio.netty.tryReflectionSetAccessible=true",
        "-Dio.netty.leakDetection.level=disabled"})
public class NettyEchoBenchmark extends BenchDefaults {

    /** Message bytes. */
    @Param({"64", "16384"})
    public int size;

    /** Netty transport: nio or epoll. */
    @Param({"nio", "epoll"})
    public String transport;

    /** Allocator on both sides: regmem or netty (Netty's default, adaptive). */
    @Param({"regmem", "netty"})
    public String allocator;

    private BufferPool pool;
    private EventLoopGroup group;
    private Channel server;
    private Channel client;
    private byte[] payload;
    private volatile int received;

    /** Starts the server and connects the client. */
    @Setup(Level.Trial)
    public void setUp() throws InterruptedException {
        payload = new byte[size];
        pool = BufferPool.builder().name("bench-echo").build();
        ByteBufAllocator alloc = "regmem".equals(allocator) ? new RegmemByteBufAllocator(pool) : ByteBufAllocator.DEFAULT;
        boolean epoll = "epoll".equals(transport);
        IoHandlerFactory factory = epoll ? EpollIoHandler.newFactory() : NioIoHandler.newFactory();
        Class<? extends ServerChannel> serverClass = epoll ? EpollServerSocketChannel.class : NioServerSocketChannel.class;
        Class<? extends SocketChannel> clientClass = epoll ? EpollSocketChannel.class : NioSocketChannel.class;
        group = new MultiThreadIoEventLoopGroup(3, factory);
        server = new ServerBootstrap().group(group).channel(serverClass)
                .childOption(ChannelOption.ALLOCATOR, alloc).childOption(ChannelOption.TCP_NODELAY, true)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                            @Override
                            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                ctx.write(msg);
                            }

                            @Override
                            public void channelReadComplete(ChannelHandlerContext ctx) {
                                ctx.flush();
                            }
                        });
                    }
                }).bind(new InetSocketAddress("127.0.0.1", 0)).sync().channel();
        client = new Bootstrap().group(group).channel(clientClass)
                .option(ChannelOption.ALLOCATOR, alloc).option(ChannelOption.TCP_NODELAY, true)
                .handler(new ChannelInboundHandlerAdapter() {
                    @Override
                    public void channelRead(ChannelHandlerContext ctx, Object msg) {
                        ByteBuf in = (ByteBuf) msg;
                        received += in.readableBytes();
                        in.release();
                    }
                }).connect(server.localAddress()).sync().channel();
    }

    /** Closes the channels, the event loops and the pool. */
    @TearDown(Level.Trial)
    public void tearDown() throws InterruptedException {
        client.close().sync();
        server.close().sync();
        group.shutdownGracefully(0, 2, TimeUnit.SECONDS).sync();
        pool.close();
    }

    /** One message out and its whole echo back. */
    @Benchmark
    public int roundTrip() {
        int target = received + size;
        ByteBuf out = client.alloc().directBuffer(size).writeBytes(payload);
        client.writeAndFlush(out, client.voidPromise());
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (received < target) {
            Thread.onSpinWait();
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("no echo within 10 s: " + received + " of " + target + " bytes");
            }
        }
        return target;
    }
}
