package io.regmem.examples;

// example: market-data
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
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.util.ArrayList;
import java.util.List;

/**
 * A market-data feed: a publisher multicasts sequenced ticks to a group; subscriber B, short of
 * receives, loses some, sees the gap when the publisher's heartbeat names the last tick, and
 * recovers the missed range from the publisher over a reliable connection.
 */
public final class MarketDataExample {
    static final InetAddress GROUP = InetAddress.ofLiteral("239.1.1.1");

    /** One party: a soft device, its PD, a CQ and 64 registered slots of 64 bytes. */
    record Party(RdmaDevice device, ProtectionDomain pd, CompletionQueue cq, MemorySegment mem, MemoryRegion mr) {
        static Party open(Arena arena) {
            RdmaDevice d = RdmaDevice.open("soft");
            ProtectionDomain pd = d.allocPd();
            MemorySegment mem = arena.allocate(64 * 64, 64);
            return new Party(d, pd, d.createCq(256), mem, pd.register(mem, Access.LOCAL_WRITE));
        }

        long slot(long i) {
            return mem.address() + 64 * i;
        }

        /** Writes a message (two longs) into slot {@code i}. */
        void put(long i, long first, long second) {
            mem.set(ValueLayout.JAVA_LONG_UNALIGNED, 64 * i, first);
            mem.set(ValueLayout.JAVA_LONG_UNALIGNED, 64 * i + 8, second);
        }

        /** The long at byte {@code offset} of slot {@code i}. */
        long get(long i, long offset) {
            return mem.get(ValueLayout.JAVA_LONG_UNALIGNED, 64 * i + offset);
        }

        /** A UD QP on a bound UDP ID, joined to the group; {@code ud} gets the join's UdParam. */
        CmId join(JoinFlag flag, UdParam[] ud) {
            CmId id = device.createCmId(PortSpace.UDP);
            id.onEvent(e -> {
                ud[0] = e.type() == CmEvent.Type.MULTICAST_JOIN ? e.ud() : null;
                return false;
            });
            id.bindAddr("127.0.0.1");
            id.createQp(pd, QpInitAttributes.of(cq));
            id.joinMulticast(GROUP, flag);
            return id;
        }

        void postRecv(QueuePair qp, int slot, int bytes) {
            qp.postRecv(new WorkRequest(1).wrId(slot).addSge(slot(slot), bytes, mr.lkey()));
        }

        /** The completions there are now (a copy of each: the CQ reuses its array's objects). */
        List<long[]> drain() {
            List<long[]> got = new ArrayList<>();
            WorkCompletion[] wcs = {new WorkCompletion()};
            while (cq.poll(wcs) > 0) {
                got.add(new long[] {wcs[0].wrId(), wcs[0].opcode() == Opcode.SEND ? 0 : 1});
            }
            return got;
        }
    }

    public static void main(String[] args) throws Exception {
        try (Arena arena = Arena.ofShared()) {
            Party pub = Party.open(arena);
            Party a = Party.open(arena);
            Party b = Party.open(arena);
            UdParam[] ud = new UdParam[1];
            CmId feed = pub.join(JoinFlag.SENDONLY_FULLMEMBER, ud);   // sends to the group, receives none of it
            AddressHandle group = pub.pd.createAh(ud[0].ah());
            CmId subA = a.join(JoinFlag.FULLMEMBER, new UdParam[1]);
            CmId subB = b.join(JoinFlag.FULLMEMBER, new UdParam[1]);
            for (int i = 0; i < 16; i++) {
                a.postRecv(subA.qp(), i, 40 + 16);                  // each receive: the GRH area, then the tick
            }
            for (int i = 0; i < 4; i++) {
                b.postRecv(subB.qp(), i, 40 + 16);                  // B keeps only 4 receives posted
            }
            // The recovery line: a reliable connection from B to the publisher.
            CmId listener = pub.device.createCmId();
            listener.listen("market-data-recovery");
            CmId recoveryB = b.device.createCmId();
            QueuePair rcB = recoveryB.createQp(b.pd, QpInitAttributes.of(b.cq));
            recoveryB.connect("market-data-recovery");
            CmId recoveryPub = listener.getRequest();
            QueuePair rcPub = recoveryPub.createQp(pub.pd, QpInitAttributes.of(pub.cq));
            recoveryPub.accept();

            // The feed: ticks 0 to 9 (sequence number, price), then a heartbeat (-1, the last tick's number).
            WorkRequest send = new WorkRequest(1);
            for (long seq = 0; seq < 10; seq++) {
                pub.put(seq, seq, 100 + seq);
                feed.qp().postSend(send.reset().wrId(seq).opcode(Opcode.SEND).addSge(pub.slot(seq), 16, pub.mr.lkey())
                        .ud(group, ud[0].qpNum(), ud[0].qkey()));
                pub.drain();                                        // the send executes and completes
            }
            System.out.println("subscriber A: " + ticks(a, a.drain()));
            List<Long> seenB = ticks(b, b.drain());
            System.out.println("subscriber B: " + seenB + ", then no receive posted: "
                    + b.device.counters().datagramsDropped(DatagramDrop.NO_RECEIVE) + " dropped");
            for (int i = 0; i < 4; i++) {
                b.postRecv(subB.qp(), i, 40 + 16);                  // B catches up with its receives
            }
            pub.put(10, -1, 9);
            feed.qp().postSend(send.reset().wrId(10).opcode(Opcode.SEND).addSge(pub.slot(10), 16, pub.mr.lkey())
                    .ud(group, ud[0].qpNum(), ud[0].qkey()));
            pub.drain();
            a.drain();
            b.drain();
            long last = b.get(0, 40 + 8);                            // B's slot 0 took the heartbeat
            long from = seenB.getLast() + 1;
            System.out.println("subscriber B: the heartbeat says the last tick is " + last + ": recovering " + from + " to "
                    + last + " over RC");
            // B asks; the publisher answers with each missed tick over the reliable connection.
            pub.postRecv(rcPub, 20, 16);
            for (int i = 0; i < 8; i++) {
                b.postRecv(rcB, 20 + i, 16);
            }
            b.put(30, from, last);
            rcB.postSend(send.reset().wrId(30).opcode(Opcode.SEND).addSge(b.slot(30), 16, b.mr.lkey()));
            b.drain();
            pub.drain();
            for (long seq = pub.get(20, 0); seq <= pub.get(20, 8); seq++) {
                rcPub.postSend(send.reset().wrId(seq).opcode(Opcode.SEND).addSge(pub.slot(seq), 16, pub.mr.lkey()));
                pub.drain();
            }
            List<Long> recovered = new ArrayList<>();
            for (long[] wc : b.drain()) {
                recovered.add(b.get(wc[0], 0));
            }
            seenB.addAll(recovered);
            System.out.println("subscriber B: " + seenB + " (" + recovered.size() + " recovered)");

            recoveryB.disconnect();
            for (CmId id : List.of(recoveryB, recoveryPub, feed, subA, subB)) {
                id.destroyQp();
                id.close();
            }
            listener.close();
            group.close();
            for (Party p : List.of(pub, a, b)) {
                p.mr.close();
                p.cq.close();
                p.pd.close();
                p.device.close();
            }
        }
    }

    /** The sequence numbers of the ticks {@code p} received (receives only; each after its 40-byte GRH area). */
    static List<Long> ticks(Party p, List<long[]> completions) {
        List<Long> seqs = new ArrayList<>();
        for (long[] wc : completions) {
            if (wc[1] == 1) {
                seqs.add(p.get(wc[0], 40));
            }
        }
        return seqs;
    }
}
// end example
