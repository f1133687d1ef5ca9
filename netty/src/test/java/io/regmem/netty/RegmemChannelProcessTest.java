package io.regmem.netty;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.testkit.ChildJvm;
import io.regmem.registration.testkit.NoLeaks;
import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The regmem transport between two processes on one host (shm): a Netty client here, the echo server
 * of {@link NettyEchoServerMain} in a child JVM. A byte-checked stream of 1 B to 16 MiB messages comes
 * back whole; a server killed mid-stream closes the client's channel and fails the writes not yet
 * sent; a server whose device holds another secret refuses the connection before any channel reaches
 * its pipeline.
 */
@ExtendWith(NoLeaks.class)
class RegmemChannelProcessTest {
    private static final String SECRET = "netty-transport-process-test-secret-0123456789";
    private RdmaDevice dev;
    private RegmemTransport transport;
    private EventLoopGroup clients;

    @BeforeEach
    void setUp() {
        dev = RdmaDevice.open("shm", Map.of("secret", SECRET));
        transport = RegmemTransport.builder(dev).build();
        clients = new MultiThreadIoEventLoopGroup(1, transport.ioHandlerFactory());
    }

    @AfterEach
    void tearDown() throws Exception {
        clients.shutdownGracefully(0, 2, TimeUnit.SECONDS).sync();
        long held = transport.allocator().metric().usedDirectMemory();
        transport.close();
        dev.close();
        assertThat(held).as("bytes of the transport's pool still held once every channel and loop is gone").isZero();
    }

    private static ChildJvm server(String secret) throws Exception {
        return ChildJvm.of(NettyEchoServerMain.class).env("REGMEM_SECRET", secret).start();
    }

    private static int port(ChildJvm child) throws InterruptedException {
        return Integer.parseInt(child.expect("PORT ").substring("PORT ".length()));
    }

    /** Counts and checks what comes back against what was sent, byte for byte. */
    private static final class Echo extends ChannelInboundHandlerAdapter {
        final byte[] sent;
        final AtomicLong received = new AtomicLong();
        final CompletableFuture<Void> done = new CompletableFuture<>();

        Echo(byte[] sent) {
            this.sent = sent;
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf in = (ByteBuf) msg;
            try {
                int n = in.readableBytes();
                int at = (int) received.get();
                byte[] got = new byte[n];
                in.readBytes(got);
                if (at + n > sent.length || !Arrays.equals(got, 0, n, sent, at, at + n)) {
                    done.completeExceptionally(new AssertionError("the echo differs at byte " + at));
                }
                if (received.addAndGet(n) == sent.length) {
                    done.complete(null);
                }
            } finally {
                in.release();
            }
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            done.completeExceptionally(new AssertionError("inactive after " + received.get() + " bytes"));
        }
    }

    @Test
    void aStreamOfMessagesFromOneByteToSixteenMebibytesComesBackWholeFromAnotherProcess() throws Exception {
        try (ChildJvm child = server(SECRET)) {
            int[] sizes = {1, 64, 2049, 65537, 1 << 20, 16 << 20};
            int total = Arrays.stream(sizes).sum();
            byte[] all = new byte[total];
            new Random(7).nextBytes(all);
            Echo echo = new Echo(all);
            Channel ch = new Bootstrap().group(clients).channel(RegmemSocketChannel.class).handler(echo)
                    .connect(new InetSocketAddress("127.0.0.1", port(child))).sync().channel();
            int at = 0;
            for (int size : sizes) {
                ch.write(ch.alloc().directBuffer(size).writeBytes(all, at, size));
                at += size;
            }
            ch.flush();
            echo.done.get(60, TimeUnit.SECONDS);
            ch.close().sync();
            child.command("CHANNELS");
            assertThat(child.expect("CHANNELS ")).isEqualTo("CHANNELS 1");
            child.finish();
        }
    }

    @Test
    void aServerKilledMidStreamClosesTheChannelAndFailsTheWritesNotYetSent() throws Exception {
        try (ChildJvm child = server(SECRET)) {
            byte[] chunk = new byte[1 << 20];
            Echo echo = new Echo(new byte[Integer.MAX_VALUE - 8]);
            InetSocketAddress server = new InetSocketAddress("127.0.0.1", port(child));
            Channel ch = new Bootstrap().group(clients).channel(RegmemSocketChannel.class).handler(echo)
                    .connect(server).sync().channel();
            InetSocketAddress source = (InetSocketAddress) ch.localAddress();
            assertThat(source.getAddress().getHostAddress()).as("the connection's source").isEqualTo("127.0.0.1");
            assertThat(source.getPort()).isPositive();
            assertThat(ch.remoteAddress()).isEqualTo(server);
            List<ChannelFuture> writes = new ArrayList<>();
            for (int i = 0; i < 256; i++) { // 256 MiB: far more than the credits let out before the kill
                writes.add(ch.writeAndFlush(ch.alloc().directBuffer(chunk.length).writeBytes(chunk)));
            }
            long deadline = System.nanoTime() + 30_000_000_000L;
            while (echo.received.get() == 0 && System.nanoTime() < deadline) {
                Thread.sleep(1);
            }
            assertThat(echo.received.get()).as("the echo started").isPositive();
            child.signal("KILL");
            assertThat(ch.closeFuture().await(30, TimeUnit.SECONDS)).as("the channel closes once its peer died").isTrue();
            for (ChannelFuture w : writes) {
                assertThat(w.await(30, TimeUnit.SECONDS)).isTrue();
            }
            assertThat(writes.stream().filter(w -> !w.isSuccess()).count()).as("writes not sent failed").isPositive();
        }
    }

    @Test
    void aServerWithAnotherSecretRefusesTheConnectionBeforeItsPipelineSeesAChannel() throws Exception {
        try (ChildJvm child = server("a-secret-of-its-own-for-the-outsider-0123456789")) {
            int port = port(child);
            assertThatThrownBy(() -> new Bootstrap().group(clients).channel(RegmemSocketChannel.class)
                    .handler(new ChannelInboundHandlerAdapter())
                    .connect(new InetSocketAddress("127.0.0.1", port)).sync())
                    .isInstanceOf(ConnectException.class);
            child.command("CHANNELS");
            assertThat(child.expect("CHANNELS ")).isEqualTo("CHANNELS 0");
            child.finish();
        }
    }
}
