package io.regmem.examples;

import io.regmem.registration.Access;
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
import io.regmem.registration.testkit.ChildSide;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.util.BitSet;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;

/**
 * A market-data feed between processes: a publisher multicasts sequenced ticks of 64 to 256 bytes
 * to a group, with a heartbeat naming the last tick every 100 ticks and after the last one; each
 * subscriber process detects a gap by sequence number (a tick that came after the one it expected, or
 * a heartbeat past it) and recovers the missed range from the publisher over a reliable connection,
 * the classic feed-plus-recovery shape. Run one publisher and any number of subscribers:
 * <pre>
 *   publisher  GROUP PROVIDER:LISTEN[,PROVIDER:LISTEN] TICKS RATE [device options]
 *   subscriber GROUP PROVIDER CONNECT TICKS RECEIVES STALL_MS [device options]
 * </pre>
 * The publisher multicasts from its first device and serves recovery on each of its listeners (an
 * shm one for subscribers of its host, a ucx one for the others); it starts when it reads {@code GO}.
 * An shm publisher opens its device with {@code multicastUdp=true}: its ticks reach shm subscribers
 * of its host through shared memory and every other subscriber over UDP multicast.
 * A subscriber keeps {@code RECEIVES} receives posted and stalls {@code STALL_MS} every 200 ticks (a
 * subscriber short of receives loses ticks, as one would while it is descheduled). Each side says
 * what it did on stdout ({@code REGMEM ...} lines); the end of its input ends it.
 */
public final class MarketDataFeed {
    static final int SLOT = 256 + 40;
    static final int HEARTBEAT = -1;

    private MarketDataFeed() {
    }

    /** A device with a PD, a CQ and {@code slots} registered slots of {@link #SLOT} bytes. */
    record Party(RdmaDevice device, ProtectionDomain pd, CompletionQueue cq, MemorySegment mem, MemoryRegion mr) {
        static Party open(Arena arena, String provider, Map<String, String> options, int slots) {
            RdmaDevice d = RdmaDevice.open(provider, options);
            ProtectionDomain pd = d.allocPd();
            MemorySegment mem = arena.allocate((long) SLOT * slots, 64);
            return new Party(d, pd, d.createCq(4 * slots), mem, pd.register(mem, Access.LOCAL_WRITE));
        }

        long address(long slot) {
            return mem.address() + SLOT * slot;
        }

        void postRecv(QueuePair qp, long slot, int bytes) {
            qp.postRecv(new WorkRequest(1).wrId(slot).addSge(address(slot), bytes, mr.lkey()));
        }

        void close() {
            mr.close();
            cq.close();
            pd.close();
            device.close();
        }
    }

    /** A tick's length: 64 to 256 bytes, by its number. */
    static int length(long seq) {
        return 64 + (int) (seq % 4) * 64;
    }

    /** Writes tick {@code seq} at {@code at}: its number, a price, and bytes of a pattern of its number. */
    static void writeTick(MemorySegment m, long at, long seq) {
        m.set(ValueLayout.JAVA_LONG_UNALIGNED, at, seq);
        m.set(ValueLayout.JAVA_LONG_UNALIGNED, at + 8, 10_000 + seq);
        for (int b = 16; b < length(seq); b++) {
            m.set(ValueLayout.JAVA_BYTE, at + b, (byte) (seq * 7 + b));
        }
    }

    /** True if the {@code bytes} at {@code at} are tick {@code seq} whole. */
    static boolean isTick(MemorySegment m, long at, long seq, long bytes) {
        if (bytes != length(seq) || m.get(ValueLayout.JAVA_LONG_UNALIGNED, at + 8) != 10_000 + seq) {
            return false;
        }
        for (int b = 16; b < bytes; b++) {
            if (m.get(ValueLayout.JAVA_BYTE, at + b) != (byte) (seq * 7 + b)) {
                return false;
            }
        }
        return true;
    }

    public static void main(String[] args) throws Exception {
        ConcurrentLinkedQueue<String> commands = ChildSide.commands();
        if (args[0].equals("publisher")) {
            MarketDataPublisher.run(args, commands);
        } else {
            subscriber(args, commands);
        }
    }

