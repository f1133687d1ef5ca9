package io.regmem.bench;

import io.aeron.Aeron;
import io.aeron.ExclusivePublication;
import io.aeron.Subscription;
import io.aeron.driver.MediaDriver;
import io.aeron.driver.ThreadingMode;
import io.aeron.logbuffer.FragmentHandler;
import io.regmem.registration.Access;
import io.regmem.registration.AddressHandle;
import io.regmem.registration.AhAttributes;
import io.regmem.registration.CmId;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.Opcode;
import io.regmem.registration.PortSpace;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;
import java.net.StandardProtocolFamily;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.DatagramChannel;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.agrona.concurrent.YieldingIdleStrategy;
import org.agrona.concurrent.UnsafeBuffer;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * A 64-byte round trip over UDP multicast on the loopback, both ways through a group: the benchmark
 * thread sends a ping to group 1 and waits for the pong on group 2; an echo thread, a member of
 * group 1, sends each ping back to group 2. {@code transport}: {@code regmem-ucx} (two ucx devices'
 * UD QPs, joined by {@code attachMulticast}: regmem's header and SipHash tag on every datagram, no
 * recovery of what is lost; two threads spin), {@code aeron-udp} (Aeron 1.47 UDP multicast
 * publications and subscriptions with an embedded media driver in shared mode, its thread spinning
 * with a yield between idle duty cycles (busy-spinning it, three spinning threads on two cores starve
 * one another into milliseconds), and its two client threads yield when idle (the driver's thread
 * moves every datagram, so it must get a core); Aeron adds flow control and NAK-based recovery),
 * {@code jdk-udp} (two non-blocking {@code DatagramChannel}s joined to the groups, bare datagrams: the
 * kernel's floor; two threads spin). On one host without the kernel: {@code regmem-shm} (two shm
 * devices' UD QPs: each datagram written once into the sender's publication ring, read from the
 * member's read-only mapping; the same header and tag; two threads spin) beside {@code aeron-ipc}
 * (Aeron IPC publications and subscriptions, two streams; the embedded driver's thread yields between
 * idle duty cycles and moves no data; two client threads spin). Sampled: p50, p99 and p99.9 of the
 * round trip.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "-Xms1g", "-Xmx1g",
        "--sun-misc-unsafe-memory-access=allow", "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED"})
public class MulticastPingPongBenchmark extends BenchDefaults {
    private static final int SIZE = 64;
    private static final String PING_GROUP = "239.255.90.1";
    private static final String PONG_GROUP = "239.255.90.3"; // (Aeron: a data address is odd; +1 is its control address)

    /** Which multicast carries the round trip. */
    @Param({"regmem-ucx", "aeron-udp", "jdk-udp", "regmem-shm", "aeron-ipc"})
    public String transport;

    private final AtomicBoolean stop = new AtomicBoolean();
    private Thread echo;
    // regmem
    private Arena arena;
    private final RdmaDevice[] devices = new RdmaDevice[2];
    private final ProtectionDomain[] pds = new ProtectionDomain[2];
    private final CompletionQueue[] cqs = new CompletionQueue[2];
    private final MemoryRegion[] mrs = new MemoryRegion[2];
    private final CmId[] ids = new CmId[2];
    private final QueuePair[] qps = new QueuePair[2];
    private final AddressHandle[] ahs = new AddressHandle[2];
    private final WorkRequest ping = new WorkRequest(1);
    private final WorkRequest pingRecv = new WorkRequest(1);
    private final WorkCompletion[] wcs = {new WorkCompletion()};
    // aeron
    private MediaDriver driver;
    private Aeron aeron;
    private ExclusivePublication aeronPing;
    private Subscription aeronPongs;
    private UnsafeBuffer message;
    private int received;
    private FragmentHandler onPong;
    // jdk
    private DatagramChannel jdkPing;
    private DatagramChannel jdkPong;
    private InetSocketAddress jdkPingTo;
    private final ByteBuffer out = ByteBuffer.allocateDirect(SIZE);
    private final ByteBuffer in = ByteBuffer.allocateDirect(2048);

    @Setup(Level.Trial)
    public void setUp() throws Exception {
        switch (transport) {
            case "regmem-ucx" -> regmem("ucx");
            case "regmem-shm" -> regmem("shm");
            case "aeron-udp", "aeron-ipc" -> aeron();
            default -> jdk();
        }
    }

