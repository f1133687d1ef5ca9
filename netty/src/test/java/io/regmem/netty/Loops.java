package io.regmem.netty;

import static org.assertj.core.api.Assertions.assertThat;

import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.regmem.registration.RdmaDevice;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.UnaryOperator;

/**
 * The transport tests' set-up: a shm device, the transport on it, and its event loop groups (a boss of
 * one loop, workers and clients of as many as asked). {@link #close} shuts the groups down, then the
 * transport and the device, and fails if the transport's pool still held a byte once every channel and
 * loop was gone.
 */
final class Loops implements AutoCloseable {
    final RdmaDevice dev;
    final RegmemTransport transport;
    final EventLoopGroup boss;
    final EventLoopGroup workers;
    final EventLoopGroup clients;

    /** On a shm device opened with {@code options}; {@code workers} and {@code clients} loops. */
    Loops(Map<String, String> options, int workers, int clients) {
        this(options, workers, clients, UnaryOperator.identity());
    }

    /** As {@link #Loops(Map, int, int)}, the transport's settings made by {@code settings}. */
    Loops(Map<String, String> options, int workers, int clients, UnaryOperator<RegmemTransport.Builder> settings) {
        this.dev = RdmaDevice.open("shm", options);
        this.transport = settings.apply(RegmemTransport.builder(dev)).build();
        this.boss = group(1);
        this.workers = group(workers);
        this.clients = group(clients);
    }

    /** One loop each, on a shm device of the default options. */
    Loops() {
        this(Map.of(), 1, 1);
    }

    /** A group of {@code n} loops of the transport (the caller shuts it down). */
    EventLoopGroup group(int n) {
        return new MultiThreadIoEventLoopGroup(n, transport.ioHandlerFactory());
    }

    @Override
    public void close() throws Exception {
        for (EventLoopGroup g : new EventLoopGroup[] {clients, workers, boss}) {
            g.shutdownGracefully(0, 2, TimeUnit.SECONDS).sync();
        }
        long held = transport.allocator().metric().usedDirectMemory();
        transport.close();
        dev.close();
        assertThat(held).as("bytes of the transport's pool still held once every channel and loop is gone").isZero();
    }
}
