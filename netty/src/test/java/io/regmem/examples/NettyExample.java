package io.regmem.examples;

// example: netty
import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.regmem.core.BufferPool;
import io.regmem.core.PooledBuffer;
import io.regmem.netty.RegmemByteBufAllocator;
import io.regmem.registration.Access;
import io.regmem.registration.PoolRegistration;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.RdmaDevice;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/** A Netty server reads into registered memory: each buffer it reads has an lkey, ready for an RDMA SEND. */
public final class NettyExample {
    public static void main(String[] args) throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(2, NioIoHandler.newFactory());
        try (RdmaDevice device = RdmaDevice.open("soft");
             ProtectionDomain pd = device.allocPd();
             BufferPool pool = BufferPool.builder().name("netty").build();
             PoolRegistration registration = pd.register(pool, Access.LOCAL_WRITE)) {
            RegmemByteBufAllocator alloc = new RegmemByteBufAllocator(registration);
            CompletableFuture<String> received = new CompletableFuture<>();
            Channel server = new ServerBootstrap().group(group).channel(NioServerSocketChannel.class)
                    .childOption(ChannelOption.ALLOCATOR, alloc)             // reads land in pool buffers
                    .childHandler(new ChannelInitializer<SocketChannel>() {
                        @Override
                        protected void initChannel(SocketChannel ch) {
                            ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                                @Override
                                public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                    ByteBuf in = (ByteBuf) msg;
                                    PooledBuffer memory = alloc.pooledBuffer(in);   // the registered buffer
                                    System.out.println("lkey " + (alloc.lkey(in) == registration.lkey(memory)));
                                    received.complete(in.toString(StandardCharsets.UTF_8));
                                    in.release();                                   // back to the pool
                                }
                            });
                        }
                    })
                    .bind(new InetSocketAddress("127.0.0.1", 0)).sync().channel();
            Channel client = new Bootstrap().group(group).channel(NioSocketChannel.class)
                    .option(ChannelOption.ALLOCATOR, alloc)
                    .handler(new ChannelInboundHandlerAdapter())
                    .connect(server.localAddress()).sync().channel();
            ByteBuf out = alloc.directBuffer().writeBytes("hello".getBytes(StandardCharsets.UTF_8));
            client.writeAndFlush(out).sync();                                // Netty releases it once written
            System.out.println("received " + received.get(10, TimeUnit.SECONDS));
            client.close().sync();
            server.close().sync();
        } finally {
            group.shutdownGracefully(0, 2, TimeUnit.SECONDS).sync();
        }
    }
}
// end example
