package io.regmem.netty;

import static org.assertj.core.api.Assertions.assertThat;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.CompositeByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.testkit.NoLeaks;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Every shape of {@code ByteBuf} a Netty application writes arrives whole and in order, at sizes from
 * one byte to beyond a receive and a chunk: composites of 40 components (registered, heap and both:
 * more than a SEND gathers), a slice, a read-only view and a duplicate of a registered buffer, a
 * registered buffer of another transport's allocator (another device: its keys mean nothing here), an
 * unpooled direct buffer and a heap one. Each writer's pool holds nothing at the end.
 */
@ExtendWith(NoLeaks.class)
class RegmemChannelBufferShapesTest {
    private Loops loops;
    private RdmaDevice other;
    private RegmemTransport transport;
    private RegmemTransport otherTransport;
    private EventLoopGroup boss;
    private EventLoopGroup workers;
    private EventLoopGroup clients;

    @BeforeEach
    void setUp() {
        loops = new Loops();
        transport = loops.transport;
        boss = loops.boss;
        workers = loops.workers;
        clients = loops.clients;
        other = RdmaDevice.open("shm");
        otherTransport = RegmemTransport.builder(other).build();
    }

    @AfterEach
    void tearDown() throws Exception {
        long otherHeld = otherTransport.allocator().metric().usedDirectMemory();
        try {
            loops.close();
        } finally {
            otherTransport.close();
            other.close();
        }
        assertThat(otherHeld).isZero();
    }

    @Test
    void everyShapeOfBufferArrivesWholeAndInOrder() throws Exception {
        PatternStream.Checker checker = new PatternStream.Checker();
        Channel s = new ServerBootstrap().group(boss, workers).channel(RegmemServerSocketChannel.class)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        ch.pipeline().addLast(checker);
                    }
                }).bind(new InetSocketAddress("127.0.0.1", 0)).sync().channel();
        Channel c = new Bootstrap().group(clients).channel(RegmemSocketChannel.class).handler(new ChannelInboundHandlerAdapter())
                .connect(s.localAddress()).sync().channel();
        long at = 0;
        int rs = transport.receiveSize;
        List<ByteBuf> written = new ArrayList<>();
        int[] sizes = {1, 7, 100, rs - 1, rs, rs + 1, 3 * rs + 5, 1 << 20};
        for (int size : sizes) {
            // a composite of many registered components, of heap ones, and of both
            CompositeByteBuf comp = c.alloc().compositeDirectBuffer(64);
            for (int k = 0; k < 40; k++) {
                int n = Math.max(1, size / 40);
                comp.addComponent(true, PatternStream.fill(k % 2 == 0 ? c.alloc().directBuffer(n) : Unpooled.buffer(n), at, n));
                at += n;
            }
            c.write(comp);
            // a slice of a registered buffer, a read-only view, a duplicate
            ByteBuf big = c.alloc().directBuffer(size + 20);
            big.writeZero(10);
            PatternStream.fill(big, at, size);
            big.writeZero(10);
            c.write(big.retainedSlice(10, size));
            at += size;
            big.release();
            ByteBuf ro = PatternStream.fill(c.alloc().directBuffer(size), at, size);
            c.write(ro.asReadOnly());
            at += size;
            ByteBuf dup = PatternStream.fill(c.alloc().directBuffer(size), at, size);
            c.write(dup.duplicate());
            at += size;
            // a registered buffer of another transport's allocator (another device), and a heap one
            c.write(PatternStream.fill(otherTransport.allocator().directBuffer(size), at, size));
            at += size;
            c.write(PatternStream.fill(Unpooled.directBuffer(size), at, size));
            at += size;
            c.write(PatternStream.fill(Unpooled.buffer(size), at, size));
            at += size;
            c.flush();
        }
        long total = at;
        long deadline = System.nanoTime() + 60_000_000_000L;
        while (checker.read.get() < total && System.nanoTime() < deadline) {
            Thread.sleep(1);
        }
        assertThat(checker.wrong.get()).isNull();
        assertThat(checker.read.get()).isEqualTo(total);
        c.close().sync();
        s.close().sync();
    }
}
