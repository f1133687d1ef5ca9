package io.regmem.netty;

import static org.assertj.core.api.Assertions.assertThat;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import io.netty.handler.ssl.SslHandler;
import io.netty.handler.ssl.util.InsecureTrustManagerFactory;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.testkit.NoLeaks;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.KeyManagerFactory;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;

/**
 * TLS over the transport, as Netty's SocketSslEchoTest runs it over TCP: the JDK's TLS engine in
 * Netty's {@code SslHandler} on both ends (a self-signed EC key made by the JDK's keytool), a byte-checked
 * echo of messages from 1 B to 3 MiB (records split across receives, chunks and SENDs), the handshake
 * done on both sides, and the transport's pool holding nothing at the end.
 */
@ExtendWith(NoLeaks.class)
class RegmemChannelTlsTest {
    private static SslContext serverContext(Path dir) throws Exception {
        Path store = dir.resolve("server.p12");
        Process keytool = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "keytool").toString(),
                "-genkeypair", "-alias", "server", "-keyalg", "EC", "-dname", "CN=localhost", "-validity", "2",
                "-storetype", "PKCS12", "-keystore", store.toString(), "-storepass", "secret", "-keypass", "secret")
                .redirectErrorStream(true).start();
        keytool.getInputStream().transferTo(java.io.OutputStream.nullOutputStream());
        assertThat(keytool.waitFor(60, TimeUnit.SECONDS)).isTrue();
        assertThat(keytool.exitValue()).as("keytool").isZero();
        KeyStore keys = KeyStore.getInstance("PKCS12");
        try (InputStream in = Files.newInputStream(store)) {
            keys.load(in, "secret".toCharArray());
        }
        KeyManagerFactory kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        kmf.init(keys, "secret".toCharArray());
        return SslContextBuilder.forServer(kmf).build();
    }

    @Test
    void aTlsEchoOfOneByteToThreeMebibytesComesBackWhole(@TempDir Path dir) throws Exception {
        SslContext server = serverContext(dir);
        SslContext client = SslContextBuilder.forClient().trustManager(InsecureTrustManagerFactory.INSTANCE).build();
        RdmaDevice dev = RdmaDevice.open("shm");
        RegmemTransport transport = RegmemTransport.builder(dev).build();
        EventLoopGroup servers = new MultiThreadIoEventLoopGroup(1, transport.ioHandlerFactory());
        EventLoopGroup clients = new MultiThreadIoEventLoopGroup(1, transport.ioHandlerFactory());
        long held;
        try {
            Channel s = new ServerBootstrap().group(servers, servers).channel(RegmemServerSocketChannel.class)
                    .childHandler(new ChannelInitializer<SocketChannel>() {
                        @Override
                        protected void initChannel(SocketChannel ch) {
                            ch.pipeline().addLast(server.newHandler(ch.alloc()), new PatternStream.Echo());
                        }
                    }).bind(new InetSocketAddress("127.0.0.1", 0)).sync().channel();
            PatternStream.Checker echoed = new PatternStream.Checker();
            Channel c = new Bootstrap().group(clients).channel(RegmemSocketChannel.class).handler(new ChannelInitializer<SocketChannel>() {
                @Override
                protected void initChannel(SocketChannel ch) {
                    ch.pipeline().addLast(client.newHandler(ch.alloc(), "localhost", 0), echoed);
                }
            }).connect(s.localAddress()).sync().channel();
            assertThat(c.pipeline().get(SslHandler.class).handshakeFuture().await(30, TimeUnit.SECONDS)).isTrue();
            assertThat(c.pipeline().get(SslHandler.class).handshakeFuture().isSuccess()).isTrue();
            long total = 0;
            for (int size : new int[] {1, 100, 5000, 70_000, 1 << 20, 3 << 20}) {
                c.writeAndFlush(PatternStream.fill(c.alloc().directBuffer(size), total, size));
                total += size;
            }
            long deadline = System.nanoTime() + 60_000_000_000L;
            while (echoed.read.get() < total && System.nanoTime() < deadline) {
                Thread.sleep(1);
            }
            assertThat(echoed.wrong.get()).isNull();
            assertThat(echoed.read.get()).isEqualTo(total);
            c.close().sync();
            s.close().sync();
        } finally {
            clients.shutdownGracefully(0, 2, TimeUnit.SECONDS).sync();
            servers.shutdownGracefully(0, 2, TimeUnit.SECONDS).sync();
            held = transport.allocator().metric().usedDirectMemory();
            transport.close();
            dev.close();
        }
        assertThat(held).as("bytes of the transport's pool still held").isZero();
    }
}