    private void regmem(String provider) throws Exception {
        arena = Arena.ofShared();
        InetAddress[] groups = {InetAddress.getByName(PONG_GROUP), InetAddress.getByName(PING_GROUP)};
        for (int i = 0; i < 2; i++) { // 0: this thread's, a member of the pong group; 1: the echo's, of the ping group
            devices[i] = RdmaDevice.open(provider, Map.of());
            pds[i] = devices[i].allocPd();
            cqs[i] = devices[i].createCq(256);
            MemorySegment m = arena.allocate(8192, 4096);
            mrs[i] = pds[i].register(m, Access.LOCAL_WRITE);
            ids[i] = devices[i].createCmId(PortSpace.UDP);
            qps[i] = ids[i].createQp(pds[i], QpInitAttributes.of(cqs[i]).blockSelfMulticastLoopback(true));
            qps[i].attachMulticast(groups[i]);
            ahs[i] = pds[i].createAh(AhAttributes.of(groups[1 - i]));
        }
        ping.wrId(1).opcode(Opcode.SEND).signaled(true).addSge(mrs[0].address(), SIZE, mrs[0].lkey())
                .ud(ahs[0], AhAttributes.MULTICAST_QPN, QpInitAttributes.RDMA_UDP_QKEY);
        pingRecv.wrId(2).addSge(mrs[0].address() + 4096, 40 + SIZE, mrs[0].lkey());
        MemoryRegion em = mrs[1];
        QueuePair eq = qps[1];
        CompletionQueue ecq = cqs[1];
        WorkRequest pong = new WorkRequest(1).wrId(3).opcode(Opcode.SEND).signaled(true)
                .addSge(em.address() + 4096 + 40, SIZE, em.lkey()).ud(ahs[1], AhAttributes.MULTICAST_QPN,
                        QpInitAttributes.RDMA_UDP_QKEY);
        WorkRequest recv = new WorkRequest(1).wrId(4).addSge(em.address() + 4096, 40 + SIZE, em.lkey());
        eq.postRecv(recv);
        echo = Thread.ofPlatform().name("regmem-echo").start(() -> {
            WorkCompletion[] w = {new WorkCompletion()};
            while (!stop.get()) {
                if (ecq.poll(w) == 0) {
                    Thread.onSpinWait();
                    continue;
                }
                if (w[0].status() != WcStatus.SUCCESS) {
                    throw new IllegalStateException("echo: " + w[0]);
                }
                if (w[0].opcode() == Opcode.RECV) {
                    eq.postSend(pong); // (sent from the receive buffer itself; its send completes before the next ping)
                    eq.postRecv(recv);
                }
            }
        });
    }

