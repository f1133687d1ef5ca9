package io.regmem.netty;

import static org.assertj.core.api.Assertions.assertThat;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.regmem.registration.testkit.NoLeaks;
import java.net.InetSocketAddress;
import java.util.Arrays;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A Netty echo over the regmem transport on shm, in one JVM: a client writes messages of 1 B to
 * 16 MiB (each cut into pieces of the peer's receive size, in buffers of the transport's allocator or
 * not), the server writes back what it reads, and the client checks the echo byte for byte.
 */
@ExtendWith(NoLeaks.class)
class RegmemChannelEchoTest {
    private Loops loops;
    private RegmemTransport transport;
    private EventLoopGroup clients;
    private Channel server;
    private final AtomicReference<Throwable> failure = new AtomicReference<>();

    @BeforeEach
    void setUp() throws Exception {
        loops = new Loops(Map.of(), 2, 1);
        transport = loops.transport;
        clients = loops.clients;
        server = new ServerBootstrap().group(loops.boss, loops.workers).channel(RegmemServerSocketChannel.class)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        ch.pipeline().addLast(new PatternStream.Echo(failure));
                    }
                }).bind(new InetSocketAddress("127.0.0.1", 0)).sync().channel();
    }

    @AfterEach
    void tearDown() throws Exception {
        if (server != null) {
            server.close().sync();
        }
        loops.close();
        assertThat(failure.get()).isNull();
    }

    /** A client that checks the echo of one message at a time. */
    private static final class Checker extends ChannelInboundHandlerAdapter {
        volatile byte[] expected;
        int offset;
        volatile CompletableFuture<Void> done = new CompletableFuture<>();

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf in = (ByteBuf) msg;
            try {
                int n = in.readableBytes();
                byte[] want = expected;
                byte[] got = new byte[n];
                in.readBytes(got);
                if (want == null || offset + n > want.length || !Arrays.equals(got, 0, n, want, offset, offset + n)) {
                    done.completeExceptionally(new AssertionError("echo differs at " + offset + " (+" + n + ")"));
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
            done.completeExceptionally(cause);
        }
    }

    @Test
    void echoesByteCheckedMessagesFromOneByteToSixteenMebibytes() throws Exception {
        Checker checker = new Checker();
        Channel ch = new Bootstrap().group(clients).channel(RegmemSocketChannel.class).handler(checker)
                .connect(server.localAddress()).sync().channel();
        assertThat(ch.isActive()).isTrue();
        assertThat(ch.alloc()).isSameAs(transport.allocator());
        Random random = new Random(42);
        int[] sizes = {1, 64, 2048, 2049, 65536, 65537, 1 << 20, 16 << 20};
        for (int size : sizes) {
            for (boolean registered : new boolean[] {true, false}) {
                byte[] message = new byte[size];
                random.nextBytes(message);
                checker.expected = message;
                checker.offset = 0;
                checker.done = new CompletableFuture<>();
                ByteBuf out = registered ? ch.alloc().directBuffer(size) : io.netty.buffer.Unpooled.buffer(size);
                ch.writeAndFlush(out.writeBytes(message));
                checker.done.get(60, TimeUnit.SECONDS);
            }
        }
        ch.close().sync();
    }
}
