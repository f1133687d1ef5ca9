package io.regmem.netty;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.google.common.util.concurrent.ListenableFuture;
import io.grpc.CallOptions;
import io.grpc.ClientCall;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Server;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.StreamObserver;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.regmem.registration.testkit.ChildJvm;
import io.regmem.registration.testkit.NoLeaks;
import java.io.ByteArrayOutputStream;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * gRPC-Java, unchanged (grpc-netty's {@code NettyServerBuilder} and {@code NettyChannelBuilder} given
 * the regmem channel types and event loop groups), over the regmem transport on shm: unary calls of
 * 64 B to 1 MiB, a server stream, a bidirectional stream, a deadline and a cancellation that the server
 * sees, and 300 concurrent calls of mixed sizes, in one JVM; and unary and streaming calls to a server
 * in another process.
 */
@ExtendWith(NoLeaks.class)
class GrpcOverRegmemTest {
    private static final String SECRET = "grpc-over-regmem-test-secret-0123456789abcdef";
    private Loops loops;
    private RegmemTransport transport;
    private EventLoopGroup boss;
    private EventLoopGroup workers;
    private EventLoopGroup clients;

    @BeforeEach
    void setUp() {
        loops = new Loops(Map.of("secret", SECRET), 1, 1);
        transport = loops.transport;
        boss = loops.boss;
        workers = loops.workers;
        clients = loops.clients;
    }

    @AfterEach
    void tearDown() throws Exception {
        loops.close();
    }

    /** The server of {@code service} on the regmem transport, on 127.0.0.1 and a port of the system's choice. */
    static Server server(RegmemTransport transport, EventLoopGroup boss, EventLoopGroup workers, GrpcEcho service, String host) {
        return NettyServerBuilder.forAddress(new InetSocketAddress(host, 0))
                .channelType(RegmemServerSocketChannel.class).bossEventLoopGroup(boss).workerEventLoopGroup(workers)
                .withChildOption(ChannelOption.ALLOCATOR, transport.allocator())
                .addService(service.definition()).build();
    }

    private ManagedChannel channel(int port) {
        return channel(transport, clients, "127.0.0.1", port);
    }

    /** A gRPC channel to {@code host:port} on the regmem transport. */
    static ManagedChannel channel(RegmemTransport transport, EventLoopGroup clients, String host, int port) {
        return NettyChannelBuilder.forAddress(host, port).channelType(RegmemSocketChannel.class).eventLoopGroup(clients)
                .withOption(ChannelOption.ALLOCATOR, transport.allocator()).usePlaintext().build();
    }

    private static byte[] random(int n, long seed) {
        byte[] b = new byte[n];
        new Random(seed).nextBytes(b);
        return b;
    }

    static void unaryAndStreams(ManagedChannel ch) throws Exception {
        for (int size : new int[] {64, 65536, 1 << 20}) {
            byte[] req = random(size, size);
            assertThat(ClientCalls.blockingUnaryCall(ch, GrpcEcho.UNARY, CallOptions.DEFAULT, req)).isEqualTo(req);
        }
        byte[] whole = random(1 << 20, 3);
        ByteArrayOutputStream got = new ByteArrayOutputStream();
        int pieces = 0;
        for (Iterator<byte[]> it = ClientCalls.blockingServerStreamingCall(ch, GrpcEcho.SPLIT, CallOptions.DEFAULT, whole);
             it.hasNext(); pieces++) {
            got.write(it.next());
        }
        assertThat(pieces).isEqualTo(16);
        assertThat(got.toByteArray()).isEqualTo(whole);
        List<byte[]> back = new ArrayList<>();
        CompletableFuture<Void> done = new CompletableFuture<>();
        StreamObserver<byte[]> out = ClientCalls.asyncBidiStreamingCall(ch.newCall(GrpcEcho.CHAT, CallOptions.DEFAULT),
                new StreamObserver<>() {
                    @Override
                    public void onNext(byte[] value) {
                        back.add(value);
                    }

                    @Override
                    public void onError(Throwable t) {
                        done.completeExceptionally(t);
                    }

                    @Override
                    public void onCompleted() {
                        done.complete(null);
                    }
                });
        for (int i = 0; i < 100; i++) {
            out.onNext(random(1 + i * 97, i));
        }
        out.onCompleted();
        done.get(30, TimeUnit.SECONDS);
        assertThat(back).hasSize(100);
        for (int i = 0; i < 100; i++) {
            assertThat(back.get(i)).isEqualTo(random(1 + i * 97, i));
        }
    }

