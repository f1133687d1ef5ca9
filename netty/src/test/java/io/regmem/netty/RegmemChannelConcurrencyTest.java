package io.regmem.netty;

import static org.assertj.core.api.Assertions.assertThat;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.CompositeByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.regmem.registration.testkit.NoLeaks;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Many connections at once on loops that share their CQs: twelve clients on two event loops, each
 * written to by a thread of its own (never the event loop's: Netty hands the writes over), echo
 * byte-checked streams of random pieces (1 B to 1.5 MiB; registered, heap and composite buffers;
 * SENDs and read chunks mixed) through servers whose children run on two loops, holding back while
 * the channel is not writable. Three connections close midway while their writers go on: two by their
 * client once a mebibyte came back, one by the server's child once it echoed two. Their writers stop;
 * what they read is the stream; the other nine streams arrive whole and in order, and nobody hears an
 * exception; the pools hold nothing at the end.
 */
@ExtendWith(NoLeaks.class)
class RegmemChannelConcurrencyTest {
    private static final int CONNECTIONS = 12;
    private static final long BYTES_EACH = 12L << 20;
    /** Connection 9's child closes (on the server); 1 and 5 are closed by their client; all three midway. */
    private static final int SERVER_CLOSES = 9;
    private static final Set<Integer> CLOSED = Set.of(1, 5, SERVER_CLOSES);
    private Loops loops;
    private RegmemTransport transport;
    private EventLoopGroup boss;
    private EventLoopGroup workers;
    private EventLoopGroup clients;
    private final Queue<Throwable> unexpected = new ConcurrentLinkedQueue<>();

    @BeforeEach
    void setUp() {
        loops = new Loops(Map.of(), 2, 2);
        transport = loops.transport;
        boss = loops.boss;
        workers = loops.workers;
        clients = loops.clients;
    }

    @AfterEach
    void tearDown() throws Exception {
        loops.close();
    }

    /** A server whose children echo, each closing once it has echoed {@code closeAfter} bytes (0: never). */
    private Channel server(long closeAfter) throws InterruptedException {
        return new ServerBootstrap().group(boss, workers).channel(RegmemServerSocketChannel.class)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                            private long echoed;

                            @Override
                            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                echoed += ((ByteBuf) msg).readableBytes();
                                ctx.write(msg);
                                if (closeAfter > 0 && echoed >= closeAfter) {
                                    ctx.flush();
                                    ctx.close();
                                }
                            }

                            @Override
                            public void channelReadComplete(ChannelHandlerContext ctx) {
                                ctx.flush();
                            }

                            @Override
                            public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                                unexpected.add(cause);
                            }
                        });
                    }
                }).bind(new InetSocketAddress("127.0.0.1", 0)).sync().channel();
    }

    @Test
    void twelveConnectionsEchoByteCheckedStreamsWhileSomeClose() throws Exception {
        Channel server = server(0);
        Channel closer = server(2 << 20); // (connection 9's: its child closes once it echoed 2 MiB)
        List<Channel> chans = new ArrayList<>();
        List<PatternStream.Checker> checkers = new ArrayList<>();
        for (int i = 0; i < CONNECTIONS; i++) {
            PatternStream.Checker checker = new PatternStream.Checker();
            checkers.add(checker);
            chans.add(new Bootstrap().group(clients).channel(RegmemSocketChannel.class).handler(checker)
                    .connect((i == SERVER_CLOSES ? closer : server).localAddress()).sync().channel());
        }
        List<Thread> writers = new ArrayList<>();
        for (int i = 0; i < CONNECTIONS; i++) {
            int k = i;
            Channel c = chans.get(i);
            long budget = CLOSED.contains(i) ? Long.MAX_VALUE : BYTES_EACH; // (the closed ones write until closed)
            writers.add(Thread.ofPlatform().name("writer-" + i).start(() -> {
                SplittableRandom r = new SplittableRandom(k);
                long at = 0;
                try {
                    while (at < budget && c.isActive()) {
                        long deadline = System.nanoTime() + 30_000_000_000L;
                        while (!c.isWritable() && c.isActive() && System.nanoTime() < deadline) {
                            Thread.sleep(0, 200_000);
                        }
                        int size = (int) Math.min(budget - at, r.nextInt(4) == 0 ? r.nextInt(1, 1_500_000) : r.nextInt(1, 3000));
                        ByteBuf m = switch (r.nextInt(3)) {
                            case 0 -> PatternStream.fill(c.alloc().directBuffer(size), at, size);
                            case 1 -> PatternStream.fill(Unpooled.buffer(size), at, size);
                            default -> {
                                CompositeByteBuf comp = c.alloc().compositeDirectBuffer();
                                int half = size / 2;
                                comp.addComponent(true, PatternStream.fill(c.alloc().directBuffer(Math.max(half, 1)), at, half));
                                comp.addComponent(true, PatternStream.fill(Unpooled.buffer(size - half), at + half, size - half));
                                yield comp;
                            }
                        };
                        at += size;
                        c.writeAndFlush(m);
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }));
        }
        for (int i : CLOSED) { // closed by their client once a mebibyte came back
            if (i != SERVER_CLOSES) {
                long deadline = System.nanoTime() + 60_000_000_000L;
                while (checkers.get(i).read.get() < (1 << 20) && System.nanoTime() < deadline) {
                    Thread.sleep(1);
                }
                chans.get(i).close();
            }
        }
        for (Thread t : writers) {
            t.join(120_000);
            assertThat(t.isAlive()).as(t.getName()).isFalse();
        }
        for (int i = 0; i < CONNECTIONS; i++) {
            PatternStream.Checker ch = checkers.get(i);
            if (CLOSED.contains(i)) {
                assertThat(chans.get(i).closeFuture().await(30, TimeUnit.SECONDS)).as("connection " + i + " closed").isTrue();
                assertThat(ch.read.get()).as("connection " + i).isGreaterThanOrEqualTo(i == SERVER_CLOSES ? 2 << 20 : 1 << 20);
            } else {
                long deadline = System.nanoTime() + 60_000_000_000L;
                while (ch.read.get() < BYTES_EACH && System.nanoTime() < deadline) {
                    Thread.sleep(2);
                }
                assertThat(ch.read.get()).as("connection " + i).isEqualTo(BYTES_EACH);
                assertThat(chans.get(i).isActive()).isTrue();
            }
            assertThat(ch.wrong.get()).as("connection " + i).isNull();
        }
        assertThat(unexpected).isEmpty();
        for (Channel c : chans) {
            c.close().sync();
        }
        server.close().sync();
        closer.close().sync();
    }
}
