package io.regmem.bench;

import io.regmem.cli.SoftPair;
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
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.StandardProtocolFamily;
import java.nio.ByteBuffer;
import java.nio.channels.DatagramChannel;
import java.net.UnknownHostException;
import java.util.Map;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * Unreliable datagrams on {@code provider} (soft: in the JVM; ucx: over the kernel's UDP on the
 * loopback), one thread: a 64-byte UD send to one QP (a receive posted, the send and the receive
 * polled), a multicast send to a group of {@code members} QPs on as many devices (each member's
 * receive posted and polled), and beside them in the same run the RC SEND/RECV of the same size on a
 * connected soft pair (the reliable path the datagram path is measured against) and the JDK's own
 * UDP round of a 64-byte datagram between two non-blocking {@code DatagramChannel}s on the loopback
 * (the kernel's floor under ucx's datagrams: no header, no tag, no verbs). Run with {@code -prof gc}:
 * every one must show 0 B/op.
 */
@State(Scope.Thread)
public class DatagramBenchmark extends BenchDefaults {

    /** Multicast group members (each on a device of its own). */
    @Param({"1", "3"})
    public int members;

    /** The provider whose datagrams are measured. */
    @Param({"soft", "ucx"})
    public String provider;

    private static final int SIZE = 64;
    private Arena arena;
    private RdmaDevice[] devices;
    private ProtectionDomain[] pds;
    private CompletionQueue[] cqs;
    private MemoryRegion[] mrs;
    private MemorySegment[] mems;
    private CmId[] ids;
    private QueuePair[] qps;
    private AddressHandle unicast;
    private AddressHandle group;
    private SoftPair rc;
    private MemoryRegion rcSrc;
    private MemoryRegion rcDst;
    private final WorkRequest send = new WorkRequest(1);
    private final WorkRequest mcast = new WorkRequest(1);
    private final WorkRequest rcSend = new WorkRequest(1);
    private final WorkRequest[] recvs = new WorkRequest[4];
    private final WorkRequest rcRecv = new WorkRequest(1);
    private final WorkCompletion[] wcs = {new WorkCompletion()};
    private DatagramChannel udpA;
    private DatagramChannel udpB;
    private InetSocketAddress udpTo;
    private final ByteBuffer udpOut = ByteBuffer.allocateDirect(SIZE);
    private final ByteBuffer udpIn = ByteBuffer.allocateDirect(2048);

