package io.regmem.netty;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.AdaptiveRecvByteBufAllocator;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoop;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.RecvByteBufAllocator;
import io.netty.channel.group.ChannelGroup;
import io.netty.channel.group.DefaultChannelGroup;
import io.netty.channel.socket.ChannelInputShutdownEvent;
import io.netty.channel.socket.SocketChannel;
import io.netty.util.ResourceLeakDetector;
import io.netty.util.concurrent.GlobalEventExecutor;
import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.testkit.NoLeaks;
import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.RepeatedTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * What Netty's own socket tests ask of a transport, on the regmem transport (shm, one JVM): half
 * closure, auto-read off holding the peer back (credits) until the reader reads, writability that
 * flips and comes back, a refused connection, every buffer written released once written (registered,
 * heap and unpooled, 10 B to 1 MiB), a close that still delivers what was written before it,
 * 1,000 connects and closes that leave no channel, thread, lane mapping or file behind, and a stream under the
 * PARANOID leak detector that reports nothing.
 */
@ExtendWith(NoLeaks.class)
class RegmemChannelBehaviourTest {
    private Loops loops;
    private RegmemTransport transport;
    private EventLoopGroup boss;
    private EventLoopGroup workers;
    private EventLoopGroup clients;
    private final ChannelGroup children = new DefaultChannelGroup(GlobalEventExecutor.INSTANCE);

    @BeforeEach
    void setUp() {
        loops = new Loops();
        transport = loops.transport;
        boss = loops.boss;
        workers = loops.workers;
        clients = loops.clients;
    }

    @AfterEach
    void tearDown() throws Exception {
        loops.close();
    }

