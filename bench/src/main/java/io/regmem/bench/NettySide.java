package io.regmem.bench;

import io.netty.channel.Channel;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.ServerChannel;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.local.LocalChannel;
import io.netty.channel.local.LocalIoHandler;
import io.netty.channel.local.LocalServerChannel;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.regmem.netty.RegmemIoHandler;
import io.regmem.netty.RegmemServerSocketChannel;
import io.regmem.netty.RegmemSocketChannel;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

/**
 * One process's side of a two-process Netty benchmark, by transport name: one event loop and the
 * channel classes of {@code regmem-PROVIDER[:options]} ({@link BenchTransports}; {@code regmem} is its
 * transport, else null), {@code epoll}, {@code nio}, or {@code local} (Netty's in-JVM transport, for
 * a floor with both ends in one process).
 */
record NettySide(EventLoopGroup group, Class<? extends ServerChannel> server, Class<? extends Channel> client,
                 BenchTransports regmem) {

    /** The side of {@code transport}; with {@code -Dbench.pinLoop=N} its event loop's thread runs on CPU N only. */
    static NettySide of(String transport) {
        NettySide side = open(transport);
        String cpu = System.getProperty("bench.pinLoop");
        if (cpu != null) {
            try {
                side.group().next().submit(() -> pinCurrentThread(Integer.parseInt(cpu))).get();
            } catch (InterruptedException | ExecutionException e) {
                throw new IllegalStateException("pinning the event loop to CPU " + cpu + " failed", e);
            }
        }
        return side;
    }

    /** {@code sched_setaffinity(0, ...)}: the calling thread runs on {@code cpu} only (a diagnostic). */
    private static void pinCurrentThread(int cpu) {
        Linker linker = Linker.nativeLinker();
        MethodHandle set = linker.downcallHandle(linker.defaultLookup().find("sched_setaffinity").orElseThrow(),
                FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG, ValueLayout.ADDRESS));
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment mask = arena.allocate(128);
            mask.set(ValueLayout.JAVA_LONG, 8L * (cpu / 64), 1L << (cpu % 64));
            int rc = (int) set.invokeExact(0, 128L, mask);
            if (rc != 0) {
                throw new IllegalStateException("sched_setaffinity to CPU " + cpu + " returned " + rc);
            }
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    private static NettySide open(String transport) {
        if (transport.startsWith("regmem-")) {
            BenchTransports t = BenchTransports.open(transport);
            return new NettySide(new MultiThreadIoEventLoopGroup(1, RegmemIoHandler.newFactory(t.transport())),
                    RegmemServerSocketChannel.class, RegmemSocketChannel.class, t);
        }
        if ("local".equals(transport)) { // (Netty's in-JVM transport: client and server on one event loop)
            return new NettySide(new MultiThreadIoEventLoopGroup(1, LocalIoHandler.newFactory()), LocalServerChannel.class,
                    LocalChannel.class, null);
        }
        boolean epoll = "epoll".equals(transport);
        IoHandlerFactory f = epoll ? EpollIoHandler.newFactory() : NioIoHandler.newFactory();
        return new NettySide(new MultiThreadIoEventLoopGroup(1, f), epoll ? EpollServerSocketChannel.class
                : NioServerSocketChannel.class, epoll ? EpollSocketChannel.class : NioSocketChannel.class, null);
    }

    /** Shuts the event loop down, then closes the regmem transport and its device, if any. */
    void close() throws InterruptedException {
        group.shutdownGracefully(0, 2, TimeUnit.SECONDS).sync();
        if (regmem != null) {
            regmem.close();
        }
    }
}