    /** The sender (device 0) and {@code members} receivers, all attached to one group; the RC pair. */
    @Setup(Level.Trial)
    public void setUp() throws UnknownHostException {
        arena = Arena.ofShared();
        int n = members + 1;
        devices = new RdmaDevice[n];
        pds = new ProtectionDomain[n];
        cqs = new CompletionQueue[n];
        mrs = new MemoryRegion[n];
        mems = new MemorySegment[n];
        ids = new CmId[n];
        qps = new QueuePair[n];
        InetAddress gid = InetAddress.getByName("239.90.0.1");
        for (int i = 0; i < n; i++) {
            devices[i] = RdmaDevice.open(provider);
            pds[i] = devices[i].allocPd();
            cqs[i] = devices[i].createCq(256);
            mems[i] = arena.allocate(4096, 4096);
            mrs[i] = pds[i].register(mems[i], Access.LOCAL_WRITE);
            ids[i] = devices[i].createCmId(PortSpace.UDP);
            qps[i] = ids[i].createQp(pds[i], QpInitAttributes.of(cqs[i]).blockSelfMulticastLoopback(true));
            if (i > 0) {
                qps[i].attachMulticast(gid);
                recvs[i] = new WorkRequest(1).wrId(i).addSge(mems[i].address(), 40 + SIZE, mrs[i].lkey());
            }
        }
        unicast = pds[0].createAh(devices[1].datagramAddress());
        group = pds[0].createAh(AhAttributes.of(gid));
        send.wrId(100).opcode(Opcode.SEND).signaled(true).addSge(mems[0].address(), SIZE, mrs[0].lkey())
                .ud(unicast, qps[1].qpNum(), QpInitAttributes.RDMA_UDP_QKEY);
        mcast.wrId(101).opcode(Opcode.SEND).signaled(true).addSge(mems[0].address(), SIZE, mrs[0].lkey())
                .ud(group, AhAttributes.MULTICAST_QPN, QpInitAttributes.RDMA_UDP_QKEY);
        rc = new SoftPair(Map.of(), 256, new QpInitAttributes());
        MemorySegment a = arena.allocate(4096, 4096);
        MemorySegment b = arena.allocate(4096, 4096);
        rcSrc = rc.pdA.register(a, Access.LOCAL_WRITE);
        rcDst = rc.pdB.register(b, Access.LOCAL_WRITE);
        rcSend.wrId(200).opcode(Opcode.SEND).signaled(true).addSge(a.address(), SIZE, rcSrc.lkey());
        rcRecv.wrId(201).addSge(b.address(), SIZE, rcDst.lkey());
        try {
            udpA = DatagramChannel.open(StandardProtocolFamily.INET).bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
            udpB = DatagramChannel.open(StandardProtocolFamily.INET).bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
            udpA.configureBlocking(false);
            udpB.configureBlocking(false);
            udpTo = (InetSocketAddress) udpB.getLocalAddress();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Tears down in the mandatory order. */
    @TearDown(Level.Trial)
    public void tearDown() {
        unicast.close();
        group.close();
        for (int i = 0; i < ids.length; i++) {
            ids[i].destroyQp();
            ids[i].close();
            mrs[i].close();
            cqs[i].close();
            pds[i].close();
            devices[i].close();
        }
        rc.disconnect();
        rcSrc.close();
        rcDst.close();
        rc.close();
        arena.close();
        try {
            udpA.close();
            udpB.close();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private long await(CompletionQueue cq) {
        while (cq.poll(wcs) == 0) {
            Thread.onSpinWait();
        }
        if (wcs[0].status() != WcStatus.SUCCESS) {
            throw new IllegalStateException("failed: " + wcs[0]);
        }
        return wcs[0].byteLen();
    }

    /** One 64-byte datagram to one UD QP: its receive posted, the send and the receive polled. */
    @Benchmark
    public long unicast() {
        qps[1].postRecv(recvs[1]);
        qps[0].postSend(send);
        await(cqs[0]);
        return await(cqs[1]);
    }

    /** One 64-byte datagram to the group: every member's receive posted, the send and each receive polled. */
    @Benchmark
    public long multicast() {
        for (int i = 1; i <= members; i++) {
            qps[i].postRecv(recvs[i]);
        }
        qps[0].postSend(mcast);
        long bytes = await(cqs[0]);
        for (int i = 1; i <= members; i++) {
            bytes += await(cqs[i]);
        }
        return bytes;
    }

    /** The peer: a 64-byte RC SEND/RECV on a connected soft pair, its receive posted, both polled. */
    /**
     * A poll of a group member's CQ that finds nothing (nothing was sent): what a spinning subscriber
     * pays between two datagrams, and so half of it, on average, before it sees one.
     */
    @Benchmark
    public int emptyPoll() {
        return cqs[1].poll(wcs);
    }

    @Benchmark
    public long rcSendRecv() {
        rc.qpB.postRecv(rcRecv);
        rc.qpA.postSend(rcSend);
        await(rc.cqA);
        return await(rc.cqB);
    }

    /** The floor: the JDK's own 64-byte UDP datagram between two non-blocking channels on the loopback, sent and received. */
    @Benchmark
    public int jdkUdp() throws IOException {
        udpOut.clear();
        udpA.send(udpOut, udpTo);
        udpIn.clear();
        while (udpB.receive(udpIn) == null) {
            Thread.onSpinWait();
        }
        return udpIn.position();
    }
}
