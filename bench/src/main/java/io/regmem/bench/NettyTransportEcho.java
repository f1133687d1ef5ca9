package io.regmem.bench;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.socket.SocketChannel;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.ArrayDeque;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.HdrHistogram.Histogram;

/**
 * A Netty echo between two processes, on one of three transports: {@code regmem-shm} / {@code regmem-ucx}
 * (the regmem transport over an shm or ucx device, {@link BenchTransports}: device options after a colon; its event loops busy-poll for 50 us after their
 * last work, then sleep), {@code epoll} and {@code nio} (Netty's TCP transports, TCP_NODELAY, their
 * event loops sleeping in epoll_wait/select; Netty's pooled allocator). {@code server TRANSPORT HOST}
 * echoes every byte it reads and says {@code PORT n}; it ends with its standard input.
 * {@code client TRANSPORT HOST PORT SIZE INFLIGHT SECONDS} keeps INFLIGHT messages of SIZE bytes in
 * flight on one connection for a warm-up ({@code -Dbench.warmupSeconds}, default 3) and then SECONDS, and records each message's round
 * trip (its write until the last of its bytes came back): {@code RESULT} says messages/s, p50, p99 and
 * p99.9. One event loop per process; nothing else spins.
 */
public final class NettyTransportEcho {
    private NettyTransportEcho() {
    }

    public static void main(String[] args) throws Exception {
        NettySide side = NettySide.of(args[1]);
        try {
            if ("server".equals(args[0])) {
                server(side, args[2]);
            } else {
                client(side, args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]), Integer.parseInt(args[5]),
                        Integer.parseInt(args[6]));
            }
        } finally {
            side.close();
        }
    }

    private static void server(NettySide side, String host) throws InterruptedException, IOException {
        Channel server = new ServerBootstrap().group(side.group()).channel(side.server()).childOption(ChannelOption.TCP_NODELAY, true)
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

                            @Override
                            public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                                ctx.close();
                            }
                        });
                    }
                }).bind(new InetSocketAddress(host, 0)).sync().channel();
        System.out.println("PORT " + ((InetSocketAddress) server.localAddress()).getPort());
        System.out.flush();
        while (System.in.read() >= 0) {
            // until the script ends the server
        }
        server.close().sync();
    }

    /** Keeps {@code inflight} messages going; records each round trip once warmed up. */
    private static final class Driver extends ChannelInboundHandlerAdapter {
        final int size;
        final int inflight;
        final byte[] payload;
        final ArrayDeque<Long> sentAt = new ArrayDeque<>();
        final Histogram latency = new Histogram(10_000_000_000L, 3);
        final CompletableFuture<Void> done = new CompletableFuture<>();
        long measureFrom;
        long stopAt;
        long pending;
        long measured;

        Driver(int size, int inflight, long warmupNanos, long runNanos) {
            this.size = size;
            this.inflight = inflight;
            this.payload = new byte[size];
            long now = System.nanoTime();
            this.measureFrom = now + warmupNanos;
            this.stopAt = measureFrom + runNanos;
        }

        private void send(ChannelHandlerContext ctx) {
            sentAt.addLast(System.nanoTime());
            ctx.write(ctx.alloc().directBuffer(size).writeBytes(payload), ctx.voidPromise());
        }

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            for (int i = 0; i < inflight; i++) {
                send(ctx);
            }
            ctx.flush();
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf in = (ByteBuf) msg;
            pending += in.readableBytes();
            in.release();
            long now = System.nanoTime();
            boolean sent = false;
            while (pending >= size) {
                pending -= size;
                long at = sentAt.removeFirst();
                if (at >= measureFrom && now < stopAt) {
                    latency.recordValue(now - at);
                    measured++;
                }
                if (now < stopAt) {
                    send(ctx);
                    sent = true;
                }
            }
            if (sent) {
                ctx.flush();
            }
            if (now >= stopAt && sentAt.isEmpty()) {
                done.complete(null);
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            done.completeExceptionally(cause);
        }
    }

    private static void client(NettySide side, String transport, String host, int port, int size, int inflight, int seconds)
            throws Exception {
        Driver d = new Driver(size, inflight, TimeUnit.SECONDS.toNanos(Long.getLong("bench.warmupSeconds", 3)),
                TimeUnit.SECONDS.toNanos(seconds));
        Channel ch = new Bootstrap().group(side.group()).channel(side.client()).option(ChannelOption.TCP_NODELAY, true).handler(d)
                .connect(new InetSocketAddress(host, port)).sync().channel();
        d.done.get(seconds + 120L, TimeUnit.SECONDS);
        ch.close().sync();
        Histogram h = d.latency;
        System.out.printf(Locale.ROOT, "RESULT %s size %d inflight %d: %.0f messages/s, round trip p50 %.2f us, p99 %.2f us, "
                        + "p99.9 %.2f us%n", transport, size, inflight, d.measured / (double) seconds,
                h.getValueAtPercentile(50) / 1e3, h.getValueAtPercentile(99) / 1e3, h.getValueAtPercentile(99.9) / 1e3);
    }
}