    private static void subscriber(String[] args, ConcurrentLinkedQueue<String> commands) throws Exception {
        InetAddress group = InetAddress.getByName(args[1]);
        String provider = args[2];
        String publisher = args[3];
        int ticks = Integer.parseInt(args[4]);
        int receives = Integer.parseInt(args[5]);
        long stallMs = Long.parseLong(args[6]);
        try (Arena arena = Arena.ofShared()) {
            Party p = Party.open(arena, provider, ChildSide.options(args, 7), receives + 64);
            UdParam[] joined = new UdParam[1];
            CmId feed = p.device.createCmId(PortSpace.UDP);
            feed.onEvent(e -> {
                joined[0] = e.type() == CmEvent.Type.MULTICAST_JOIN ? e.ud() : null;
                return false;
            });
            feed.bindAddr("127.0.0.1:0");
            QueuePair ud = feed.createQp(p.pd, QpInitAttributes.of(p.cq).maxRecvWr(receives));
            for (int i = 0; i < receives; i++) {
                p.postRecv(ud, i, SLOT);                                // each: the GRH area, then the tick
            }
            feed.joinMulticast(group, JoinFlag.FULLMEMBER);
            // The recovery line: a reliable connection to the publisher.
            CmId recovery = p.device.createCmId();
            List<CmEvent> events = new java.util.concurrent.CopyOnWriteArrayList<>();
            recovery.onEvent(e -> {
                events.add(e);
                return false;
            });
            QueuePair rc = recovery.createQp(p.pd, QpInitAttributes.of(p.cq).maxRecvWr(32).maxSendWr(32).rnrRetry(7));
            int rcBase = receives;
            for (int i = 0; i < 32; i++) {
                p.postRecv(rc, rcBase + i, SLOT);
            }
            recovery.connect(publisher);
            long deadline = System.nanoTime() + 20_000_000_000L;
            while (recovery.connState() != CmId.ConnState.CONNECTED) {
                if (System.nanoTime() > deadline || events.stream().anyMatch(e -> e.type() != CmEvent.Type.ESTABLISHED)) {
                    throw new IllegalStateException("no recovery connection to " + publisher + ": " + events);
                }
                Thread.onSpinWait();
            }
            ChildSide.say("READY " + (joined[0] != null ? "joined" : "not joined"));
            BitSet have = new BitSet(ticks);
            long expected = 0;
            long viaFeed = 0;
            long recovered = 0;
            long requests = 0;
            long wrong = 0;
            long requestedTo = -1;
            WorkRequest ask = new WorkRequest(1);
            WorkCompletion[] wcs = {new WorkCompletion()};
            boolean end = false;
            boolean complete = false;
            while (!end) {
                for (String c; (c = commands.poll()) != null; ) {
                    end |= c.equals("END");
                }
                if (p.cq.poll(wcs) == 0) {
                    Thread.onSpinWait();
                    continue;
                }
                WorkCompletion wc = wcs[0];
                if (wc.status() != WcStatus.SUCCESS) {
                    throw new IllegalStateException("a completion failed: " + wc);
                }
                if (wc.opcode() == Opcode.SEND) {
                    continue;                                       // a recovery request went
                }
                long slot = wc.wrId();
                long at = SLOT * slot;
                boolean fromFeed = wc.qp() == ud;
                long off = fromFeed ? 40 : 0;                       // a datagram starts with the GRH area
                long seq = p.mem.get(ValueLayout.JAVA_LONG_UNALIGNED, at + off);
                long last = -1;
                if (seq == HEARTBEAT) {
                    last = p.mem.get(ValueLayout.JAVA_LONG_UNALIGNED, at + off + 8);
                } else if (seq >= 0 && seq < ticks && !have.get((int) seq)) {
                    if (!isTick(p.mem, at + off, seq, wc.byteLen() - off)) {
                        wrong++;
                    }
                    have.set((int) seq);
                    if (fromFeed) {
                        viaFeed++;
                    } else {
                        recovered++;
                    }
                    last = seq - 1;                                 // everything before it should be here
                }
                p.postRecv(fromFeed ? ud : rc, slot, SLOT);
                while (expected < ticks && have.get((int) expected)) {
                    expected++;
                }
                int missing = have.nextClearBit((int) Math.max(expected, requestedTo + 1));
                if (last >= 0 && missing <= last) {                 // a gap not asked for yet: ask for it
                    long askSlot = rcBase + 32 + requests % 32;      // (a request's bytes stay until its send completed)
                    p.mem.set(ValueLayout.JAVA_LONG_UNALIGNED, SLOT * askSlot, missing);
                    p.mem.set(ValueLayout.JAVA_LONG_UNALIGNED, SLOT * askSlot + 8, last);
                    if (rc.tryPostSend(ask.reset().wrId(askSlot).opcode(Opcode.SEND).signaled(true)
                            .addSge(p.address(askSlot), 16, p.mr.lkey())) != QueuePair.BACK_PRESSURED) {
                        requestedTo = last;                         // (else asked again at the next completion)
                        requests++;
                    }
                }
                if (!complete && expected == ticks) {
                    complete = true;
                    ChildSide.say("COMPLETE feed=" + viaFeed + " recovered=" + recovered + " requests=" + requests + " wrong=" + wrong
                            + " dropped=" + p.device.counters().datagramsDropped(DatagramDrop.NO_RECEIVE)
                            + " lost=" + p.device.counters().datagramsDropped(DatagramDrop.LOST));
                }
                if (fromFeed && stallMs > 0 && seq > 0 && seq % 200 == 0) {
                    Thread.sleep(stallMs);                          // descheduled: the feed goes on without it
                }
            }
            recovery.disconnect();
            for (CmId id : List.of(recovery, feed)) {
                id.destroyQp();
                id.close();
            }
            p.close();
            ChildSide.say("CLEAN");
        }
    }
}
