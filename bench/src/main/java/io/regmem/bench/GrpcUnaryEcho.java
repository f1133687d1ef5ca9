package io.regmem.bench;

import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.grpc.Server;
import io.grpc.ServerServiceDefinition;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ServerCalls;
import io.grpc.stub.StreamObserver;
import io.netty.channel.ChannelOption;
import io.netty.channel.local.LocalAddress;
import io.netty.channel.local.LocalChannel;
import io.netty.channel.local.LocalServerChannel;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.HdrHistogram.Histogram;

/**
 * A gRPC-Java unary call between two processes (grpc-netty 1.85 unchanged, a method of raw bytes that
 * answers its request), on the regmem Netty transport ({@code regmem-shm}, {@code regmem-ucx}; device options after a colon:
 * {@link BenchTransports}) or on
 * Netty's epoll transport over TCP ({@code epoll}). {@code server TRANSPORT HOST} says {@code PORT n}
 * and serves until its standard input ends; {@code client TRANSPORT HOST PORT SIZE INFLIGHT SECONDS}
 * keeps INFLIGHT calls of SIZE bytes going (each answer starts the next; gRPC's direct executor, so the
 * event loop runs them) for a warm-up ({@code -Dbench.warmupSeconds}, default 15: gRPC's code needs the
 * JIT, whose C2 thread on a 2-CPU host still takes about half a CPU 5 to 10 s in) and then SECONDS: {@code RESULT} says calls/s and the
 * p50, p99 and p99.9 of each call. One event loop per process (the server's boss, worker and the
 * client's each one); the regmem loops busy-poll 50 us after their last work, epoll's sleep. With
 * {@code local} (Netty's in-JVM transport) the client process serves the calls itself, on its one event
 * loop: gRPC's own cost with a transport that moves no bytes between processes, the floor of the others.
 * {@code -Dbench.grpcWindow=BYTES} sets both sides' HTTP/2 flow-control window (gRPC's default otherwise).
 */
public final class GrpcUnaryEcho {
    /** {@code -Dbench.grpcWindow}: both sides' HTTP/2 flow-control window, or 0 for gRPC's default. */
    private static final int GRPC_WINDOW = Integer.getInteger("bench.grpcWindow", 0);
    private static final MethodDescriptor.Marshaller<byte[]> BYTES = new MethodDescriptor.Marshaller<>() {
        @Override
        public InputStream stream(byte[] value) {
            return new ByteArrayInputStream(value);
        }

        @Override
        public byte[] parse(InputStream stream) {
            try {
                return stream.readAllBytes();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    };
    private static final MethodDescriptor<byte[], byte[]> ECHO = MethodDescriptor.<byte[], byte[]>newBuilder()
            .setType(MethodDescriptor.MethodType.UNARY).setFullMethodName("regmem.Bench/Echo")
            .setRequestMarshaller(BYTES).setResponseMarshaller(BYTES).build();

    private GrpcUnaryEcho() {
    }

    public static void main(String[] args) throws Exception {
        NettySide side = NettySide.of(args[1]);
        try {
            if ("server".equals(args[0])) {
                server(side, args[2]);
            } else {
                client(side, args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]), Integer.parseInt(args[5]),
                        Integer.parseInt(args[6]));
            }
        } finally {
            side.close();
        }
    }

    private static void server(NettySide side, String host) throws Exception {
        if (side.server() == LocalServerChannel.class) {
            System.out.println("PORT 0"); // (the client serves its own calls)
            System.out.flush();
            while (System.in.read() >= 0) {
                // until the script ends the server
            }
            return;
        }
        Server server = serve(side, new InetSocketAddress(host, 0));
        System.out.println("PORT " + server.getPort());
        System.out.flush();
        while (System.in.read() >= 0) {
            // until the script ends the server
        }
        server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }

    /** The echo service at {@code address}, on the side's event loop. */
    private static Server serve(NettySide side, SocketAddress address) throws IOException {
        NettyServerBuilder b = NettyServerBuilder.forAddress(address).channelType(side.server())
                .bossEventLoopGroup(side.group()).workerEventLoopGroup(side.group()).directExecutor()
                .addService(ServerServiceDefinition.builder("regmem.Bench").addMethod(ECHO, ServerCalls.asyncUnaryCall(
                        (byte[] req, StreamObserver<byte[]> out) -> {
                            out.onNext(req);
                            out.onCompleted();
                        })).build());
        if (side.regmem() != null) {
            b.withChildOption(ChannelOption.ALLOCATOR, side.regmem().transport().allocator());
        }
        if (GRPC_WINDOW > 0) {
            b.flowControlWindow(GRPC_WINDOW);
        }
        return b.build().start();
    }

    private static void client(NettySide side, String transport, String host, int port, int size, int inflight, int seconds)
            throws Exception {
        boolean local = side.client() == LocalChannel.class;
        Server inProcess = local ? serve(side, new LocalAddress("grpc-unary-echo")) : null;
        NettyChannelBuilder b = (local ? NettyChannelBuilder.forAddress(new LocalAddress("grpc-unary-echo"))
                : NettyChannelBuilder.forAddress(host, port)).channelType(side.client()).eventLoopGroup(side.group())
                .directExecutor().usePlaintext();
        if (side.regmem() != null) {
            b.withOption(ChannelOption.ALLOCATOR, side.regmem().transport().allocator());
        }
        if (GRPC_WINDOW > 0) {
            b.flowControlWindow(GRPC_WINDOW);
        }
        ManagedChannel ch = b.build();
        byte[] payload = new byte[size];
        Histogram latency = new Histogram(10_000_000_000L, 3);
        long start = System.nanoTime();
        long measureFrom = start + TimeUnit.SECONDS.toNanos(Long.getLong("bench.warmupSeconds", 15));
        long stopAt = measureFrom + TimeUnit.SECONDS.toNanos(seconds);
        AtomicLong measured = new AtomicLong();
        AtomicLong open = new AtomicLong(inflight);
        CompletableFuture<Void> done = new CompletableFuture<>();
        var executor = Executors.newSingleThreadExecutor(); // (starts the first calls; the rest start on the event loop)
        for (int i = 0; i < inflight; i++) {
            executor.execute(() -> call(ch, payload, latency, measureFrom, stopAt, measured, open, done));
        }
        done.get(seconds + 120L, TimeUnit.SECONDS);
        executor.shutdown();
        ch.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
        if (inProcess != null) {
            inProcess.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
        }
        System.out.printf(Locale.ROOT, "RESULT grpc %s size %d inflight %d: %.0f calls/s, p50 %.2f us, p99 %.2f us, p99.9 %.2f us%n",
                transport, size, inflight, measured.get() / (double) seconds, latency.getValueAtPercentile(50) / 1e3,
                latency.getValueAtPercentile(99) / 1e3, latency.getValueAtPercentile(99.9) / 1e3);
    }

    /** One call; its answer records it and starts the next, until the time is up. */
    private static void call(ManagedChannel ch, byte[] payload, Histogram latency, long measureFrom, long stopAt, AtomicLong measured,
                             AtomicLong open, CompletableFuture<Void> done) {
        long at = System.nanoTime();
        ClientCalls.asyncUnaryCall(ch.newCall(ECHO, CallOptions.DEFAULT), payload, new StreamObserver<>() {
            @Override
            public void onNext(byte[] value) {
                long now = System.nanoTime();
                if (at >= measureFrom && now < stopAt) {
                    synchronized (latency) {
                        latency.recordValue(now - at);
                    }
                    measured.incrementAndGet();
                }
            }

            @Override
            public void onError(Throwable t) {
                done.completeExceptionally(t);
            }

            @Override
            public void onCompleted() {
                if (System.nanoTime() < stopAt) {
                    call(ch, payload, latency, measureFrom, stopAt, measured, open, done);
                } else if (open.decrementAndGet() == 0) {
                    done.complete(null);
                }
            }
        });
    }
}