    /** A server whose children run {@code init} (and join {@link #children}); its options from {@code options}. */
    private Channel server(Consumer<SocketChannel> init, Consumer<ServerBootstrap> options) throws InterruptedException {
        ServerBootstrap b = new ServerBootstrap().group(boss, workers).channel(RegmemServerSocketChannel.class)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        children.add(ch);
                        init.accept(ch);
                    }
                });
        options.accept(b);
        return b.bind(new InetSocketAddress("127.0.0.1", 0)).sync().channel();
    }

    private Channel client(Channel server, ChannelInboundHandlerAdapter handler) throws InterruptedException {
        return new Bootstrap().group(clients).channel(RegmemSocketChannel.class).option(ChannelOption.ALLOW_HALF_CLOSURE, true)
                .handler(handler).connect(server.localAddress()).sync().channel();
    }

    /** Counts the bytes read (releasing them), and says when the input ended. */
    private static class Counter extends ChannelInboundHandlerAdapter {
        final AtomicLong bytes = new AtomicLong();
        final CompletableFuture<Void> inputEnded = new CompletableFuture<>();

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            bytes.addAndGet(((ByteBuf) msg).readableBytes());
            ((ByteBuf) msg).release();
        }

        @Override
        public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
            if (evt == ChannelInputShutdownEvent.INSTANCE) {
                inputEnded.complete(null);
            }
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            inputEnded.complete(null);
        }
    }

    /** Bytes {@code from} to {@code from + size} of the stream a {@link PatternStream.Checker} checks, in a buffer of {@code c}'s allocator. */
    private static ByteBuf patterned(Channel c, long from, int size) {
        return PatternStream.fill(c.alloc().directBuffer(size), from, size);
    }

    /** A server whose children echo what they read (flushed at each channelReadComplete), their SO_RCVBUF {@code window}. */
    private Channel echoServer(int window) throws InterruptedException {
        return server(ch -> ch.pipeline().addLast(new PatternStream.Echo()), b -> b.childOption(ChannelOption.SO_RCVBUF, window));
    }

    private static void waitFor(String what, java.util.function.BooleanSupplier done) throws InterruptedException {
        long deadline = System.nanoTime() + 30_000_000_000L;
        while (!done.getAsBoolean()) {
            assertThat(System.nanoTime()).as(what).isLessThan(deadline);
            Thread.sleep(1);
        }
    }

    @Test
    void halfClosureLetsTheServerAnswerAfterTheClientsOutputEnded() throws Exception {
        Channel s = server(ch -> ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
            long got;

            @Override
            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                got += ((ByteBuf) msg).readableBytes();
                ((ByteBuf) msg).release();
            }

            @Override
            public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
                if (evt == ChannelInputShutdownEvent.INSTANCE) { // the client is done: answer with the count, then close
                    ctx.writeAndFlush(ctx.alloc().buffer(8).writeLong(got)).addListener(f -> ctx.close());
                }
            }
        }), b -> b.childOption(ChannelOption.ALLOW_HALF_CLOSURE, true));
        CompletableFuture<Long> answer = new CompletableFuture<>();
        Counter ended = new Counter() {
            @Override
            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                answer.complete(((ByteBuf) msg).readLong());
                ((ByteBuf) msg).release();
            }
        };
        Channel c = client(s, ended);
        c.writeAndFlush(c.alloc().buffer(100_000).writeZero(100_000));
        ((SocketChannel) c).shutdownOutput().sync();
        assertThat(((SocketChannel) c).isOutputShutdown()).isTrue();
        assertThat(answer.get(30, TimeUnit.SECONDS)).as("the server read all, then answered").isEqualTo(100_000);
        ended.inputEnded.get(30, TimeUnit.SECONDS);
        c.close().sync();
        s.close().sync();
    }

    /**
     * As Netty's SocketHalfClosedTest (testAllDataReadEventTriggeredAfterHalfClosure): with half closure,
     * after every byte the peer's end goes up as one ChannelInputShutdownEvent and then, at the read after
     * it, one ChannelInputShutdownReadComplete; with AUTO_READ on, and off with the handler reading on.
     */
    @RepeatedTest(2)
    void theInputsEndGoesUpOnceAndThenThatAllWasRead(org.junit.jupiter.api.RepetitionInfo run) throws Exception {
        boolean autoRead = run.getCurrentRepetition() == 1;
        List<String> seen = new java.util.concurrent.CopyOnWriteArrayList<>();
        AtomicLong bytes = new AtomicLong();
        Channel s = server(ch -> ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
            @Override
            public void channelActive(ChannelHandlerContext ctx) {
                ctx.read();
            }

            @Override
            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                bytes.addAndGet(((ByteBuf) msg).readableBytes());
                ((ByteBuf) msg).release();
            }

            @Override
            public void channelReadComplete(ChannelHandlerContext ctx) {
                ctx.read();
            }

            @Override
            public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
                if (evt == ChannelInputShutdownEvent.INSTANCE) {
                    seen.add("end after " + bytes.get());
                } else if (evt == io.netty.channel.socket.ChannelInputShutdownReadComplete.INSTANCE) {
                    seen.add("all read");
                }
            }
        }), b -> b.childOption(ChannelOption.ALLOW_HALF_CLOSURE, true).childOption(ChannelOption.AUTO_READ, autoRead));
        Channel c = client(s, new ChannelInboundHandlerAdapter());
        c.writeAndFlush(c.alloc().directBuffer(100_000).writeZero(100_000)).sync();
        ((SocketChannel) c).shutdownOutput().sync();
        waitFor("the end and the read after it", () -> seen.size() >= 2);
        Thread.sleep(100); // (nothing more comes)
        assertThat(seen).containsExactly("end after 100000", "all read");
        c.close().sync();
        s.close().sync();
    }

    @Test
    void autoReadOffHoldsTheWriterBackUntilTheReaderReadsAndWritabilityComesBack() throws Exception {
        Counter serverSide = new Counter();
        Channel s = server(ch -> ch.pipeline().addLast(serverSide), b -> b.childOption(ChannelOption.AUTO_READ, false));
        AtomicBoolean wasUnwritable = new AtomicBoolean();
        Channel c = client(s, new ChannelInboundHandlerAdapter() {
            @Override
            public void channelWritabilityChanged(ChannelHandlerContext ctx) {
                if (!ctx.channel().isWritable()) {
                    wasUnwritable.set(true);
                }
            }
        });
        long total = 8L << 20;
        for (long sent = 0; sent < total; sent += 65536) {
            c.write(c.alloc().directBuffer(65536).writeZero(65536));
        }
        c.flush();
        waitFor("the writer ran out of credits", () -> !c.isWritable());
        Thread.sleep(50);
        assertThat(serverSide.bytes.get()).as("nothing read while the server does not read").isZero();
        waitFor("a child", () -> children.size() == 1);
        children.iterator().next().config().setAutoRead(true);
        waitFor("everything arrived once the server reads", () -> serverSide.bytes.get() == total);
        waitFor("writable again", c::isWritable);
        assertThat(wasUnwritable).isTrue();
        c.close().sync();
        s.close().sync();
    }

    /**
     * AUTO_READ off holds back a writer of pieces larger than a receive (read chunks) too: the reader
     * reads no chunk it has no room to keep, so the writer runs out of room instead of the reader's
     * pool, and once the reader reads, every byte arrives in order.
     */
    @Test
    void autoReadOffHoldsAWriterOfChunksBackAndEveryByteArrivesInOrderOnceTheReaderReads() throws Exception {
        PatternStream.Checker serverSide = new PatternStream.Checker();
        Channel s = server(ch -> ch.pipeline().addLast(serverSide), b -> b.childOption(ChannelOption.AUTO_READ, false));
        Channel c = client(s, new ChannelInboundHandlerAdapter());
        int size = 4 * transport.receiveSize;
        long total = 64L * size;
        for (long sent = 0; sent < total; sent += size) {
            c.write(patterned(c, sent, size));
        }
        c.flush();
        waitFor("a child", () -> children.size() == 1);
        waitFor("the writer held back", () -> !c.isWritable());
        Thread.sleep(200);
        assertThat(serverSide.read.get()).as("nothing read while the server does not read").isZero();
        children.iterator().next().config().setAutoRead(true);
        waitFor("everything arrived once the server reads", () -> serverSide.read.get() == total);
        assertThat(serverSide.wrong.get()).isNull();
        c.close().sync();
        s.close().sync();
    }

    /**
     * RCVBUF_ALLOCATOR's maxMessagesPerRead bounds the pieces one read hands up (between two
     * channelReadComplete), as on Netty's socket channels; the rest goes up in the reads that follow.
     */
    @Test
    void maxMessagesPerReadBoundsTheReadsOfOneBatch() throws Exception {
        AtomicInteger inBatch = new AtomicInteger();
        AtomicInteger most = new AtomicInteger();
        AtomicLong bytes = new AtomicLong();
        Channel s = server(ch -> ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
            @Override
            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                bytes.addAndGet(((ByteBuf) msg).readableBytes());
                ((ByteBuf) msg).release();
                most.accumulateAndGet(inBatch.incrementAndGet(), Math::max);
            }

            @Override
            public void channelReadComplete(ChannelHandlerContext ctx) {
                inBatch.set(0);
            }
        }), b -> b.childOption(ChannelOption.AUTO_READ, false)
                .childOption(ChannelOption.RCVBUF_ALLOCATOR, new AdaptiveRecvByteBufAllocator().maxMessagesPerRead(2)));
        Channel c = client(s, new ChannelInboundHandlerAdapter());
        long total = 12L * transport.receiveSize;
        for (long sent = 0; sent < total; sent += transport.receiveSize) {
            c.write(c.alloc().directBuffer(transport.receiveSize).writeZero(transport.receiveSize));
        }
        c.flush();
        waitFor("a child", () -> children.size() == 1);
        Channel child = children.iterator().next();
        waitFor("the twelve pieces wait at the child (four of its sixteen receives left posted)", () -> posted(child) == 4);
        child.config().setAutoRead(true); // (twelve pieces wait: they go up two a read)
        waitFor("everything arrived", () -> bytes.get() == total);
        assertThat(most.get()).as("the most pieces one read handed up").isEqualTo(2);
        c.close().sync();
        s.close().sync();
    }

    /** A child with AUTO_READ off that closes while it holds unread chunks (and their receives) gives every buffer back. */
    @Test
    void aChildThatClosesWithUnreadChunksGivesEveryBufferBack() throws Exception {
        Counter serverSide = new Counter();
        Channel s = server(ch -> ch.pipeline().addLast(serverSide), b -> b.childOption(ChannelOption.AUTO_READ, false));
        Counter clientSide = new Counter();
        Channel c = client(s, clientSide);
        int size = 4 * transport.receiveSize;
        for (int k = 0; k < 64; k++) {
            c.write(c.alloc().directBuffer(size).writeZero(size));
        }
        c.flush();
        waitFor("a child", () -> children.size() == 1);
        waitFor("the writer held back", () -> !c.isWritable());
        children.iterator().next().close().sync();
        clientSide.inputEnded.get(30, TimeUnit.SECONDS);
        c.close().sync();
        assertThat(serverSide.bytes.get()).as("nothing read: the child never read").isZero();
        s.close().sync();
        // (the teardown checks that no byte of the pool is held once the loops are gone)
    }

    /**
     * A count of {@code c}'s connection as its description gives it, read on its event loop: {@code credits}
     * (the peer's receives it may still fill) or {@code receives} (its own, posted now).
     */
    private static int count(Channel c, String what) throws Exception {
        return c.eventLoop().submit(() -> {
            Matcher m = Pattern.compile(", " + what + " (\\d+)[,\\]]").matcher(((RegmemSocketChannel) c).connection().toString());
            return m.find() ? Integer.parseInt(m.group(1)) : -1;
        }).get(5, TimeUnit.SECONDS);
    }

    /** {@code c}'s receives posted now ({@link #count}), for a {@link #waitFor}. */
    private static int posted(Channel c) {
        try {
            return count(c, "receives");
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    private static int credits(Channel c) throws Exception {
        return count(c, "credits");
    }

    /**
     * A server child that takes long over a batch of reads (three pieces that waited while AUTO_READ
     * was off, handed up in one batch when it is turned on) gives the credits of the pieces already read
     * back during the batch, once the client ran short: the client holds them while the server's
     * handler is still inside the batch. (Given only after the batch, they would reach the client once
     * the handler returned.)
     */
    @Test
    void aReaderThatTakesLongOverABatchGivesCreditsBackBeforeTheBatchEnds() throws Exception {
        AtomicInteger reads = new AtomicInteger();
        CompletableFuture<Integer> creditsInBatch = new CompletableFuture<>();
        AtomicReference<Channel> client = new AtomicReference<>();
        Channel s = server(ch -> ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
            @Override
            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                ((ByteBuf) msg).release();
                int n = reads.incrementAndGet();
                try {
                    if (n == 1) {
                        Thread.sleep(2); // (the batch goes on longer than Inbound.EARLY_GRANT_NANOS)
                    } else if (n == 2) { // still in the batch: what the client holds, once it holds more than 1 (5 s at most)
                        long deadline = System.nanoTime() + 5_000_000_000L;
                        int held;
                        while ((held = credits(client.get())) < 2 && System.nanoTime() < deadline) {
                            Thread.sleep(1);
                        }
                        creditsInBatch.complete(held);
                    }
                } catch (Exception e) {
                    creditsInBatch.completeExceptionally(e);
                }
            }
        }), b -> b.childOption(ChannelOption.AUTO_READ, false).childOption(ChannelOption.SO_RCVBUF, 4 * transport.receiveSize));
        Channel c = client(s, new ChannelInboundHandlerAdapter());
        client.set(c);
        for (int i = 0; i < 4; i++) { // three use three of the four credits; a fourth waits (the last credit is kept for a grant)
            c.writeAndFlush(c.alloc().directBuffer(100).writeZero(100));
        }
        waitFor("the client ran short", () -> {
            try {
                return credits(c) == 1;
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        waitFor("a child", () -> children.size() == 1);
        Channel child = children.iterator().next();
        waitFor("the three pieces wait at the server (one receive of four left posted)", () -> posted(child) == 1);
        child.config().setAutoRead(true); // (the three go up in one batch)
        assertThat(creditsInBatch.get(30, TimeUnit.SECONDS)).as("credits the client holds while the server is in its batch")
                .isGreaterThanOrEqualTo(2);
        waitFor("all four read", () -> reads.get() == 4);
        c.close().sync();
        s.close().sync();
    }

    /** SO_RCVBUF and SO_SNDBUF report the transport's windows while unset, and what was set once set (which the connection uses). */
    @Test
    void receiveAndSendBufferSizesReportTheWindowsTheConnectionUses() throws Exception {
        Channel s = server(ch -> ch.pipeline().addLast(new Counter()), b -> b.childOption(ChannelOption.SO_RCVBUF, 6 * transport.receiveSize));
        Channel c = client(s, new ChannelInboundHandlerAdapter());
        assertThat(c.config().getOption(ChannelOption.SO_RCVBUF)).isEqualTo(transport.receives * transport.receiveSize);
        assertThat(c.config().getOption(ChannelOption.SO_SNDBUF)).isEqualTo(transport.sends * transport.receiveSize);
        assertThat(((SocketChannel) c).config().getReceiveBufferSize()).isEqualTo(transport.receives * transport.receiveSize);
        waitFor("a child", () -> children.size() == 1);
        Channel child = children.iterator().next();
        assertThat(child.config().getOption(ChannelOption.SO_RCVBUF)).isEqualTo(6 * transport.receiveSize);
        assertThat(child.config().getOption(ChannelOption.SO_SNDBUF)).isEqualTo(transport.sends * transport.receiveSize);
        waitFor("the child's six receives posted", () -> posted(child) == 6);
        assertThat(posted(c)).isEqualTo(transport.receives);
        assertThat(s.config().getOption(ChannelOption.SO_RCVBUF)).isEqualTo(transport.receives * transport.receiveSize);
        c.close().sync();
        s.close().sync();
    }

    /** A listener's SO_RCVBUF is its accepted channels' (as a TCP listener's), unless a childOption sets theirs. */
    @Test
    void aListenersReceiveBufferSizeIsItsChildrensUnlessTheirOwnIsSet() throws Exception {
        java.util.List<Channel> made = new java.util.concurrent.CopyOnWriteArrayList<>();
        Channel s = server(made::add, b -> b.option(ChannelOption.SO_RCVBUF, 5 * transport.receiveSize));
        assertThat(s.config().getOption(ChannelOption.SO_RCVBUF)).isEqualTo(5 * transport.receiveSize);
        Channel c = client(s, new ChannelInboundHandlerAdapter());
        waitFor("a child", () -> made.size() == 1);
        assertThat(made.get(0).config().getOption(ChannelOption.SO_RCVBUF)).isEqualTo(5 * transport.receiveSize);
        waitFor("the child's five receives posted", () -> posted(made.get(0)) == 5);
        Channel s2 = server(made::add, b -> b.option(ChannelOption.SO_RCVBUF, 5 * transport.receiveSize)
                .childOption(ChannelOption.SO_RCVBUF, 3 * transport.receiveSize));
        Channel c2 = client(s2, new ChannelInboundHandlerAdapter());
        waitFor("a second child", () -> made.size() == 2);
        assertThat(made.get(1).config().getOption(ChannelOption.SO_RCVBUF)).isEqualTo(3 * transport.receiveSize);
        waitFor("the second child's three receives posted", () -> posted(made.get(1)) == 3);
        assertThatThrownBy(() -> s2.config().setOption(ChannelOption.SO_RCVBUF, -1)).isInstanceOf(IllegalArgumentException.class);
        c.close().sync();
        s.close().sync();
        c2.close().sync();
        s2.close().sync();
    }

    /**
     * A connected channel deregistered from its loop registers again there and nowhere else (its
     * connection's completions come to that loop's CQ): another loop is refused as incompatible, and the
     * channel goes on echoing on its own. A channel not yet connected registers anywhere.
     */
    @Test
    void aConnectedChannelRegistersAgainOnItsOwnLoopOnly() throws Exception {
        Channel s = echoServer(transport.receives * transport.receiveSize);
        EventLoopGroup two = new MultiThreadIoEventLoopGroup(2, transport.ioHandlerFactory());
        try {
            Counter counter = new Counter();
            Channel c = new Bootstrap().group(two).channel(RegmemSocketChannel.class).handler(counter)
                    .connect(s.localAddress()).sync().channel();
            c.writeAndFlush(c.alloc().directBuffer(100).writeZero(100)).sync();
            waitFor("the first echo", () -> counter.bytes.get() == 100);
            EventLoop own = c.eventLoop();
            EventLoop other = two.next();
            if (other == own) {
                other = two.next(); // (two loops, taken in turn)
            }
            c.deregister().sync();
            assertThat(c.isRegistered()).isFalse();
            ChannelFuture elsewhere = other.register(c).await();
            assertThat(elsewhere.cause()).isInstanceOf(IllegalStateException.class).hasMessageContaining("incompatible");
            own.register(c).sync();
            c.writeAndFlush(c.alloc().directBuffer(100).writeZero(100)).sync();
            waitFor("the echo after registering again", () -> counter.bytes.get() == 200);
            Channel fresh = new RegmemSocketChannel();
            other.register(fresh).sync(); // (no connection yet: any loop of the kind)
            fresh.close().sync();
            c.close().sync();
        } finally {
            two.shutdownGracefully(0, 2, TimeUnit.SECONDS).sync();
        }
        s.close().sync();
    }

    /** Both ends of a connection within one JVM have a local and a remote address: this host, the listener's port. */
    @Test
    void bothEndsWithinOneJvmReportTheirAddresses() throws Exception {
        Channel s = server(ch -> ch.pipeline().addLast(new Counter()), b -> { });
        Channel c = client(s, new ChannelInboundHandlerAdapter());
        waitFor("a child", () -> children.size() == 1);
        Channel child = children.iterator().next();
        InetSocketAddress listening = (InetSocketAddress) s.localAddress();
        assertThat(c.remoteAddress()).isEqualTo(listening);
        assertThat(((InetSocketAddress) c.localAddress()).getAddress()).isEqualTo(listening.getAddress());
        assertThat(child.localAddress()).isEqualTo(listening);
        assertThat(((InetSocketAddress) child.remoteAddress()).getAddress()).isEqualTo(listening.getAddress());
        c.close().sync();
        s.close().sync();
    }

    /** A bind to a port another server holds fails with a BindException, as a TCP channel's, and leaves nothing behind. */
    @Test
    void aBindToAPortInUseFailsWithABindException() throws Exception {
        Channel s = server(ch -> { }, b -> { });
        ChannelFuture second = new ServerBootstrap().group(boss, workers).channel(RegmemServerSocketChannel.class)
                .childHandler(new ChannelInboundHandlerAdapter()).bind(s.localAddress()).await();
        assertThat(second.cause()).isInstanceOf(java.net.BindException.class).hasMessageContaining("EADDRINUSE")
                .hasCauseInstanceOf(RdmaException.class);
        assertThat(second.channel().closeFuture().await(10, TimeUnit.SECONDS)).isTrue();
        Channel c = client(s, new ChannelInboundHandlerAdapter()); // (the first server goes on)
        c.close().sync();
        s.close().sync();
    }

    /**
     * A client channel binds no local address: a bind, or a connect from a given source, fails with
     * UnsupportedOperationException and connects nothing; a connect from the wildcard address with port
     * 0 (what the system picks anyway) connects.
     */
    @Test
    void aClientBindsNoSourceButTheWildcardConnects() throws Exception {
        Channel s = server(ch -> { }, b -> { });
        Bootstrap b = new Bootstrap().group(clients).channel(RegmemSocketChannel.class).handler(new PatternStream.Echo());
        ChannelFuture bound = b.bind(new InetSocketAddress("127.0.0.1", 0)).await();
        assertThat(bound.cause()).isInstanceOf(UnsupportedOperationException.class).hasMessageContaining("binds no local address");
        bound.channel().close().sync();
        for (InetSocketAddress from : new InetSocketAddress[] {new InetSocketAddress("127.0.0.1", 0),
                new InetSocketAddress(40000)}) {
            ChannelFuture f = b.connect(s.localAddress(), from).await();
            assertThat(f.cause()).as("from " + from).isInstanceOf(UnsupportedOperationException.class)
                    .hasMessageContaining("binds no local address");
            assertThat(f.channel().closeFuture().await(10, TimeUnit.SECONDS)).isTrue();
        }
        assertThat(children.size()).isZero(); // (no connection was asked for)
        Channel c = b.connect(s.localAddress(), new InetSocketAddress(0)).sync().channel();
        assertThat(c.isActive()).isTrue();
        c.close().sync();
        s.close().sync();
    }

    /** A channel not yet connected cannot shut its input or output down (NotYetConnectedException, as a TCP channel's). */
    @Test
    void aShutdownBeforeTheConnectionFailsNotYetConnected() throws Exception {
        SocketChannel c = new RegmemSocketChannel();
        clients.next().register(c).sync();
        assertThat(c.shutdownOutput().await().cause()).isInstanceOf(java.nio.channels.NotYetConnectedException.class);
        assertThat(c.shutdownInput().await().cause()).isInstanceOf(java.nio.channels.NotYetConnectedException.class);
        assertThat(c.shutdown().await().cause()).isInstanceOf(java.nio.channels.NotYetConnectedException.class);
        assertThat(c.isOpen()).isTrue();
        c.close().sync();
    }

    /**
     * A connect to a TCP port where something else listens (a peer that writes garbage, an HTTP server,
     * one that says nothing) fails with a ConnectException, or with Netty's ConnectTimeoutException after
     * CONNECT_TIMEOUT_MILLIS, and the channel closes.
     */
    @Test
    void aConnectToAPortOfSomethingElseFailsAndCloses() throws Exception {
        for (String answer : new String[] {"garbage", "http", "nothing"}) {
            try (ServerSocket foreign = new ServerSocket(0, 50, java.net.InetAddress.getLoopbackAddress())) {
                Thread peer = Thread.ofPlatform().daemon().start(() -> {
                    try (java.net.Socket s = foreign.accept()) {
                        byte[] bytes = switch (answer) {
                            case "garbage" -> new byte[] {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
                            case "http" -> "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n".getBytes();
                            default -> new byte[0];
                        };
                        s.getOutputStream().write(bytes);
                        s.getOutputStream().flush();
                        Thread.sleep(answer.equals("nothing") ? 3000 : 100);
                    } catch (IOException | InterruptedException e) {
                        // (the test ended it)
                    }
                });
                ChannelFuture f = new Bootstrap().group(clients).channel(RegmemSocketChannel.class)
                        .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, 1000).handler(new ChannelInboundHandlerAdapter())
                        .connect(new InetSocketAddress("127.0.0.1", foreign.getLocalPort()));
                assertThat(f.await(30, TimeUnit.SECONDS)).isTrue();
                assertThat(f.cause()).as(answer).isInstanceOf(answer.equals("nothing")
                        ? io.netty.channel.ConnectTimeoutException.class : ConnectException.class);
                assertThat(f.channel().closeFuture().await(10, TimeUnit.SECONDS)).isTrue();
                peer.interrupt();
                peer.join(10_000);
            }
        }
    }

    /**
     * As Netty's SocketBufReleaseTest: every buffer written is released once written (a registered one
     * when its SEND completed, or its chunk was read; any other once copied), whatever its kind and size.
     */
    @Test
    void everyBufferWrittenIsReleasedOnceWritten() throws Exception {
        Counter serverSide = new Counter();
        Channel s = server(ch -> ch.pipeline().addLast(serverSide), b -> { });
        Channel c = client(s, new ChannelInboundHandlerAdapter());
        int rs = transport.receiveSize;
        List<ByteBuf> written = new ArrayList<>();
        long total = 0;
        for (int size : new int[] {10, rs, 3 * rs, 1 << 20}) {
            for (ByteBuf b : new ByteBuf[] {c.alloc().directBuffer(size), Unpooled.buffer(size), Unpooled.directBuffer(size)}) {
                b.writeZero(size);
                written.add(b);
                c.write(b);
                total += size;
            }
        }
        c.flush();
        long all = total;
        waitFor("everything read", () -> serverSide.bytes.get() == all);
        waitFor("every buffer written released", () -> written.stream().allMatch(b -> b.refCnt() == 0));
        c.close().sync();
        s.close().sync();
    }

    /**
     * A connect under way can be cancelled, as on epoll and NIO: the cancel succeeds, the channel closes
     * and the attempt is abandoned (the silent listener sees the client hang up at once, not at its 10 s
     * handshake timeout); a connect that timed out fails with Netty's ConnectTimeoutException and is
     * abandoned the same way.
     */
    @Test
    void aConnectUnderWayCanBeCancelledAndIsAbandoned() throws Exception {
        try (ServerSocket silent = new ServerSocket(0, 50, java.net.InetAddress.getLoopbackAddress())) {
            List<CompletableFuture<Void>> hungUp = List.of(new CompletableFuture<>(), new CompletableFuture<>());
            CompletableFuture<Void> accepted = new CompletableFuture<>();
            Thread peer = Thread.ofPlatform().daemon().start(() -> {
                for (CompletableFuture<Void> end : hungUp) {
                    try (java.net.Socket s = silent.accept()) { // (it says nothing, and sees when the client hangs up)
                        accepted.complete(null);
                        while (s.getInputStream().read() >= 0) {
                            // (nothing comes before the challenge the client waits for)
                        }
                        end.complete(null);
                    } catch (IOException e) {
                        end.completeExceptionally(e);
                    }
                }
            });
            InetSocketAddress to = new InetSocketAddress("127.0.0.1", silent.getLocalPort());
            ChannelFuture f = new Bootstrap().group(clients).channel(RegmemSocketChannel.class)
                    .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, 30_000).handler(new ChannelInboundHandlerAdapter()).connect(to);
            accepted.get(30, TimeUnit.SECONDS); // (the attempt is under way: its handshake waits for the listener)
            assertThat(f.cancel(false)).as("a connect under way cancels").isTrue();
            assertThat(f.channel().closeFuture().await(10, TimeUnit.SECONDS)).isTrue();
            // (abandoned: the client hangs up now, not at its 10 s handshake timeout or its 30 s connect timeout)
            hungUp.get(0).get(5, TimeUnit.SECONDS);
            ChannelFuture timedOut = new Bootstrap().group(clients).channel(RegmemSocketChannel.class)
                    .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, 200).handler(new ChannelInboundHandlerAdapter()).connect(to);
            assertThat(timedOut.await(10, TimeUnit.SECONDS)).isTrue();
            assertThat(timedOut.cause()).isInstanceOf(io.netty.channel.ConnectTimeoutException.class);
            assertThat(timedOut.channel().closeFuture().await(10, TimeUnit.SECONDS)).isTrue();
            hungUp.get(1).get(5, TimeUnit.SECONDS);
            peer.join(10_000);
        }
    }

    @Test
    void aConnectToAPortWhereNobodyListensIsRefused() throws Exception {
        int port;
        try (ServerSocket free = new ServerSocket(0)) {
            port = free.getLocalPort();
        }
        assertThatThrownBy(() -> new Bootstrap().group(clients).channel(RegmemSocketChannel.class)
                .handler(new ChannelInboundHandlerAdapter()).connect(new InetSocketAddress("127.0.0.1", port)).sync())
                .isInstanceOf(ConnectException.class);
    }

    @Test
    void aCloseAfterAWriteDeliversWhatWasSentAndTheServerSeesTheEnd() throws Exception {
        Counter serverSide = new Counter();
        Channel s = server(ch -> ch.pipeline().addLast(serverSide), b -> { });
        Channel c = client(s, new ChannelInboundHandlerAdapter());
        c.writeAndFlush(c.alloc().directBuffer(65536).writeZero(65536)); // within the credits: sent at the flush
        c.close().sync();
        serverSide.inputEnded.get(30, TimeUnit.SECONDS);
        assertThat(serverSide.bytes.get()).as("a write sent before the close arrives").isEqualTo(65536);
        Counter second = new Counter();
        Channel s2 = server(ch -> ch.pipeline().addLast(second), b -> { });
        Channel c2 = client(s2, new ChannelInboundHandlerAdapter());
        c2.writeAndFlush(c2.alloc().directBuffer(3 << 20).writeZero(3 << 20)).addListener(ChannelFutureListener.CLOSE);
        second.inputEnded.get(30, TimeUnit.SECONDS);
        assertThat(second.bytes.get()).as("closed once the write was sent: all of it").isEqualTo(3 << 20);
        c2.closeFuture().sync();
        s.close().sync();
        s2.close().sync();
    }

    /**
     * A read that throws in the application's own code outside its handlers (here its
     * RecvByteBufAllocator's handle) reaches the pipeline as that exception and closes the channel, as
     * on epoll; the piece it was handing up goes back to the pool, and the loop goes on serving others.
     */
    @Test
    void aReadThatThrowsInTheApplicationsRecvAllocatorClosesTheChannelWithItsException() throws Exception {
        RecvByteBufAllocator throwing = new RecvByteBufAllocator() {
            @Override
            public Handle newHandle() {
                return new DelegatingHandle(new AdaptiveRecvByteBufAllocator().newHandle()) {
                    @Override
                    public void lastBytesRead(int bytes) {
                        throw new IllegalStateException("the application's allocator failed");
                    }
                };
            }
        };
        AtomicReference<CompletableFuture<Throwable>> caught = new AtomicReference<>();
        Channel s = server(ch -> ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
            @Override
            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                ((ByteBuf) msg).release();
            }

            @Override
            public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                caught.get().complete(cause);
            }
        }), b -> b.childOption(ChannelOption.RCVBUF_ALLOCATOR, throwing));
        for (int size : new int[] {64, 100_000}) { // (a piece copied out of its receive, and one handed up in it)
            caught.set(new CompletableFuture<>());
            Channel c = client(s, new ChannelInboundHandlerAdapter());
            c.writeAndFlush(c.alloc().directBuffer(size).writeZero(size));
            assertThat(c.closeFuture().await(30, TimeUnit.SECONDS)).as("the client sees the child close").isTrue();
            assertThat(caught.get().get(30, TimeUnit.SECONDS)).isInstanceOf(IllegalStateException.class)
                    .hasMessage("the application's allocator failed");
        }
        Channel echo = echoServer(transport.receives * transport.receiveSize); // (the loops serve on)
        PatternStream.Checker checker = new PatternStream.Checker();
        Channel c = client(echo, checker);
        c.writeAndFlush(patterned(c, 0, 1000));
        waitFor("the echo", () -> checker.read.get() == 1000);
        c.close().sync();
        echo.close().sync();
        s.close().sync();
    }

    /**
     * A close with chunks outstanding both ways does not wait out its linger: the server's child writes
     * a mebibyte (a chunk) and closes while its client's loop is held; then the client writes one and
     * closes before it has seen either. Each side answers the chunk it will not read, so with SO_LINGER
     * at 60 s on both, both connections are gone, and every buffer back in the pool, long before.
     */
    @Test
    void aCloseWithChunksOutstandingBothWaysDoesNotWaitOutItsLinger() throws Exception {
        Channel s = server(ch -> { }, b -> b.childOption(ChannelOption.SO_LINGER, 60));
        Channel c = new Bootstrap().group(clients).channel(RegmemSocketChannel.class).option(ChannelOption.SO_LINGER, 60)
                .handler(new ChannelInboundHandlerAdapter()).connect(s.localAddress()).sync().channel();
        assertThat(c.config().getOption(ChannelOption.SO_LINGER)).isEqualTo(60);
        waitFor("a child", () -> children.size() == 1);
        Channel child = children.iterator().next();
        CountDownLatch childClosed = new CountDownLatch(1);
        c.eventLoop().execute(() -> { // (the client's loop sees nothing of the child's chunk or end until it closed too)
            try {
                childClosed.await(30, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            c.writeAndFlush(c.alloc().directBuffer(1 << 20).writeZero(1 << 20));
            c.close();
        });
        child.writeAndFlush(child.alloc().directBuffer(1 << 20).writeZero(1 << 20));
        child.close().sync();
        childClosed.countDown();
        assertThat(c.closeFuture().await(30, TimeUnit.SECONDS)).isTrue();
        waitFor("both connections gone and their buffers back, well within the 60 s linger",
                () -> transport.allocator().metric().usedDirectMemory() == 0);
        s.close().sync();
    }

    /**
     * SO_LINGER 0 closes at once, without the end of stream (a reset): a peer that allows half closure
     * sees its channel go inactive without first seeing its input end, as a TCP peer reset. The default
     * sends the end first.
     */
    @Test
    void soLingerZeroDisconnectsWithoutTheEndOfStream() throws Exception {
        for (int linger : new int[] {0, -1}) {
            AtomicLong read = new AtomicLong();
            java.util.List<String> events = new java.util.concurrent.CopyOnWriteArrayList<>();
            CompletableFuture<Void> inactive = new CompletableFuture<>();
            Channel s = server(ch -> ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                @Override
                public void channelRead(ChannelHandlerContext ctx, Object msg) {
                    read.addAndGet(((ByteBuf) msg).readableBytes());
                    ((ByteBuf) msg).release();
                }

                @Override
                public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
                    if (evt == ChannelInputShutdownEvent.INSTANCE) {
                        events.add("end");
                        ctx.close(); // (a half-closed child that hears the end closes; one reset hears no end)
                    }
                }

                @Override
                public void channelInactive(ChannelHandlerContext ctx) {
                    events.add("inactive");
                    inactive.complete(null);
                }
            }), b -> b.childOption(ChannelOption.ALLOW_HALF_CLOSURE, true));
            Channel c = new Bootstrap().group(clients).channel(RegmemSocketChannel.class).option(ChannelOption.SO_LINGER, linger)
                    .handler(new ChannelInboundHandlerAdapter()).connect(s.localAddress()).sync().channel();
            c.writeAndFlush(c.alloc().directBuffer(100).writeZero(100)).sync();
            waitFor("the bytes read", () -> read.get() == 100);
            c.close().sync();
            inactive.get(30, TimeUnit.SECONDS);
            assertThat(events).as("SO_LINGER " + linger).containsExactlyElementsOf(linger == 0 ? java.util.List.of("inactive")
                    : java.util.List.of("end", "inactive"));
            s.close().sync();
        }
        assertThatThrownBy(() -> new RegmemSocketChannel().config().setSoLinger(-2)).isInstanceOf(IllegalArgumentException.class);
    }

    /**
     * A client that writes and is gone before the server's accept of it finished (the server's event
     * loop was busy meanwhile): the server's child still turns active, reads the bytes, sees the end,
     * as on TCP. (Repeated: the loss it guards against came in about half the runs.)
     */
    @RepeatedTest(20)
    void aClientThatWritesAndGoesBeforeItsAcceptFinishedIsStillRead() throws Exception {
        CountDownLatch busy = new CountDownLatch(1);
        Counter serverSide = new Counter();
        Channel s = server(ch -> {
            try { // (the child's loop is held here, after its accept began, until the client is gone)
                busy.await(20, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            ch.pipeline().addLast(serverSide);
        }, b -> { });
        EventLoopGroup own = new MultiThreadIoEventLoopGroup(1, transport.ioHandlerFactory());
        try {
            Channel c = new Bootstrap().group(own).channel(RegmemSocketChannel.class).handler(new ChannelInboundHandlerAdapter())
                    .connect(s.localAddress()).sync().channel();
            c.writeAndFlush(c.alloc().directBuffer(64).writeZero(64)).sync(); // (posted: the lane holds it)
            own.shutdownGracefully(0, 2, TimeUnit.SECONDS).sync(); // (its connection is cut: the loop is gone)
        } finally {
            busy.countDown();
        }
        serverSide.inputEnded.get(20, TimeUnit.SECONDS);
        assertThat(serverSide.bytes.get()).as("what the client wrote before it went").isEqualTo(64);
        waitFor("the child closed", children::isEmpty);
        s.close().sync();
    }

    /** The shm lanes' memfd mappings of this process. */
    private static long laneMappings() {
        try (var lines = Files.lines(Path.of("/proc/self/maps"))) {
            return lines.filter(l -> l.contains("memfd:regmem-shm")).count();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @Test
    void aThousandConnectsAndClosesLeaveNoChannelThreadMappingOrFileBehind() throws Exception {
        Channel s = server(ch -> ch.pipeline().addLast(new ChannelInboundHandlerAdapter()), b -> { });
        int threads = Thread.activeCount();
        long lanes = laneMappings();
        int files = Objects.requireNonNull(new File("/proc/self/fd").list()).length;
        for (int i = 0; i < 1000; i++) {
            Channel c = client(s, new ChannelInboundHandlerAdapter());
            if (i == 0) {
                assertThat(laneMappings()).as("a connection's lane is mapped while it is up").isGreaterThan(lanes);
            }
            c.writeAndFlush(Unpooled.wrappedBuffer(new byte[] {(byte) i}));
            c.close().sync();
        }
        waitFor("every child closed", children::isEmpty);
        waitFor("every connection's lane unmapped", () -> laneMappings() <= lanes);
        assertThat(Thread.activeCount()).as("platform threads").isLessThanOrEqualTo(threads + 2);
        assertThat(Objects.requireNonNull(new File("/proc/self/fd").list()).length).as("open files").isLessThanOrEqualTo(files + 8);
        s.close().sync();
    }

    /**
     * A transport refuses to close while event loops made on it run (and stays usable), closes once
     * their group is shut down, closes only once; a group made on a closed transport fails.
     */
    @Test
    void aTransportClosesOnlyOnceItsEventLoopsAreGone() throws Exception {
        RegmemTransport t = RegmemTransport.builder(loops.dev).build();
        EventLoopGroup g = new MultiThreadIoEventLoopGroup(2, t.ioHandlerFactory());
        assertThatThrownBy(t::close).isInstanceOfSatisfying(RdmaException.class, e -> assertThat(e.errno()).isEqualTo(Errno.EBUSY))
                .hasMessageContaining("2 event loop(s)");
        ByteBuf b = t.allocator().directBuffer(64).writeLong(42);
        assertThat(b.readLong()).as("the transport's pool still serves").isEqualTo(42);
        b.release();
        g.shutdownGracefully(0, 2, TimeUnit.SECONDS).sync();
        t.close();
        t.close();
        assertThat(t.pd().isDestroyed()).isTrue();
        assertThatThrownBy(() -> new MultiThreadIoEventLoopGroup(1, t.ioHandlerFactory())).rootCause()
                .isInstanceOfSatisfying(RdmaException.class, e -> assertThat(e.errno()).isEqualTo(Errno.EBADF));
    }

    @Test
    void aStreamUnderTheParanoidLeakDetectorReportsNoLeak() throws Exception {
        ResourceLeakDetector.Level before = ResourceLeakDetector.getLevel();
        ResourceLeakDetector.setLevel(ResourceLeakDetector.Level.PARANOID);
        LeakRecorder leaks = LeakRecorder.install();
        try {
            Channel s = server(ch -> ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                @Override
                public void channelRead(ChannelHandlerContext ctx, Object msg) {
                    ctx.writeAndFlush(msg);
                }
            }), b -> { });
            Counter back = new Counter();
            Channel c = client(s, back);
            long total = 0;
            for (int size = 1; size <= 1 << 20; size *= 4) {
                c.write(c.alloc().directBuffer(size).writeZero(size));
                c.write(Unpooled.buffer(size).writeZero(size));
                total += 2L * size;
            }
            c.flush();
            long want = total;
            waitFor("the echo", () -> back.bytes.get() == want);
            c.close().sync();
            s.close().sync();
            leaks.drive(transport.allocator());
            assertThat(leaks.reports()).isEmpty();
        } finally {
            leaks.uninstall();
            ResourceLeakDetector.setLevel(before);
        }
    }

    /**
     * An event loop that polls without end ({@code busyPollNanos = Long.MAX_VALUE}, so it stays in the
     * handler's run while connections are open) still runs what other threads hand it (writes, tasks)
     * and the tasks scheduled on it, from another thread or from itself, and shuts down when asked.
     */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aLoopThatNeverStopsPollingStillRunsTasksFromOtherThreadsAndScheduledOnes() throws Exception {
        RegmemTransport t = RegmemTransport.builder(loops.dev).busyPollNanos(Long.MAX_VALUE).build();
        EventLoopGroup g = new MultiThreadIoEventLoopGroup(1, t.ioHandlerFactory());
        try {
            Channel s = new ServerBootstrap().group(g).channel(RegmemServerSocketChannel.class)
                    .childHandler(new ChannelInboundHandlerAdapter() {
                        @Override
                        public void channelRead(ChannelHandlerContext ctx, Object msg) {
                            ctx.writeAndFlush(msg);
                        }
                    }).bind(new InetSocketAddress("127.0.0.1", 0)).sync().channel();
            Counter back = new Counter();
            Channel c = new Bootstrap().group(g).channel(RegmemSocketChannel.class).handler(back).connect(s.localAddress())
                    .sync().channel();
            EventLoop loop = c.eventLoop();
            for (int i = 0; i < 200; i++) {
                c.writeAndFlush(c.alloc().directBuffer(8).writeLong(i)); // (from this thread: a task for the loop)
                int n = i;
                assertThat(loop.submit(() -> n).get(10, TimeUnit.SECONDS)).isEqualTo(i);
                if (i % 20 == 0) {
                    assertThat(loop.schedule(() -> n, 1, TimeUnit.MILLISECONDS).get(10, TimeUnit.SECONDS)).isEqualTo(i);
                    CountDownLatch fired = new CountDownLatch(1);
                    loop.execute(() -> loop.schedule(fired::countDown, 1, TimeUnit.MILLISECONDS)); // (scheduled by the loop)
                    assertThat(fired.await(10, TimeUnit.SECONDS)).as("a task the loop scheduled itself ran").isTrue();
                }
            }
            waitFor("the echo", () -> back.bytes.get() == 200 * 8);
            c.close().sync();
            s.close().sync();
        } finally {
            assertThat(g.shutdownGracefully(0, 2, TimeUnit.SECONDS).await(10, TimeUnit.SECONDS)).as("the loop shut down").isTrue();
            t.close();
        }
    }

    /**
     * Small pieces, one to eight at a time, go back and forth at the smallest receive windows (2 to 4
     * receives on each side): the receives of copied pieces, posted again after a reply when the peer
     * has credits to spare and before it when not, never leave either side without credits.
     */
    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void smallPiecesGoBackAndForthAtTheSmallestReceiveWindows() throws Exception {
        for (int receives = 2; receives <= 4; receives++) {
            int window = receives * transport.receiveSize;
            Channel s = echoServer(window);
            Counter back = new Counter();
            Channel c = new Bootstrap().group(clients).channel(RegmemSocketChannel.class).option(ChannelOption.SO_RCVBUF, window)
                    .handler(back).connect(s.localAddress()).sync().channel();
            long total = 0;
            for (int round = 0; round < 300; round++) {
                for (int k = 0; k <= round % 8; k++) {
                    c.write(c.alloc().directBuffer(64).writeLong(round).writeZero(56));
                    total += 64;
                }
                c.flush();
                long want = total;
                waitFor("round " + round + " at " + receives + " receives", () -> back.bytes.get() == want);
            }
            c.close().sync();
            s.close().sync();
        }
    }

    /**
     * Pieces larger than a receive (read chunks, whose descriptors keep a receive until the chunk goes
     * up) go back and forth at the smallest receive windows (2 to 4 receives on each side), one to four
     * at a time, byte-checked: the receives the chunks hold never leave either side without credits.
     */
    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void chunksGoBackAndForthAtTheSmallestReceiveWindows() throws Exception {
        int size = 2 * transport.receiveSize + 100;
        for (int receives = 2; receives <= 4; receives++) {
            int window = receives * transport.receiveSize;
            Channel s = echoServer(window);
            PatternStream.Checker back = new PatternStream.Checker();
            Channel c = new Bootstrap().group(clients).channel(RegmemSocketChannel.class).option(ChannelOption.SO_RCVBUF, window)
                    .handler(back).connect(s.localAddress()).sync().channel();
            long total = 0;
            for (int round = 0; round < 12; round++) {
                for (int k = 0; k <= round % 4; k++) {
                    c.write(patterned(c, total, size));
                    total += size;
                }
                c.flush();
                long want = total;
                waitFor("round " + round + " at " + receives + " receives", () -> back.read.get() == want);
            }
            assertThat(back.wrong.get()).isNull();
            c.close().sync();
            s.close().sync();
        }
    }

    /**
     * shutdownInput drops what a child holds (pieces and read chunks, AUTO_READ off) and what arrives
     * after it, posting every receive again: the writer goes on to the end, nothing reaches the pipeline,
     * and nothing of the pool stays held (the teardown checks).
     */
    @Test
    void shutdownInputDropsWhatWaitsAndWhatComesAndGivesTheReceivesBack() throws Exception {
        Counter serverSide = new Counter();
        Channel s = server(ch -> ch.pipeline().addLast(serverSide), b -> b.childOption(ChannelOption.AUTO_READ, false));
        Channel c = client(s, new ChannelInboundHandlerAdapter());
        for (int k = 0; k < 6; k++) {
            c.write(c.alloc().directBuffer(transport.receiveSize).writeZero(transport.receiveSize));
            c.write(c.alloc().directBuffer(3 * transport.receiveSize).writeZero(3 * transport.receiveSize));
        }
        c.flush();
        waitFor("a child", () -> children.size() == 1);
        SocketChannel child = (SocketChannel) children.iterator().next();
        waitFor("pieces and chunks wait at the child", () -> posted(child) <= 6);
        child.shutdownInput().sync();
        assertThat(child.isInputShutdown()).isTrue();
        waitFor("every receive posted again", () -> posted(child) == transport.receives);
        ChannelFuture last = null;
        for (int k = 0; k < 64; k++) {
            last = c.writeAndFlush(c.alloc().directBuffer(2 * transport.receiveSize).writeZero(2 * transport.receiveSize));
        }
        assertThat(last.await(30, TimeUnit.SECONDS)).as("the writer went on to the end").isTrue();
        assertThat(last.isSuccess()).isTrue();
        assertThat(serverSide.bytes.get()).as("nothing reached the pipeline").isZero();
        c.close().sync();
        s.close().sync();
    }

    /**
     * An event loop's CQ holds its connections' receives and sends: a connect that would not fit is
     * refused with ENOSPC (the channel closes, nothing is left behind), and a connection that closed
     * makes room again (once its completions were taken).
     */
    @Test
    void aConnectionThatDoesNotFitItsLoopsCqIsRefusedAndOneThatClosedMakesRoom() throws Exception {
        Channel s = server(ch -> { }, b -> { });
        RegmemTransport small = RegmemTransport.builder(loops.dev).cqEntries(1024).build();
        EventLoopGroup g = new MultiThreadIoEventLoopGroup(1, small.ioHandlerFactory());
        List<Channel> open = new ArrayList<>();
        try {
            Bootstrap b = new Bootstrap().group(g).channel(RegmemSocketChannel.class).handler(new ChannelInitializer<SocketChannel>() {
                @Override
                protected void initChannel(SocketChannel ch) {
                    // (nothing: the channels only connect)
                }
            });
            int fit = 1024 / (small.receives + small.sends);
            for (int k = 0; k < fit; k++) {
                open.add(b.connect(s.localAddress()).sync().channel());
            }
            ChannelFuture refused = b.connect(s.localAddress()).await();
            assertThat(refused.cause()).isInstanceOf(RdmaException.class).hasMessageContaining("CQ");
            assertThat(((RdmaException) refused.cause()).errno()).isEqualTo(Errno.ENOSPC);
            assertThat(refused.channel().closeFuture().await(10, TimeUnit.SECONDS)).isTrue();
            open.remove(0).close().sync();
            waitFor("room again", () -> {
                ChannelFuture f = b.connect(s.localAddress()).awaitUninterruptibly();
                if (f.isSuccess()) {
                    open.add(f.channel());
                }
                return f.isSuccess();
            });
        } finally {
            for (Channel c : open) {
                c.close().sync();
            }
            g.shutdownGracefully(0, 2, TimeUnit.SECONDS).sync();
            small.close();
        }
        s.close().sync();
    }
}
