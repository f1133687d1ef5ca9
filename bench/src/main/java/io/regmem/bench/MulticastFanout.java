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
import io.regmem.registration.DatagramDrop;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.Opcode;
import io.regmem.registration.PortSpace;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.nio.ByteBuffer;
import java.util.Locale;
import java.util.Map;
import org.HdrHistogram.Histogram;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.SleepingMillisIdleStrategy;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.YieldingIdleStrategy;

/**
 * One publisher process multicasting 64-byte messages, stamped with {@code System.nanoTime()}, at a
 * paced rate to subscriber processes of this host, each measuring the one-way latency of every message
 * it receives after the first quarter (the JIT's warm-up; the processes share the monotonic clock):
 * {@code regmem-ucx} or {@code regmem-shm} (a device's UD QP, its group attached: over UDP multicast,
 * or shm's shared-memory publication rings; each process's one thread spins), or {@code aeron-udp} or
 * {@code aeron-ipc} (Aeron 1.47 UDP multicast, or IPC, through the host's one media driver, as Aeron is
 * deployed: a process of its own, shared mode, its thread yielding when idle, or sleeping 1 ms between
 * duty cycles with {@code -Dfanout.driverIdle=sleep}; each client process's one thread spins). Run by
 * {@code bench/multicast-fanout.sh}. With {@code -Dfanout.parts=true} each side also reports its own
 * part of the one way (a clock reading more per post and per poll, so off by default): the publisher the time
 * from its stamp until its post ({@code tryPostSend} or {@code offer}) took the message, a subscriber
 * the time from the start of the poll that brought a message to its stamp's reading (the transfer
 * between the cores, then the receiving path), both after the first quarter:
 * <pre>
 *   driver DIR                     (Aeron's media driver in DIR, until its input ends; clients get -Daeron.dir=DIR)
 *   sub TRANSPORT GROUP COUNT      (prints READY, then RESULT ... once COUNT came or 3 s passed without one)
 *   pub TRANSPORT GROUP COUNT RATE (prints SENT ...)
 * </pre>
 */
public final class MulticastFanout {
    private static final int SIZE = 64;
    private static final int RECEIVES = 1024;
    private static final int PORT = 40470;
    /** The IPv4 address whose interface carries the group (and binds a regmem device's datagrams): {@code -Dfanout.interface}. */
    private static final String INTERFACE = System.getProperty("fanout.interface", "127.0.0.1");
    /** Each side times its own part of the one way too: {@code -Dfanout.parts=true}. */
    private static final boolean PARTS = Boolean.getBoolean("fanout.parts");

    private MulticastFanout() {
    }

    public static void main(String[] args) throws Exception {
        String role = args[0];
        if (role.equals("driver")) {
            driver(args[1]);
            return;
        }
        String transport = args[1];
        InetAddress group = InetAddress.getByName(args[2]);
        long count = Long.parseLong(args[3]);
        if (transport.startsWith("regmem-")) {
            String provider = transport.substring("regmem-".length());
            if (role.equals("sub")) {
                regmemSub(provider, group, count);
            } else {
                regmemPub(provider, group, count, Long.parseLong(args[4]));
            }
        } else if (role.equals("sub")) {
            aeronSub(transport, group, count, System.getProperty("aeron.dir"));
        } else {
            aeronPub(transport, group, count, Long.parseLong(args[4]), System.getProperty("aeron.dir"));
        }
    }

    /** What a subscriber saw. */
    private static final class Seen {
        final Histogram latency = new Histogram(60_000_000_000L, 3);
        final Histogram poll = new Histogram(60_000_000_000L, 3);
        /** When the poll under way started (0: a message of it was timed already). */
        long pollStart;
        long received;
        long last = -1;
        long outOfOrder;
        long lastAt = System.nanoTime();

        /** Messages before this one warm the JIT up: counted, not in the latency. */
        long measuredFrom;

        void record(long seq, long stamp) {
            long now = System.nanoTime();
            if (seq >= measuredFrom) {
                latency.recordValue(Math.max(0, now - stamp));
                if (pollStart != 0) {
                    poll.recordValue(now - pollStart);
                }
            }
            pollStart = 0;
            if (seq <= last) {
                outOfOrder++;
            }
            last = seq;
            received++;
            lastAt = now;
        }

        boolean done(long count) {
            return last == count - 1 || (received > 0 && System.nanoTime() - lastAt > 3_000_000_000L);
        }

        void report(String transport, long count) {
            System.out.printf(Locale.ROOT, "RESULT %s received %d of %d, out of order %d, one-way p50 %d ns, p99 %d ns, "
                    + "p99.9 %d ns, max %d ns%s%n", transport, received, count, outOfOrder, latency.getValueAtPercentile(50),
                    latency.getValueAtPercentile(99), latency.getValueAtPercentile(99.9), latency.getMaxValue(),
                    PARTS ? String.format(Locale.ROOT, "; the poll that brought it p50 %d ns, p90 %d ns",
                            poll.getValueAtPercentile(50), poll.getValueAtPercentile(90)) : "");
        }
    }

