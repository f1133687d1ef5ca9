package io.regmem.netty;

import io.grpc.Server;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.testkit.ChildSide;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;

/**
 * The other process of {@link GrpcOverRegmemTest} and {@link RegmemChannelNamespacesTest}: a gRPC
 * server of {@link GrpcEcho} on grpc-netty over the regmem transport (a device of the provider in its
 * first argument, default shm; its secret from {@code REGMEM_SECRET}), on the address in its second
 * (default 127.0.0.1) and a port it says ({@code PORT n}). The end of its input shuts it down and says {@code CLEAN}.
 */
public final class GrpcServerMain {
    private GrpcServerMain() {
    }

    public static void main(String[] args) throws Throwable {
        ConcurrentLinkedQueue<String> commands = ChildSide.commands();
        String provider = args.length > 0 ? args[0] : "shm";
        String host = args.length > 1 ? args[1] : "127.0.0.1";
        try (RdmaDevice dev = RdmaDevice.open(provider, Map.of());
             RegmemTransport transport = RegmemTransport.builder(dev).build()) {
            EventLoopGroup boss = new MultiThreadIoEventLoopGroup(1, transport.ioHandlerFactory());
            EventLoopGroup workers = new MultiThreadIoEventLoopGroup(1, transport.ioHandlerFactory());
            Server server = GrpcOverRegmemTest.server(transport, boss, workers, GrpcEcho.service(), host).start();
            ChildSide.say("PORT " + server.getPort());
            while (!"END".equals(commands.poll())) {
                Thread.sleep(5);
            }
            server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
            workers.shutdownGracefully(0, 2, TimeUnit.SECONDS).sync();
            boss.shutdownGracefully(0, 2, TimeUnit.SECONDS).sync();
        }
        ChildSide.say("CLEAN");
    }

}