    private void aeron() {
        driver = MediaDriver.launchEmbedded(new MediaDriver.Context()
                .threadingMode(ThreadingMode.SHARED)
                .sharedIdleStrategy(new YieldingIdleStrategy()) // (three spinning threads on two cores starve each other)
                .dirDeleteOnStart(true)
                .dirDeleteOnShutdown(true));
        aeron = Aeron.connect(new Aeron.Context().aeronDirectoryName(driver.aeronDirectoryName()));
        boolean ipc = transport.equals("aeron-ipc");
        String pingChannel = ipc ? "aeron:ipc" : "aeron:udp?endpoint=" + PING_GROUP + ":40456|interface=127.0.0.1";
        String pongChannel = ipc ? "aeron:ipc" : "aeron:udp?endpoint=" + PONG_GROUP + ":40457|interface=127.0.0.1";
        aeronPing = aeron.addExclusivePublication(pingChannel, 1001);
        Subscription pings = aeron.addSubscription(pingChannel, 1001);
        ExclusivePublication pong = aeron.addExclusivePublication(pongChannel, 1002);
        aeronPongs = aeron.addSubscription(pongChannel, 1002);
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (!aeronPing.isConnected() || !pong.isConnected() || !pings.isConnected() || !aeronPongs.isConnected()) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("aeron: the UDP multicast streams did not connect within 10 s");
            }
            Thread.onSpinWait();
        }
        message = new UnsafeBuffer(ByteBuffer.allocateDirect(SIZE));
        onPong = (buffer, offset, length, header) -> received = length;
        FragmentHandler echoOne = (buffer, offset, length, header) -> {
            while (pong.offer(buffer, offset, length) < 0) {
                Thread.onSpinWait();
            }
        };
        echo = Thread.ofPlatform().name("aeron-echo").start(() -> {
            while (!stop.get()) {
                if (pings.poll(echoOne, 1) == 0) {
                    if (ipc) {
                        Thread.onSpinWait(); // (IPC: the driver's thread moves nothing)
                    } else {
                        Thread.yield(); // (the driver's thread moves every datagram: it must get a core)
                    }
                }
            }
        });
    }

    private void jdk() throws IOException {
        NetworkInterface lo = NetworkInterface.getByInetAddress(InetAddress.getLoopbackAddress());
        jdkPing = member(PONG_GROUP, 40458, lo); // this thread's: sends pings, receives pongs
        DatagramChannel echoCh = member(PING_GROUP, 40459, lo);
        jdkPong = echoCh;
        jdkPingTo = new InetSocketAddress(InetAddress.getByName(PING_GROUP), 40459);
        InetSocketAddress pongTo = new InetSocketAddress(InetAddress.getByName(PONG_GROUP), 40458);
        echo = Thread.ofPlatform().name("jdk-echo").start(() -> {
            ByteBuffer b = ByteBuffer.allocateDirect(2048);
            try {
                while (!stop.get()) {
                    b.clear();
                    if (echoCh.receive(b) == null) {
                        Thread.onSpinWait();
                        continue;
                    }
                    b.flip();
                    echoCh.send(b, pongTo);
                }
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        });
    }

    private static DatagramChannel member(String group, int port, NetworkInterface lo) throws IOException {
        DatagramChannel c = DatagramChannel.open(StandardProtocolFamily.INET);
        c.setOption(StandardSocketOptions.SO_REUSEADDR, true);
        c.bind(new InetSocketAddress(port));
        c.setOption(StandardSocketOptions.IP_MULTICAST_IF, lo);
        c.join(InetAddress.getByName(group), lo);
        c.configureBlocking(false);
        return c;
    }

    @TearDown(Level.Trial)
    public void tearDown() throws Exception {
        stop.set(true);
        echo.join();
        if (aeron != null) {
            aeron.close();
            driver.close();
        }
        if (jdkPing != null) {
            jdkPing.close();
            jdkPong.close();
        }
        if (arena != null) {
            for (int i = 0; i < 2; i++) {
                ahs[i].close();
                ids[i].destroyQp();
                ids[i].close();
                mrs[i].close();
                cqs[i].close();
                pds[i].close();
                devices[i].close();
            }
            arena.close();
        }
    }

    /** One round trip: a 64-byte ping to the ping group, and its pong from the pong group. */
    @Benchmark
    public int roundTrip() throws IOException {
        switch (transport) {
            case "regmem-ucx", "regmem-shm" -> {
                qps[0].postRecv(pingRecv);
                qps[0].postSend(ping);
                int got = 0;
                while (got < 2) { // the send's completion and the pong's
                    if (cqs[0].poll(wcs) == 0) {
                        Thread.onSpinWait();
                        continue;
                    }
                    if (wcs[0].status() != WcStatus.SUCCESS) {
                        throw new IllegalStateException("ping: " + wcs[0]);
                    }
                    got++;
                }
                return got;
            }
            case "aeron-udp" -> {
                while (aeronPing.offer(message, 0, SIZE) < 0) {
                    Thread.yield();
                }
                received = 0;
                while (aeronPongs.poll(onPong, 1) == 0) {
                    Thread.yield();
                }
                return received;
            }
            case "aeron-ipc" -> {
                while (aeronPing.offer(message, 0, SIZE) < 0) {
                    Thread.onSpinWait();
                }
                received = 0;
                while (aeronPongs.poll(onPong, 1) == 0) {
                    Thread.onSpinWait();
                }
                return received;
            }
            default -> {
                out.clear();
                jdkPing.send(out, jdkPingTo);
                in.clear();
                while (jdkPing.receive(in) == null) {
                    Thread.onSpinWait();
                }
                return in.position();
            }
        }
    }
}
