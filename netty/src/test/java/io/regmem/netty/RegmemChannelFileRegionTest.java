package io.regmem.netty;

import static org.assertj.core.api.Assertions.assertThat;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.ChannelProgressiveFuture;
import io.netty.channel.ChannelProgressiveFutureListener;
import io.netty.channel.ChannelProgressivePromise;
import io.netty.channel.DefaultFileRegion;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.FileRegion;
import io.netty.channel.socket.SocketChannel;
import io.netty.util.AbstractReferenceCounted;
import io.regmem.registration.testkit.NoLeaks;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.net.InetSocketAddress;
import java.nio.channels.WritableByteChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;

/**
 * A {@link FileRegion} written to a channel arrives whole and in its place in the stream, as Netty's
 * own {@code SocketFileRegionTest} asks of every transport: a {@link DefaultFileRegion} of a file (at
 * an offset, and sizes from none through a receive's to several chunks), one of another
 * {@code FileRegion} class, with auto-read off, with a void promise, one that gives no bytes at first,
 * and one longer than its file, whose write fails with an {@link IOException}. Every region is
 * released once written, and the pools hold nothing at the end.
 */
@ExtendWith(NoLeaks.class)
class RegmemChannelFileRegionTest {
    /** Bytes of the file before the stream's part of it (a region starts at an offset). */
    private static final int LEAD = 1000;
    @TempDir
    Path dir;
    private Loops loops;
    private RegmemTransport transport;
    private EventLoopGroup boss;
    private EventLoopGroup workers;
    private EventLoopGroup clients;
    private PatternStream.Checker checker;
    private Channel server;
    private Channel client;

    @BeforeEach
    void setUp() throws Exception {
        loops = new Loops();
        transport = loops.transport;
        boss = loops.boss;
        workers = loops.workers;
        clients = loops.clients;
        checker = new PatternStream.Checker();
    }

