package io.regmem.bench;

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
import java.util.Locale;
import java.util.Map;
import org.HdrHistogram.Histogram;

/**
 * One publisher process multicasting 64-byte messages, stamped with {@code System.nanoTime()}, at a
 * paced rate to subscriber processes of this host, each measuring the one-way latency of every message
 * it receives after the first quarter (the JIT's warm-up; the processes share the monotonic clock):
 * {@code regmem-ucx} or {@code regmem-shm} (a device's UD QP, its group attached: over UDP multicast,
 * or shm's shared-memory publication rings; each process's one thread spins), or {@code aeron-udp} or
 * {@code aeron-ipc} (Aeron 1.47 UDP multicast, or IPC, through the host's one media driver, as Aeron is
 * deployed: a process of its own, shared mode, its thread yielding when idle, or sleeping 1 ms between
 * duty cycles with {@code -Dfanout.driverIdle=sleep}; each client process's one thread spins), or the
 * peers of {@link FanoutPeers} ({@code aeron-ipc-copy}, {@code agrona-broadcast}). A regmem publisher's
 * pace starts once its first send returned (that send makes the publication and hands it to every
 * member, as an Aeron publisher waits until it is connected). Run by
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
    static final int SIZE = 64;
    private static final int RECEIVES = 1024;
    /** The IPv4 address whose interface carries the group (and binds a regmem device's datagrams): {@code -Dfanout.interface}. */
    static final String INTERFACE = System.getProperty("fanout.interface", "127.0.0.1");
    /** Each side times its own part of the one way too: {@code -Dfanout.parts=true}. */
    static final boolean PARTS = Boolean.getBoolean("fanout.parts");

    private MulticastFanout() {
    }

    public static void main(String[] args) throws Exception {
        String role = args[0];
        if (role.equals("driver")) {
            FanoutPeers.driver(args[1]);
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
        } else if (transport.equals("agrona-broadcast")) {
            if (role.equals("sub")) {
                FanoutPeers.broadcastSub(count);
            } else {
                FanoutPeers.broadcastPub(count, Long.parseLong(args[4]));
            }
        } else if (role.equals("sub")) {
            FanoutPeers.aeronSub(transport, group, count, System.getProperty("aeron.dir"));
        } else {
            FanoutPeers.aeronPub(transport, group, count, Long.parseLong(args[4]), System.getProperty("aeron.dir"));
        }
    }

    /** What a subscriber saw. */
    static final class Seen {
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
    static String parts(Histogram post) {
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
            long first = 0;
            for (long seq = 0; seq < count; seq++) {
                long due = start + (seq - 1) * 1_000_000_000L / rate;
                while (seq > 0 && System.nanoTime() < due) {
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
                if (seq == 0) { // the first send made the publication and handed it to every member: the pace starts
                    start = System.nanoTime();
                    first = start - stamp;
                }
            }
            double seconds = (System.nanoTime() - start) / 1e9;
            while (qp.outstandingSends() > 0) {
                cq.poll(wcs);
            }
            System.out.printf(Locale.ROOT, "SENT regmem-%s %d in %.3f s: %.0f messages/s (the first send %.1f ms)%s%n", provider,
                    count, seconds, count / seconds, first / 1e6, parts(post));
            ah.close();
            id.destroyQp();
            id.close();
            mr.close();
            cq.close();
            pd.close();
        }
    }
}
