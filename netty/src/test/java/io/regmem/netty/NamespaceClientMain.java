package io.regmem.netty;

import io.grpc.ManagedChannel;
import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.testkit.ChildSide;
import java.net.InetSocketAddress;
import java.util.Arrays;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * The client process of {@link RegmemChannelNamespacesTest}: over a device of the provider in its
 * second argument, to the server at its third and fourth (host, port), either ({@code netty}) a Netty
 * client that sends a byte-checked stream of messages of 1 B to 4 MiB to an echo server and checks
 * what comes back, or ({@code grpc}) gRPC unary and streaming calls; it says {@code OK} or
 * {@code FAILED why}, then {@code CLEAN}.
 */
public final class NamespaceClientMain {
    private NamespaceClientMain() {
    }

    public static void main(String[] args) throws Throwable {
        String host = args[2];
        int port = Integer.parseInt(args[3]);
        try (RdmaDevice dev = RdmaDevice.open(args[1], Map.of());
             RegmemTransport transport = RegmemTransport.builder(dev).build()) {
            EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, transport.ioHandlerFactory());
            try {
                if ("grpc".equals(args[0])) {
                    ManagedChannel ch = GrpcOverRegmemTest.channel(transport, group, host, port);
                    try {
                        GrpcOverRegmemTest.unaryAndStreams(ch);
                    } finally {
                        ch.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
                    }
                } else {
                    echo(group, host, port);
                }
                ChildSide.say("OK");
            } catch (Throwable t) {
                ChildSide.say("FAILED " + t);
            } finally {
                group.shutdownGracefully(0, 2, TimeUnit.SECONDS).sync();
            }
        }
        ChildSide.say("CLEAN");
    }

    private static void echo(EventLoopGroup group, String host, int port) throws Exception {
        int[] sizes = {1, 64, 4096, 65537, 1 << 20, 4 << 20};
        byte[] all = new byte[Arrays.stream(sizes).sum()];
        new Random(5).nextBytes(all);
        CompletableFuture<Void> done = new CompletableFuture<>();
        Channel ch = new Bootstrap().group(group).channel(RegmemSocketChannel.class).handler(new ChannelInboundHandlerAdapter() {
            int at;

            @Override
            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                ByteBuf in = (ByteBuf) msg;
                int n = in.readableBytes();
                byte[] got = new byte[n];
                in.readBytes(got);
                in.release();
                if (at + n > all.length || !Arrays.equals(got, 0, n, all, at, at + n)) {
                    done.completeExceptionally(new AssertionError("the echo differs at byte " + at));
                }
                at += n;
                if (at == all.length) {
                    done.complete(null);
                }
            }
        }).connect(new InetSocketAddress(host, port)).sync().channel();
        int at = 0;
        for (int size : sizes) {
            ch.write(ch.alloc().directBuffer(size).writeBytes(all, at, size));
            at += size;
        }
        ch.flush();
        done.get(60, TimeUnit.SECONDS);
        ch.close().sync();
    }
}