    private void connect(boolean autoRead) throws Exception {
        server = new ServerBootstrap().group(boss, workers).channel(RegmemServerSocketChannel.class)
                .childOption(ChannelOption.AUTO_READ, autoRead)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        ch.pipeline().addLast(checker);
                        if (!autoRead) {
                            ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                                @Override
                                public void channelActive(io.netty.channel.ChannelHandlerContext ctx) {
                                    ctx.read();
                                }

                                @Override
                                public void channelReadComplete(io.netty.channel.ChannelHandlerContext ctx) {
                                    ctx.read();
                                }
                            });
                        }
                    }
                }).bind(new InetSocketAddress("127.0.0.1", 0)).sync().channel();
        client = new Bootstrap().group(clients).channel(RegmemSocketChannel.class).handler(new ChannelInboundHandlerAdapter())
                .connect(server.localAddress()).sync().channel();
    }

    @AfterEach
    void tearDown() throws Exception {
        if (client != null) {
            client.close().sync();
        }
        if (server != null) {
            server.close().sync();
        }
        loops.close();
    }

    /** A file of {@link #LEAD} bytes of 0x55, then bytes {@code from} to {@code from + size} of the stream, then 64 more of 0x55. */
    private Path file(long from, int size) throws IOException {
        byte[] b = new byte[LEAD + size + 64];
        java.util.Arrays.fill(b, (byte) 0x55);
        for (int k = 0; k < size; k++) {
            b[LEAD + k] = (byte) ((from + k) % 251);
        }
        Path f = Files.createTempFile(dir, "region", ".bin");
        Files.write(f, b);
        return f;
    }

    private DefaultFileRegion region(long from, int size) throws IOException {
        return new DefaultFileRegion(new RandomAccessFile(file(from, size).toFile(), "r").getChannel(), LEAD, size);
    }

    private void awaitRead(long total) throws InterruptedException {
        long deadline = System.nanoTime() + 60_000_000_000L;
        while (checker.read.get() < total && System.nanoTime() < deadline) {
            Thread.sleep(1);
        }
        assertThat(checker.wrong.get()).isNull();
        assertThat(checker.read.get()).isEqualTo(total);
    }

    @Test
    void defaultFileRegionsOfEverySizeArriveInTheirPlaceWithProgress() throws Exception {
        connect(true);
        int rs = transport.receiveSize;
        int[] sizes = {0, 1, 100, rs - 1, rs, rs + 1, 3 * rs + 5, 1 << 20, (3 << 20) + 17};
        long at = 0;
        List<DefaultFileRegion> regions = new ArrayList<>();
        List<ChannelFuture> writes = new ArrayList<>();
        AtomicLong reported = new AtomicLong();
        for (int size : sizes) {
            client.write(PatternStream.fill(client.alloc().directBuffer(10), at, 10)); // (a buffer before each region)
            at += 10;
            DefaultFileRegion r = region(at, size);
            regions.add(r);
            ChannelProgressivePromise p = client.newProgressivePromise();
            p.addListener(new ChannelProgressiveFutureListener() {
                @Override
                public void operationProgressed(ChannelProgressiveFuture future, long progress, long total) {
                    reported.accumulateAndGet(progress, Math::max);
                }

                @Override
                public void operationComplete(ChannelProgressiveFuture future) {
                }
            });
            writes.add(client.write(r, p));
            at += size;
        }
        client.flush();
        awaitRead(at);
        for (ChannelFuture f : writes) {
            assertThat(f.await(10, TimeUnit.SECONDS)).isTrue();
            assertThat(f.cause()).isNull();
        }
        for (DefaultFileRegion r : regions) {
            assertThat(r.refCnt()).isZero(); // (released once written: its file closed)
            assertThat(r.transferred()).isEqualTo(r.count());
        }
        assertThat(reported.get()).isEqualTo(sizes[sizes.length - 1]);
    }

    @Test
    void aFileRegionOfItsOwnClassWithAutoReadOffAndAVoidPromise() throws Exception {
        connect(false);
        int size = (2 << 20) + 333;
        DefaultFileRegion inner = region(0, size);
        Wrapped r = new Wrapped(inner, 3);
        client.writeAndFlush(r, client.voidPromise());
        awaitRead(size);
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (r.refCnt() > 0 && System.nanoTime() < deadline) {
            Thread.sleep(1);
        }
        assertThat(r.refCnt()).isZero();
        assertThat(inner.refCnt()).isZero();
        assertThat(r.empty).isEqualTo(3); // (it gave nothing three times: the channel tried again)
    }

    @Test
    void aRegionLongerThanItsFileFailsItsWriteAndClosesTheChannel() throws Exception {
        connect(true);
        client.writeAndFlush(PatternStream.fill(client.alloc().directBuffer(10), 0, 10)).sync();
        Path f = Files.createTempFile(dir, "short", ".bin");
        Files.write(f, PatternStream.fill(io.netty.buffer.Unpooled.buffer(5000), 10, 5000).array());
        DefaultFileRegion r = new DefaultFileRegion(new RandomAccessFile(f.toFile(), "r").getChannel(), 0, 1 << 20);
        ChannelFuture w = client.writeAndFlush(r);
        assertThat(w.await(10, TimeUnit.SECONDS)).isTrue();
        assertThat(w.cause()).isInstanceOf(IOException.class);
        assertThat(client.closeFuture().await(10, TimeUnit.SECONDS)).isTrue();
        assertThat(r.refCnt()).isZero();
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (checker.read.get() < 5010 && System.nanoTime() < deadline) {
            Thread.sleep(1);
        }
        assertThat(checker.wrong.get()).isNull(); // (what the file had went before the write failed)
        assertThat(checker.read.get()).isEqualTo(5010);
    }

    /** A {@code FileRegion} of another class (Netty's test wraps a {@link DefaultFileRegion} too), whose first transfers give nothing. */
    private static final class Wrapped extends AbstractReferenceCounted implements FileRegion {
        private final DefaultFileRegion inner;
        private int emptyLeft;
        int empty;

        Wrapped(DefaultFileRegion inner, int emptyFirst) {
            this.inner = inner;
            this.emptyLeft = emptyFirst;
        }

        @Override
        public long position() {
            return inner.position();
        }

        @Override
        @Deprecated
        public long transfered() {
            return inner.transferred();
        }

        @Override
        public long transferred() {
            return inner.transferred();
        }

        @Override
        public long count() {
            return inner.count();
        }

        @Override
        public long transferTo(WritableByteChannel target, long position) throws IOException {
            if (emptyLeft > 0) {
                emptyLeft--;
                empty++;
                return 0;
            }
            return inner.transferTo(target, position);
        }

        @Override
        public FileRegion retain() {
            super.retain();
            return this;
        }

        @Override
        public FileRegion retain(int increment) {
            super.retain(increment);
            return this;
        }

        @Override
        public FileRegion touch() {
            return this;
        }

        @Override
        public FileRegion touch(Object hint) {
            return this;
        }

        @Override
        protected void deallocate() {
            inner.release();
        }
    }
}