    /** The publisher's part ({@link #PARTS}), or nothing. */
    private static String parts(Histogram post) {
        return PARTS ? String.format(Locale.ROOT, "; stamp to post done p50 %d ns, p90 %d ns", post.getValueAtPercentile(50),
                post.getValueAtPercentile(90)) : "";
    }

    private static void regmemSub(String provider, InetAddress group, long count) {
        try (Arena arena = Arena.ofShared(); RdmaDevice dev = RdmaDevice.open(provider, Map.of("datagramBind", INTERFACE + ":0"))) {
            ProtectionDomain pd = dev.allocPd();
            CompletionQueue cq = dev.createCq(2 * RECEIVES);
            MemorySegment mem = arena.allocate((long) RECEIVES * (40 + SIZE), 64);
            MemoryRegion mr = pd.register(mem, Access.LOCAL_WRITE);
            CmId id = dev.createCmId(PortSpace.UDP);
            QueuePair qp = id.createQp(pd, QpInitAttributes.of(cq).maxRecvWr(RECEIVES));
            WorkRequest r = new WorkRequest(1);
            for (int i = 0; i < RECEIVES; i++) {
                qp.postRecv(r.reset().wrId(i).addSge(mem.address() + (long) i * (40 + SIZE), 40 + SIZE, mr.lkey()));
            }
            qp.attachMulticast(group);
            System.out.println("READY");
            System.out.flush();
            Seen seen = new Seen();
            seen.measuredFrom = count / 4;
            WorkCompletion[] wcs = new WorkCompletion[64];
            for (int i = 0; i < wcs.length; i++) {
                wcs[i] = new WorkCompletion();
            }
            while (!seen.done(count)) {
                if (PARTS) {
                    seen.pollStart = System.nanoTime();
                }
                int n = cq.poll(wcs);
                for (int k = 0; k < n; k++) {
                    long at = wcs[k].wrId() * (40 + SIZE) + 40;
                    seen.record(mem.get(ValueLayout.JAVA_LONG_UNALIGNED, at), mem.get(ValueLayout.JAVA_LONG_UNALIGNED, at + 8));
                    qp.postRecv(r.reset().wrId(wcs[k].wrId()).addSge(mem.address() + at - 40, 40 + SIZE, mr.lkey()));
                }
                if (n == 0) {
                    Thread.onSpinWait();
                }
            }
            seen.report("regmem-" + provider, count);
            System.out.println("DROPPED " + dev.counters().datagramsDropped() + " (no receive "
                    + dev.counters().datagramsDropped(DatagramDrop.NO_RECEIVE) + ", lost " + dev.counters().datagramsDropped(
                    DatagramDrop.LOST) + ")");
            qp.detachMulticast(group);
            id.destroyQp();
            id.close();
            mr.close();
            cq.close();
            pd.close();
        }
    }

    private static void regmemPub(String provider, InetAddress group, long count, long rate) {
        try (Arena arena = Arena.ofShared(); RdmaDevice dev = RdmaDevice.open(provider, Map.of("datagramBind", INTERFACE + ":0"))) {
            ProtectionDomain pd = dev.allocPd();
            CompletionQueue cq = dev.createCq(512);
            MemorySegment mem = arena.allocate(256L * SIZE, 64);
            MemoryRegion mr = pd.register(mem, Access.LOCAL_WRITE);
            CmId id = dev.createCmId(PortSpace.UDP);
            QueuePair qp = id.createQp(pd, QpInitAttributes.of(cq).maxSendWr(256));
            AddressHandle ah = pd.createAh(AhAttributes.of(group));
            WorkRequest wr = new WorkRequest(1);
            WorkCompletion[] wcs = new WorkCompletion[64];
            for (int i = 0; i < wcs.length; i++) {
                wcs[i] = new WorkCompletion();
            }
            Histogram post = new Histogram(60_000_000_000L, 3);
            long start = System.nanoTime();
            for (long seq = 0; seq < count; seq++) {
                long due = start + seq * 1_000_000_000L / rate;
                while (System.nanoTime() < due) {
                    cq.poll(wcs);
                }
                long at = (seq & 255) * SIZE;
                mem.set(ValueLayout.JAVA_LONG_UNALIGNED, at, seq);
                long stamp = System.nanoTime();
                mem.set(ValueLayout.JAVA_LONG_UNALIGNED, at + 8, stamp);
                wr.reset().wrId(seq).opcode(Opcode.SEND).signaled(true).addSge(mem.address() + at, SIZE, mr.lkey())
                        .ud(ah, AhAttributes.MULTICAST_QPN, QpInitAttributes.RDMA_UDP_QKEY);
                while (qp.tryPostSend(wr) == QueuePair.BACK_PRESSURED) {
                    cq.poll(wcs);
                }
                if (PARTS && seq >= count / 4) {
                    post.recordValue(System.nanoTime() - stamp);
                }
            }
            double seconds = (System.nanoTime() - start) / 1e9;
            while (qp.outstandingSends() > 0) {
                cq.poll(wcs);
            }
            System.out.printf(Locale.ROOT, "SENT regmem-%s %d in %.3f s: %.0f messages/s%s%n", provider, count, seconds,
                    count / seconds, parts(post));
            ah.close();
            id.destroyQp();
            id.close();
            mr.close();
            cq.close();
            pd.close();
        }
    }

