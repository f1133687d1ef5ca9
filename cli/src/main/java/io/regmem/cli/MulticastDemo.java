package io.regmem.cli;

import io.regmem.registration.Access;
import io.regmem.registration.AddressHandle;
import io.regmem.registration.CmEvent;
import io.regmem.registration.CmId;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.DatagramDrop;
import io.regmem.registration.JoinFlag;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.Opcode;
import io.regmem.registration.PortSpace;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.UdParam;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.HdrHistogram.Histogram;
import picocli.CommandLine.Option;

/**
 * {@code regmem demo --multicast}: one publisher multicasts sequenced messages to a group whose
 * members each receive on a device and a thread of their own, as a market-data feed's subscribers do.
 * Each member checks the order and every byte, measures each message's one-way latency (the
 * publisher's send time is in the message), and counts what it had no receive for (the device's
 * drop counter). It ends with PASS when every member received or counted every message, in order,
 * byte-exact, and every device closed with nothing left.
 */
final class MulticastDemo {
    /** Receives each member keeps posted. */
    private static final int RECEIVES = 512;
    /** The publisher's send slots: a slot is written again only after its send completed. */
    private static final int SEND_SLOTS = 256;
    private static final int SEND_WR = 128;
    private static final int HEADER = 16;

    /** The multicast demo's options (a mixin of {@code demo}). */
    static final class Options {
        @Option(names = "--multicast", description = "Run the multicast demo instead of the four parts: one publisher, "
                + "--multicast-members subscribers, sequenced messages to one group (soft; ucx over the kernel's UDP; shm through shared-memory rings).")
        boolean enabled;

        @Option(names = "--multicast-members", description = "Group members, 1 to 16 (default: ${DEFAULT-VALUE}).",
                defaultValue = "3")
        int members;

        @Option(names = "--multicast-messages", description = "Messages the publisher sends, 1 to 1000000000 "
                + "(default: ${DEFAULT-VALUE}).", defaultValue = "200000")
        long messages;

        @Option(names = "--multicast-size", description = "Bytes per message, 16 to 1024 (default: ${DEFAULT-VALUE}).",
                defaultValue = "64")
        int size;

        @Option(names = "--multicast-rate", description = "Messages per second the publisher paces itself to, 0 for as "
                + "fast as it can, up to 10000000 (default: ${DEFAULT-VALUE}).", defaultValue = "100000")
        long rate;

        /** The options' ranges, checked before any work. */
        OptionCheck check(OptionCheck c) {
            return c.range("--multicast-members", members, 1, 16).range("--multicast-messages", messages, 1, 1_000_000_000)
                    .range("--multicast-size", size, HEADER, 1024).range("--multicast-rate", rate, 0, 10_000_000);
        }
    }

    private final Options o;
    private final String provider;
    private final Map<String, String> deviceOptions;
    private final InetAddress group;
    private final Arena arena = Arena.ofShared();
    private final List<Member> members = new ArrayList<>();
    private final AtomicBoolean published = new AtomicBoolean();

    MulticastDemo(Options o, String provider, Map<String, String> deviceOptions) throws Exception {
        this.o = o;
        this.provider = provider;
        this.deviceOptions = deviceOptions;
        this.group = InetAddress.getByName("239.255.77." + (1 + ProcessHandle.current().pid() % 250));
    }

    /** One side: a device, its PD, CQ, registered memory and a bound UDP ID with its UD QP. */
    private final class Side implements AutoCloseable {
        final RdmaDevice device;
        final ProtectionDomain pd;
        final CompletionQueue cq;
        final MemorySegment memory;
        final MemoryRegion mr;
        final CmId id;
        final QueuePair qp;
        final String role;
        CmEvent joined;

        Side(String role, int slots, int slotBytes, QpInitAttributes attrs, JoinFlag join) {
            this.role = role;
            device = RdmaDevice.open(provider, deviceOptions);
            pd = device.allocPd();
            cq = device.createCq(2048);
            memory = arena.allocate((long) slots * slotBytes, 64);
            mr = pd.register(memory, Access.LOCAL_WRITE);
            id = device.createCmId(PortSpace.UDP);
            id.onEvent(e -> {
                joined = e;
                return false;
            });
            id.bindAddr("127.0.0.1:0"); // (soft takes it as a name; ucx binds a port the system picks)
            qp = id.createQp(pd, attrs.sendCq(cq).recvCq(cq));
            if (join == JoinFlag.FULLMEMBER) {
                WorkRequest r = new WorkRequest(1);
                for (int i = 0; i < slots; i++) {
                    qp.postRecv(r.reset().wrId(i).addSge(memory.address() + (long) i * slotBytes, slotBytes, mr.lkey()));
                }
            }
            id.joinMulticast(group, join);
            if (joined == null || joined.type() != CmEvent.Type.MULTICAST_JOIN) {
                throw new IllegalStateException(role + ": the join was not reported: " + joined);
            }
        }

        @Override
        public void close() {
            id.leaveMulticast(group);
            id.destroyQp();
            id.close();
            mr.close();
            cq.close();
            pd.close();
        }
    }