    @Test
    void unaryStreamingDeadlineAndCancellationInOneJvm() throws Exception {
        GrpcEcho service = GrpcEcho.service();
        Server server = server(transport, boss, workers, service, "127.0.0.1").start();
        ManagedChannel ch = channel(server.getPort());
        try {
            unaryAndStreams(ch);
            assertThatThrownBy(() -> ClientCalls.blockingUnaryCall(ch, GrpcEcho.SLOW,
                    CallOptions.DEFAULT.withDeadlineAfter(200, TimeUnit.MILLISECONDS), new byte[8]))
                    .isInstanceOf(StatusRuntimeException.class)
                    .satisfies(e -> assertThat(((StatusRuntimeException) e).getStatus().getCode())
                            .isEqualTo(Status.Code.DEADLINE_EXCEEDED));
            ClientCall<byte[], byte[]> call = ch.newCall(GrpcEcho.SLOW, CallOptions.DEFAULT);
            CompletableFuture<Status> closed = new CompletableFuture<>();
            call.start(new ClientCall.Listener<>() {
                @Override
                public void onClose(Status status, Metadata trailers) {
                    closed.complete(status);
                }
            }, new Metadata());
            call.sendMessage(new byte[8]);
            call.halfClose();
            call.request(1);
            Thread.sleep(50);
            call.cancel("the test cancels", null);
            assertThat(closed.get(10, TimeUnit.SECONDS).getCode()).isEqualTo(Status.Code.CANCELLED);
            assertThat(service.cancelled.await(10, TimeUnit.SECONDS)).as("the server saw the deadline and the cancel").isTrue();
        } finally {
            ch.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
            server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
        }
    }

    /**
     * Three gRPC channels on one client loop, a server on two, and 300 unary calls in flight at once
     * (mostly small, one in eight up to 3 MiB: pieces in SENDs and read chunks), four rounds, every
     * answer byte-checked.
     */
    @Test
    void threeHundredConcurrentUnaryCallsOfMixedSizes() throws Exception {
        EventLoopGroup twoWorkers = new MultiThreadIoEventLoopGroup(2, transport.ioHandlerFactory());
        Server server = server(transport, boss, twoWorkers, GrpcEcho.service(), "127.0.0.1").start();
        List<ManagedChannel> chans = new ArrayList<>();
        try {
            for (int k = 0; k < 3; k++) {
                chans.add(channel(server.getPort()));
            }
            Random r = new Random(1);
            for (int round = 0; round < 4; round++) {
                List<ListenableFuture<byte[]>> calls = new ArrayList<>();
                List<byte[]> requests = new ArrayList<>();
                for (int i = 0; i < 300; i++) {
                    byte[] b = new byte[r.nextInt(8) == 0 ? r.nextInt(3 << 20) : r.nextInt(5000)];
                    r.nextBytes(b);
                    requests.add(b);
                    calls.add(ClientCalls.futureUnaryCall(chans.get(i % 3).newCall(GrpcEcho.UNARY, CallOptions.DEFAULT), b));
                }
                for (int i = 0; i < calls.size(); i++) {
                    assertThat(calls.get(i).get(60, TimeUnit.SECONDS)).as("call %d of round %d", i, round).isEqualTo(requests.get(i));
                }
            }
        } finally {
            for (ManagedChannel ch : chans) {
                ch.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
            }
            server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
            twoWorkers.shutdownGracefully(0, 2, TimeUnit.SECONDS).sync();
        }
    }

    @Test
    void unaryAndStreamingCallsToAServerInAnotherProcess() throws Exception {
        try (ChildJvm child = ChildJvm.of(GrpcServerMain.class).env("REGMEM_SECRET", SECRET).start()) {
            int port = Integer.parseInt(child.expect("PORT ").substring("PORT ".length()));
            ManagedChannel ch = channel(port);
            try {
                unaryAndStreams(ch);
            } finally {
                ch.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
            }
            child.finish();
        }
    }
}
