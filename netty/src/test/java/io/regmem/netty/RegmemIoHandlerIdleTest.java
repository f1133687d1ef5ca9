package io.regmem.netty;

import static org.assertj.core.api.Assertions.assertThat;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.socket.SocketChannel;
import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.testkit.NoLeaks;
import java.net.InetSocketAddress;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;
import org.assertj.core.api.Assertions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * What an event loop does with nothing to do: with busy polling off it sleeps, except while a peer
 * holds one of its connections' chunks (for at most {@code chunkPollNanos} after its last work), and
 * the count of chunks under way of both loops comes back to 0 whether the chunks were read and answered
 * or the connection ended first.
 */
@ExtendWith(NoLeaks.class)
class RegmemIoHandlerIdleTest {
    private static final int MIB = 1 << 20;

    /** A server whose one child counts what it reads into {@code received} and is kept in {@code child}. */
    private static Channel server(Loops loops, AtomicReference<Channel> child, AtomicLong received) throws InterruptedException {
        return new ServerBootstrap().group(loops.boss, loops.workers).channel(RegmemServerSocketChannel.class)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        child.set(ch);
                        ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                            @Override
                            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                received.addAndGet(((ByteBuf) msg).readableBytes());
                                ((ByteBuf) msg).release();
                            }
                        });
                    }
                }).bind(new InetSocketAddress("127.0.0.1", 0)).sync().channel();
    }

    /** Runs {@code task} on {@code ch}'s event loop and returns its result. */
    private static <T> T onLoop(Channel ch, Callable<T> task) throws Exception {
        return ch.eventLoop().submit(task).get(10, TimeUnit.SECONDS);
    }

    private static void await(String what, BooleanSupplier condition) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                Assertions.fail("not within 20 s: " + what);
            }
            Thread.sleep(1);
        }
    }

    /** Holds {@code ch}'s event loop until the latch returned is counted down (the loop is held when this returns). */
    private static CountDownLatch hold(Channel ch) throws InterruptedException {
        CountDownLatch release = new CountDownLatch(1);
        CountDownLatch held = new CountDownLatch(1);
        ch.eventLoop().execute(() -> {
            held.countDown();
            try {
                release.await(30, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        assertThat(held.await(10, TimeUnit.SECONDS)).isTrue();
        return release;
    }

    @Test
    @Timeout(120)
    void aLoopPollsOnWhileThePeerHoldsItsChunksAndSleepsOnceTheyAreAnswered() throws Exception {
        AtomicReference<Channel> child = new AtomicReference<>();
        AtomicLong received = new AtomicLong();
        try (Loops loops = new Loops(Map.of(), 1, 1, b -> b.busyPollNanos(0).chunkPollNanos(1_000_000_000L))) {
            Channel server = server(loops, child, received);
            Channel client = new Bootstrap().group(loops.clients).channel(RegmemSocketChannel.class)
                    .handler(new ChannelInboundHandlerAdapter()).connect(server.localAddress()).sync().channel();
            await("the server's child", () -> child.get() != null && child.get().isActive());
            RegmemIoHandler loop = ((RegmemSocketChannel) client).connection().handler;
            Channel reader = child.get();
            RegmemIoHandler readerLoop = ((RegmemSocketChannel) reader).connection().handler;
            await("the client's loop asleep (busy polling off)", loop::asleep);

            // The server's loop is held: the two chunks of a 2 MiB write stay unread, unanswered.
            CountDownLatch release = hold(reader);
            ByteBuf msg = client.alloc().directBuffer(2 * MIB);
            msg.writeZero(2 * MIB);
            client.writeAndFlush(msg);
            await("two chunks out", () -> call(() -> onLoop(client, loop::chunksUnderWay)) == 2);
            for (int i = 0; i < 100; i++) { // (within the second of chunkPollNanos after its last work)
                assertThat(loop.asleep()).as("the loop asleep while the peer holds its chunks (look %d)", i).isFalse();
                Thread.sleep(1);
            }
            release.countDown();
            await("the 2 MiB read", () -> received.get() == 2 * MIB);
            await("the chunks answered", () -> call(() -> onLoop(client, loop::chunksUnderWay)) == 0);
            await("the chunks read", () -> call(() -> onLoop(reader, readerLoop::chunksUnderWay)) == 0);
            await("the client's loop asleep again", loop::asleep);

            // A close that does not wait for the peer's answers: the chunks it drops are not out any more.
            CountDownLatch again = hold(reader);
            client.config().setOption(ChannelOption.SO_LINGER, 0);
            ByteBuf more = client.alloc().directBuffer(2 * MIB);
            more.writeZero(2 * MIB);
            client.writeAndFlush(more);
            await("two chunks out", () -> call(() -> onLoop(client, loop::chunksUnderWay)) == 2);
            client.close().sync();
            await("the dropped chunks no longer out", () -> call(() -> onLoop(client, loop::chunksUnderWay)) == 0);
            again.countDown();
            await("the reader's end of the dropped chunks", () -> call(() -> onLoop(reader, readerLoop::chunksUnderWay)) == 0);
            await("the client's loop asleep again", loop::asleep);
            server.close().sync();
        }
    }

    @Test
    void chunkPollNanosOutsideZeroToASecondIsRefused() {
        try (RdmaDevice dev = RdmaDevice.open("shm", Map.of())) {
            for (long bad : new long[] {-1, 1_000_000_001L, Long.MAX_VALUE}) {
                Assertions.assertThatThrownBy(() -> RegmemTransport.builder(dev).chunkPollNanos(bad))
                        .isInstanceOf(RdmaException.class).hasMessageContaining("chunkPollNanos " + bad)
                        .satisfies(e -> assertThat(((RdmaException) e).errno()).isEqualTo(Errno.EINVAL));
            }
        }
    }

    private static <T> T call(Callable<T> c) {
        try {
            return c.call();
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }
}