    /**
     * The driver thread's idle strategy, {@code -Dfanout.driverIdle}: {@code yield} (the default) or
     * {@code sleep} (1 ms between duty cycles: IPC moves no data through the driver, and on a machine
     * with fewer cores than spinning threads a yielding driver takes one from a client).
     */
    private static IdleStrategy driverIdle() {
        String idle = System.getProperty("fanout.driverIdle", "yield");
        return switch (idle) {
            case "yield" -> new YieldingIdleStrategy();
            case "sleep" -> new SleepingMillisIdleStrategy(1);
            default -> throw new IllegalArgumentException("fanout.driverIdle is yield or sleep, not " + idle);
        };
    }

    /** The host's one media driver for every Aeron process of the run, in {@code dir}, until its input ends. */
    private static void driver(String dir) throws Exception {
        try (MediaDriver driver = MediaDriver.launch(new MediaDriver.Context()
                .aeronDirectoryName(dir)
                .threadingMode(ThreadingMode.SHARED)
                .sharedIdleStrategy(driverIdle())
                .dirDeleteOnStart(true)
                .dirDeleteOnShutdown(true))) {
            System.out.println("READY " + driver.aeronDirectoryName());
            System.out.flush();
            while (System.in.read() >= 0) {
                Thread.onSpinWait(); // (until the script closes its input)
            }
        }
    }

    private static String channel(String transport, InetAddress group) {
        return transport.equals("aeron-ipc") ? "aeron:ipc"
                : "aeron:udp?endpoint=" + group.getHostAddress() + ":" + PORT + "|interface=" + INTERFACE;
    }

    private static void aeronSub(String transport, InetAddress group, long count, String dir) throws Exception {
        try (Aeron aeron = Aeron.connect(new Aeron.Context().aeronDirectoryName(dir));
             Subscription sub = aeron.addSubscription(channel(transport, group), 2001)) {
            System.out.println("READY");
            System.out.flush();
            Seen seen = new Seen();
            seen.measuredFrom = count / 4;
            FragmentHandler onMessage = (buffer, offset, length, header) ->
                    seen.record(buffer.getLong(offset), buffer.getLong(offset + 8));
            while (!seen.done(count)) {
                if (PARTS) {
                    seen.pollStart = System.nanoTime();
                }
                if (sub.poll(onMessage, 32) == 0) {
                    Thread.onSpinWait();
                }
            }
            seen.report(transport, count);
        }
    }

    private static void aeronPub(String transport, InetAddress group, long count, long rate, String dir) throws Exception {
        try (Aeron aeron = Aeron.connect(new Aeron.Context().aeronDirectoryName(dir));
             ExclusivePublication pub = aeron.addExclusivePublication(channel(transport, group), 2001)) {
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (!pub.isConnected() && System.nanoTime() < deadline) {
                Thread.yield();
            }
            UnsafeBuffer message = new UnsafeBuffer(ByteBuffer.allocateDirect(SIZE));
            Histogram post = new Histogram(60_000_000_000L, 3);
            long start = System.nanoTime();
            long backPressured = 0;
            for (long seq = 0; seq < count; seq++) {
                long due = start + seq * 1_000_000_000L / rate;
                while (System.nanoTime() < due) {
                    Thread.onSpinWait();
                }
                message.putLong(0, seq);
                long stamp = System.nanoTime();
                message.putLong(8, stamp);
                while (pub.offer(message, 0, SIZE) < 0) {
                    backPressured++;
                    Thread.onSpinWait();
                }
                if (PARTS && seq >= count / 4) {
                    post.recordValue(System.nanoTime() - stamp);
                }
            }
            double seconds = (System.nanoTime() - start) / 1e9;
            System.out.printf(Locale.ROOT, "SENT %s %d in %.3f s: %.0f messages/s (offers back-pressured %d)%s%n", transport,
                    count, seconds, count / seconds, backPressured, parts(post));
            Thread.sleep(500); // (the driver sends what is still in the term)
        }
    }
}