    /** A subscriber: its side and what its thread saw. */
    private final class Member implements Runnable {
        final Side side;
        final int slotBytes;
        final Histogram latency = new Histogram(3_600_000_000_000L, 3);
        long received;
        long outOfOrder;
        long bytesWrong;
        volatile Throwable failed;

        Member(int index) {
            slotBytes = 40 + o.size;
            side = new Side("member " + index, RECEIVES, slotBytes, new QpInitAttributes().maxRecvWr(RECEIVES), JoinFlag.FULLMEMBER);
        }

        @Override
        public void run() {
            try {
                WorkCompletion[] wcs = new WorkCompletion[32];
                for (int i = 0; i < wcs.length; i++) {
                    wcs[i] = new WorkCompletion();
                }
                WorkRequest repost = new WorkRequest(1);
                long last = -1;
                int idle = 0;
                while (true) {
                    int n = side.cq.poll(wcs);
                    if (n == 0) {
                        if (published.get() && ++idle > 1000) {
                            return; // the publisher is done and its sends completed: everything was placed
                        }
                        Thread.yield();
                        continue;
                    }
                    idle = 0;
                    long now = System.nanoTime();
                    for (int k = 0; k < n; k++) {
                        WorkCompletion wc = wcs[k];
                        if (wc.status() != WcStatus.SUCCESS) {
                            throw new IllegalStateException(side.role + ": a receive completed " + wc);
                        }
                        long at = wc.wrId() * slotBytes;
                        long seq = side.memory.get(ValueLayout.JAVA_LONG_UNALIGNED, at + 40);
                        latency.recordValue(Math.max(0, now - side.memory.get(ValueLayout.JAVA_LONG_UNALIGNED, at + 48)));
                        if (seq <= last) {
                            outOfOrder++;
                        }
                        last = seq;
                        for (int b = HEADER; b < o.size; b++) {
                            if (side.memory.get(ValueLayout.JAVA_BYTE, at + 40 + b) != (byte) (seq + b)) {
                                bytesWrong++;
                                break;
                            }
                        }
                        received++;
                        side.qp.postRecv(repost.reset().wrId(wc.wrId()).addSge(side.memory.address() + at, slotBytes,
                                side.mr.lkey()));
                    }
                }
            } catch (Throwable t) {
                failed = t;
            }
        }
    }

    /**
     * {@code demo --multicast}: exit status 0 on PASS, 1 on FAIL, 2 if the provider carries no
     * datagrams (said in one line on {@code err}).
     */
    static int main(Options o, String provider, Map<String, String> deviceOptions, PrintStream out, PrintWriter err)
            throws Exception {
        try (RdmaDevice probe = RdmaDevice.open(provider, deviceOptions)) {
            if (!probe.supportsDatagrams() || probe.attributes().maxMcastGroups() == 0) {
                err.println("regmem demo: --multicast needs a provider that carries datagrams and multicast (soft, shm, ucx); "
                        + provider + " carries none");
                return OptionCheck.USAGE;
            }
        }
        List<String> failures = new ArrayList<>();
        try {
            new MulticastDemo(o, provider, deviceOptions).run(out, failures);
        } catch (RuntimeException e) {
            failures.add("stopped by " + e);
        }
        out.println();
        out.println(failures.isEmpty()
                ? "PASS: every message received or counted as dropped or lost, in order, every byte checked, nothing leaked "
                        + "(multicast)"
                : "FAIL: " + String.join("; ", failures));
        return failures.isEmpty() ? 0 : 1;
    }

    /** Runs the demo; the failures go into {@code failures}. */
    void run(PrintStream out, List<String> failures) throws Exception {
        List<Side> sides = new ArrayList<>();
        List<RdmaDevice> devices = new ArrayList<>();
        try {
            for (int i = 1; i <= o.members; i++) {
                Member m = new Member(i);
                members.add(m);
                sides.add(m.side);
            }
            Side pub = new Side("publisher", SEND_SLOTS, o.size, new QpInitAttributes().maxSendWr(SEND_WR).signalAll(true),
                    JoinFlag.SENDONLY_FULLMEMBER);
            sides.add(pub);
            sides.forEach(s -> devices.add(s.device));
            out.printf(Locale.ROOT, "Multicast on the %s provider: 1 publisher, %d member(s) (each a device and a thread of "
                    + "its own, %d receives posted), %,d messages of %d B to %s, %s; the publisher spins, the members "
                    + "poll and yield when idle%n", provider, o.members, RECEIVES, o.messages, o.size, group.getHostAddress(),
                    o.rate == 0 ? "unpaced" : String.format(Locale.ROOT, "paced at %,d/s", o.rate));
            List<Thread> threads = new ArrayList<>();
            for (Member m : members) {
                threads.add(Thread.ofPlatform().name("regmem-demo-" + m.side.role.replace(' ', '-')).start(m));
            }
            double seconds = publish(pub);
            published.set(true);
            for (Thread t : threads) {
                t.join();
            }
            out.printf(Locale.ROOT, "Publisher: %,d messages in %.3f s: %,.0f messages/s; every send completed%n", o.messages,
                    seconds, o.messages / seconds);
            for (Member m : members) {
                report(out, m, failures);
            }
        } finally {
            AtomicReference<RuntimeException> closing = new AtomicReference<>();
            for (Side s : sides) {
                try {
                    s.close();
                } catch (RuntimeException e) {
                    closing.compareAndSet(null, e);
                }
            }
            StringBuilder line = new StringBuilder("Devices:");
            for (int i = 0; i < devices.size(); i++) {
                RdmaDevice d = devices.get(i);
                int live = d.resources().survivors().size();
                line.append(i == 0 ? " " : "; ").append(d.name()).append(" (").append(sides.get(i).role).append("): ")
                        .append(live == 0 ? "no live objects" : live + " live objects");
                if (live != 0) {
                    failures.add(d.name() + " has live objects");
                }
                d.close();
            }
            arena.close();
            out.println(line);
            if (closing.get() != null) {
                throw closing.get();
            }
        }
    }

