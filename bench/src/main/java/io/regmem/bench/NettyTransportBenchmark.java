package io.regmem.bench;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.regmem.netty.RegmemServerSocketChannel;
import io.regmem.netty.RegmemSocketChannel;
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
 * The regmem Netty transport's own cost, in one JVM: a 64-byte echo ping-pong between a client and a
 * server channel on shm, both on one event loop (busy-polling), which drives it: the client's handler
 * writes the next message (from the transport's allocator, the void promise) as the last echo comes
 * back; the benchmark thread spins until the next echo, so one operation is one round trip and two
 * threads spin, as in {@code PingPongBenchmark}'s verbs ping-pong. The server's pipeline is one
 * handler that writes back what it reads. Run with {@code -prof gc}: what a round trip allocates is
 * the transport's and these handlers' (a write from a thread outside the event loop would add Netty's
 * own {@code WriteTask}).
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "-Xms1g", "-Xmx1g",
        "--sun-misc-unsafe-memory-access=allow", "-Dio.netty.leakDetection.level=disabled"})
public class NettyTransportBenchmark extends BenchDefaults {
    /** Message bytes. */
    @Param({"64"})
    public int size;

    /** The regmem transport's device: {@code regmem-shm} (options after a colon: {@link BenchTransports}). */
    @Param({"regmem-shm"})
    public String transport;

    private BenchTransports regmem;
    private EventLoopGroup group;
    private Channel server;
    private Channel client;
    private byte[] payload;
    private volatile long completed;

    /** Starts the server and connects the client. */
    @Setup(Level.Trial)
    public void setUp() throws InterruptedException {
        payload = new byte[size];
        regmem = BenchTransports.open(transport);
        group = new MultiThreadIoEventLoopGroup(1, regmem.transport().ioHandlerFactory());
        server = new ServerBootstrap().group(group).channel(RegmemServerSocketChannel.class)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                            @Override
                            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                ctx.write(msg, ctx.voidPromise());
                            }

                            @Override
                            public void channelReadComplete(ChannelHandlerContext ctx) {
                                ctx.flush();
                            }
                        });
                    }
                }).bind(new InetSocketAddress("127.0.0.1", 0)).sync().channel();
        client = new Bootstrap().group(group).channel(RegmemSocketChannel.class)
                .handler(new ChannelInboundHandlerAdapter() {
                    private long pending;

                    @Override
                    public void channelRead(ChannelHandlerContext ctx, Object msg) {
                        ByteBuf in = (ByteBuf) msg;
                        pending += in.readableBytes();
                        in.release();
                        if (pending >= size) { // the whole echo: the next message goes out from here
                            pending -= size;
                            completed++;
                            ctx.writeAndFlush(ctx.alloc().directBuffer(size).writeBytes(payload), ctx.voidPromise());
                        }
                    }
                }).connect(server.localAddress()).sync().channel();
        client.eventLoop().execute(() -> client.writeAndFlush(client.alloc().directBuffer(size).writeBytes(payload),
                client.voidPromise()));
    }

    /** Closes the channels, the event loops, the transport and its device. */
    @TearDown(Level.Trial)
    public void tearDown() throws InterruptedException {
        client.close().sync();
        server.close().sync();
        group.shutdownGracefully(0, 2, TimeUnit.SECONDS).sync();
        regmem.close();
    }

    /** One round trip of the ping-pong the event loop drives: the benchmark thread waits for the next echo. */
    @Benchmark
    public long roundTrip() {
        long target = completed + 1;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (completed < target) {
            Thread.onSpinWait();
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("no echo within 10 s");
            }
        }
        return target;
    }
}
