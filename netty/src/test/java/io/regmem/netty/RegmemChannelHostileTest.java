package io.regmem.netty;

import static org.assertj.core.api.Assertions.assertThat;

import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.Access;
import io.regmem.registration.CmId;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.Opcode;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import io.regmem.registration.testkit.NoLeaks;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A peer that holds the secret but does not speak the transport's protocol, against a server channel:
 * raw verbs on its own QP, sending what no regmem channel sends (a connection without the transport's
 * offer, a chunk descriptor with absurd fields or of memory it does not give, an acknowledgement of a chunk never sent, a grant of
 * more credits than it has receives). Each time the server's child channel hears an
 * {@code IOException} and closes, the server goes on serving, and nothing is left behind (no buffer of
 * the transport's pool held once the loops are gone); nothing reaches the pipeline as data.
 */
@ExtendWith(NoLeaks.class)
class RegmemChannelHostileTest {
    private RdmaDevice dev;
    private RegmemTransport transport;
    private EventLoopGroup group;
    private Channel server;
    private final List<Throwable> caught = new CopyOnWriteArrayList<>();
    private final AtomicInteger reads = new AtomicInteger();
    private final AtomicInteger closed = new AtomicInteger();
    private final List<Channel> kids = new CopyOnWriteArrayList<>();

    @BeforeEach
    void setUp() throws Exception {
        dev = RdmaDevice.open("shm");
        transport = RegmemTransport.builder(dev).build();
        group = new MultiThreadIoEventLoopGroup(1, transport.ioHandlerFactory());
        server = new ServerBootstrap().group(group).channel(RegmemServerSocketChannel.class)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        ch.closeFuture().addListener(f -> closed.incrementAndGet());
                        kids.add(ch);
                        ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                            @Override
                            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                reads.incrementAndGet();
                                ((ByteBuf) msg).release();
                            }

                            @Override
                            public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                                caught.add(cause);
                            }
                        });
                    }
                }).bind(new InetSocketAddress("127.0.0.1", 0)).sync().channel();
    }

    @AfterEach
    void tearDown() throws Exception {
        server.close().sync();
        group.shutdownGracefully(0, 2, TimeUnit.SECONDS).sync();
        long held = transport.allocator().metric().usedDirectMemory();
        transport.close();
        dev.close();
        assertThat(held).as("bytes of the transport's pool still held once every channel and loop is gone").isZero();
    }

    /** A raw verbs peer on its own PD and CQ: connected with {@code offer}, then it sends {@code payload} with {@code imm}. */
    private void rawPeer(byte[] offer, byte[] payload, int imm) throws Exception {
        rawPeerOf(offer, mr -> payload, imm);
    }

    /** As {@link #rawPeer}, the payload made from the peer's own memory region. */
    private void rawPeerOf(byte[] offer, java.util.function.Function<MemoryRegion, byte[]> payloadOf, int imm) throws Exception {
        int before = closed.get(); // (before anything: the server may close the child before this side looks)
        try (Arena arena = Arena.ofShared()) {
            ProtectionDomain pd = dev.allocPd();
            CompletionQueue cq = dev.createCq(64);
            MemorySegment mem = arena.allocate(1 << 16, 64);
            MemoryRegion mr = pd.register(mem, Access.LOCAL_WRITE);
            byte[] payload = payloadOf.apply(mr);
            CmId id = dev.createCmId();
            QueuePair qp = id.createQp(pd, QpInitAttributes.of(cq).maxRecvWr(8).maxSendWr(8));
            WorkRequest wr = new WorkRequest(1);
            for (int i = 0; i < 4; i++) {
                qp.postRecv(wr.reset().wrId(100 + i).addSge(mem.address() + 8192L * (i + 1), 8192, mr.lkey()));
            }
            id.connect(Connections.hostPort((InetSocketAddress) server.localAddress()), offer);
            try {
                id.awaitConnected(10, TimeUnit.SECONDS);
            } catch (RdmaException e) { // the server may end a connection it refuses before this side sees it up
                assertThat(e.errno()).isEqualTo(Errno.ECONNRESET);
                assertThat(payload).as("only a refused offer ends the connection at once").isNull();
            }
            if (payload != null) {
                MemorySegment.copy(MemorySegment.ofArray(payload), 0, mem, 0, payload.length);
                wr.reset().wrId(1).opcode(Opcode.SEND_WITH_IMM).immData(imm).signaled(true);
                if (payload.length > 0) {
                    wr.addSge(mem.address(), payload.length, mr.lkey());
                }
                qp.postSend(wr);
            }
            long deadline = System.nanoTime() + 10_000_000_000L;
            WorkCompletion[] wcs = {new WorkCompletion()};
            while (closed.get() == before && System.nanoTime() < deadline) {
                cq.poll(wcs);
                Thread.sleep(1);
            }
            assertThat(closed.get()).as("the server's child channel closed: " + kids).isGreaterThan(before);
            if (id.connState() == CmId.ConnState.CONNECTED) {
                id.disconnect();
            }
            qp.drain();
            while (cq.poll(wcs) > 0) {
                // the flushed receives
            }
            id.destroyQp();
            id.close();
            mr.close();
            cq.close();
            pd.close();
        }
    }

    private static byte[] offer(int magic) {
        return ByteBuffer.allocate(16).order(ByteOrder.LITTLE_ENDIAN).putInt(magic).putInt(1).putInt(8).putInt(8192).array();
    }

    @Test
    void garbageFromAPeerWithTheSecretClosesItsChannelAloneAndReachesNoPipelineAsData() throws Exception {
        rawPeer(offer(0x12345678), null, 0); // not the transport's offer
        byte[] absurd = new byte[18];
        absurd[0] = (byte) 200; // chunk id past the limit
        ByteBuffer.wrap(absurd).order(ByteOrder.LITTLE_ENDIAN).putInt(4, Integer.MAX_VALUE);
        rawPeer(offer(Connection.MAGIC), absurd, Connection.CHUNK);
        rawPeer(offer(Connection.MAGIC), new byte[0], Connection.DONE | 5 << 24); // a chunk this side never sent
        rawPeer(offer(Connection.MAGIC), new byte[3], Connection.CHUNK); // a descriptor cut short
        rawPeer(offer(Connection.MAGIC), new byte[1], Connection.CREDITS); // more credits than its 8 receives, with a byte
        assertThat(reads.get()).as("nothing went up as data").isZero();
        assertThat(caught).hasSizeGreaterThanOrEqualTo(3).allMatch(t -> t instanceof IOException);
        assertThat(server.isActive()).as("the server goes on").isTrue();
        rawPeer(offer(Connection.MAGIC), new byte[18], Connection.CHUNK); // and once more, after all that
    }

    /** A chunk descriptor of the right shape whose memory the peer cannot give: the READ fails, the child closes. */
    private static byte[] chunk(byte[] key, long address, int length) {
        return ByteBuffer.allocate(18 + key.length).order(ByteOrder.LITTLE_ENDIAN).put((byte) 0).put((byte) 1).putShort((short) 0)
                .putInt(length).putLong(address).putShort((short) key.length).put(key).array();
    }

    @Test
    void aChunkWhoseMemoryThePeerCannotGiveClosesItsChannelAloneAndHoldsNothing() throws Exception {
        byte[] garbage = new byte[24];
        java.util.Arrays.fill(garbage, (byte) 0x5A);
        rawPeerOf(offer(Connection.MAGIC), mr -> chunk(garbage, 4096, 100_000), Connection.CHUNK); // a key that is none
        rawPeerOf(offer(Connection.MAGIC), mr -> chunk(mr.exportRemoteKey(), mr.address(), 20_000),
                Connection.CHUNK); // a real key of a region without remote read
        rawPeerOf(offer(Connection.MAGIC), mr -> chunk(mr.exportRemoteKey(), mr.address() + (1 << 16) - 100, 20_000),
                Connection.CHUNK); // past the region's end
        assertThat(reads.get()).as("nothing went up as data").isZero();
        assertThat(caught).hasSize(3).allMatch(t -> t instanceof IOException);
        assertThat(server.isActive()).as("the server goes on").isTrue();
    }
}