    /** Sends every message (sequence number, send time, a pattern), polling the send completions; the seconds it took. */
    private double publish(Side pub) {
        UdParam ud = pub.joined.ud();
        AddressHandle ah = pub.pd.createAh(ud.ah());
        try {
            WorkRequest wr = new WorkRequest(1);
            WorkCompletion[] wcs = {new WorkCompletion(), new WorkCompletion(), new WorkCompletion(), new WorkCompletion()};
            long completed = 0;
            long start = System.nanoTime();
            for (long seq = 0; seq < o.messages; seq++) {
                if (o.rate > 0) {
                    long due = start + seq * 1_000_000_000L / o.rate;
                    while (System.nanoTime() - due < 0) {
                        completed += sent(pub, wcs);
                        Thread.onSpinWait();
                    }
                }
                long at = (seq % SEND_SLOTS) * o.size;
                for (int b = HEADER; b < o.size; b++) {
                    pub.memory.set(ValueLayout.JAVA_BYTE, at + b, (byte) (seq + b));
                }
                pub.memory.set(ValueLayout.JAVA_LONG_UNALIGNED, at, seq);
                pub.memory.set(ValueLayout.JAVA_LONG_UNALIGNED, at + 8, System.nanoTime());
                wr.reset().wrId(seq).opcode(Opcode.SEND).addSge(pub.memory.address() + at, o.size, pub.mr.lkey())
                        .ud(ah, ud.qpNum(), ud.qkey());
                while (pub.qp.tryPostSend(wr) == QueuePair.BACK_PRESSURED) {
                    completed += sent(pub, wcs);
                }
                completed += sent(pub, wcs);
            }
            while (completed < o.messages) {
                completed += sent(pub, wcs);
            }
            return (System.nanoTime() - start) / 1e9;
        } finally {
            ah.close();
        }
    }

    private static int sent(Side pub, WorkCompletion[] wcs) {
        int n = pub.cq.poll(wcs);
        for (int k = 0; k < n; k++) {
            if (wcs[k].status() != WcStatus.SUCCESS) {
                throw new IllegalStateException("publisher: a send completed " + wcs[k]);
            }
        }
        return n;
    }

    private void report(PrintStream out, Member m, List<String> failures) {
        long dropped = m.side.device.counters().datagramsDropped(DatagramDrop.NO_RECEIVE);
        long lost = m.side.device.counters().datagramsDropped(DatagramDrop.LOST);
        long otherDrops = m.side.device.counters().datagramsDropped() - dropped - lost;
        long unseen = o.messages - m.received - dropped - lost; // ucx: lost at the very end of the stream, no later one shows it
        out.printf(Locale.ROOT, "  %s: received %,d, dropped %,d (no receive posted)%s, out of order %d, bytes wrong %d; "
                        + "one-way latency p50 %,d ns, p99 %,d ns, max %,d ns%n", m.side.role, m.received, dropped,
                lost + unseen == 0 ? "" : String.format(Locale.ROOT, ", lost on the way %,d (%,d of them at the end, unseen)",
                        lost + unseen, unseen), m.outOfOrder,
                m.bytesWrong, m.latency.getValueAtPercentile(50), m.latency.getValueAtPercentile(99), m.latency.getMaxValue());
        if (m.failed != null) {
            failures.add(m.side.role + " failed: " + m.failed);
        }
        // soft never loses one; shm loses only what a lapping ring overwrote, counted when the member reads the latest;
        // ucx: the kernel may drop datagrams, and what it drops at the very end of the stream is not seen
        boolean mayLose = !provider.equals("soft");
        boolean mayLoseUnseen = provider.equals("ucx");
        if (unseen < 0 || (!mayLoseUnseen && unseen != 0) || (!mayLose && lost != 0) || otherDrops != 0) {
            failures.add(m.side.role + ": " + m.received + " received, " + dropped + " dropped and " + lost + " lost of "
                    + o.messages + " (other drops " + otherDrops + ")");
        }
        if (m.outOfOrder != 0 || m.bytesWrong != 0) {
            failures.add(m.side.role + ": " + m.outOfOrder + " out of order, " + m.bytesWrong + " with wrong bytes");
        }
    }
}
