package io.regmem.examples;

import io.regmem.registration.AddressHandle;
import io.regmem.registration.CmEvent;
import io.regmem.registration.CmId;
import io.regmem.registration.JoinFlag;
import io.regmem.registration.Opcode;
import io.regmem.registration.PortSpace;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.UdParam;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import io.regmem.registration.testkit.ChildSide;
import java.lang.foreign.Arena;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;

/**
 * The publisher of {@link MarketDataFeed}: multicasts the ticks, paced, from its first device, with a
 * heartbeat ({@link MarketDataFeed#HEARTBEAT}, the last tick's number) every 100 ticks and every 50 ms
 * after the last; serves each recovery request (a range) on its reliable connections by sending
 * every tick of the range again, as many at a time as the connection's send queue takes.
 */
final class MarketDataPublisher {
    private static final int RC_RECEIVES = 8;

    private MarketDataPublisher() {
    }

    /** A recovery connection and the range it is being sent. */
    private static final class Recovery {
        final MarketDataFeed.Party party;
        final CmId id;
        final QueuePair qp;
        final long base;
        long next = 0;
        long to = -1;

        Recovery(MarketDataFeed.Party party, CmId id, long base) {
            this.party = party;
            this.id = id;
            this.base = base;
            this.qp = id.createQp(party.pd(), QpInitAttributes.of(party.cq()).maxRecvWr(RC_RECEIVES).maxSendWr(128)
                    .rnrRetry(7)); // (7: retried until the subscriber posts a receive again)
            for (int i = 0; i < RC_RECEIVES; i++) {
                party.postRecv(qp, base + i, 16);
            }
        }
    }

    static void run(String[] args, ConcurrentLinkedQueue<String> commands) throws Exception {
        InetAddress group = InetAddress.getByName(args[1]);
        String[] listens = args[2].split(",");
        int ticks = Integer.parseInt(args[3]);
        long rate = Long.parseLong(args[4]);
        Map<String, String> options = ChildSide.options(args, 5);
        int connectionsPerParty = 8;
        try (Arena arena = Arena.ofShared()) {
            List<MarketDataFeed.Party> parties = new ArrayList<>();
            List<CmId> listeners = new ArrayList<>();
            ConcurrentLinkedQueue<CmEvent> requests = new ConcurrentLinkedQueue<>();
            for (String l : listens) {
                String provider = l.substring(0, l.indexOf(':'));
                Map<String, String> own = new HashMap<>(options);
                if (provider.equals("shm")) {
                    own.put("multicastUdp", "true"); // the feed: shared memory to shm members here, UDP to the rest
                }
                MarketDataFeed.Party p = MarketDataFeed.Party.open(arena, provider, own,
                        ticks + connectionsPerParty * RC_RECEIVES + 1);
                parties.add(p);
                for (long seq = 0; seq < ticks; seq++) {
                    MarketDataFeed.writeTick(p.mem(), MarketDataFeed.SLOT * seq, seq); // what recovery sends again
                }
                CmId listener = p.device().createCmId();
                listener.onEvent(e -> {
                    if (e.type() == CmEvent.Type.CONNECT_REQUEST) {
                        requests.add(e);
                    }
                    return false;
                });
                listener.bindAddr(l.substring(l.indexOf(':') + 1));
                listener.listen();
                listeners.add(listener);
                ChildSide.say("LISTENING " + provider + " " + listener.localAddress());
            }
            MarketDataFeed.Party pub = parties.getFirst();
            UdParam[] joined = new UdParam[1];
            CmId feed = pub.device().createCmId(PortSpace.UDP);
            feed.onEvent(e -> {
                joined[0] = e.type() == CmEvent.Type.MULTICAST_JOIN ? e.ud() : null;
                return false;
            });
            feed.bindAddr("127.0.0.1:0");
            QueuePair out = feed.createQp(pub.pd(), QpInitAttributes.of(pub.cq()).maxSendWr(256));
            feed.joinMulticast(group, JoinFlag.SENDONLY_FULLMEMBER);  // sends to the group, receives none of it
            AddressHandle toGroup = pub.pd().createAh(joined[0].ah());
            List<Recovery> recoveries = new ArrayList<>();
            WorkRequest wr = new WorkRequest(1);
            WorkCompletion[] wcs = {new WorkCompletion()};
            long heartbeatSlot = ticks + connectionsPerParty * RC_RECEIVES;
            boolean heartbeatDue = false;
            boolean go = false;
            boolean end = false;
            long seq = 0;
            long start = 0;
            long nextHeartbeat = 0;
            long recoverySends = 0;
            while (!end) {
                for (String c; (c = commands.poll()) != null; ) {
                    end |= c.equals("END");
                    if (c.equals("GO") && !go) {
                        go = true;
                        start = System.nanoTime();
                    }
                }
                for (CmEvent e; (e = requests.poll()) != null; ) {    // a subscriber's recovery line
                    MarketDataFeed.Party p = parties.get(listeners.indexOf(e.listener()));
                    long used = recoveries.stream().filter(r -> r.party == p).count();
                    recoveries.add(new Recovery(p, e.id(), ticks + used * RC_RECEIVES));
                    e.id().accept();
                }
                if (go && seq < ticks && System.nanoTime() - start >= seq * 1_000_000_000L / rate) {
                    if (out.tryPostSend(wr.reset().wrId(-1).opcode(Opcode.SEND).signaled(true)
                            .addSge(pub.address(seq), MarketDataFeed.length(seq), pub.mr().lkey())
                            .ud(toGroup, joined[0].qpNum(), joined[0].qkey())) != QueuePair.BACK_PRESSURED) {
                        seq++;
                        heartbeatDue |= seq % 100 == 0;
                        if (seq == ticks) {
                            ChildSide.say("PUBLISHED ticks=" + seq);
                        }
                    }
                }
                if (go && seq > 0 && (heartbeatDue || seq == ticks && System.nanoTime() >= nextHeartbeat)) {
                    pub.mem().set(ValueLayout.JAVA_LONG_UNALIGNED, MarketDataFeed.SLOT * heartbeatSlot, MarketDataFeed.HEARTBEAT);
                    pub.mem().set(ValueLayout.JAVA_LONG_UNALIGNED, MarketDataFeed.SLOT * heartbeatSlot + 8, seq - 1);
                    if (out.tryPostSend(wr.reset().wrId(-2).opcode(Opcode.SEND).signaled(true)
                            .addSge(pub.address(heartbeatSlot), 16, pub.mr().lkey())
                            .ud(toGroup, joined[0].qpNum(), joined[0].qkey())) != QueuePair.BACK_PRESSURED) {
                        heartbeatDue = false;
                        nextHeartbeat = System.nanoTime() + 50_000_000L; // (after the last tick: every 50 ms)
                    }
                }
                for (Recovery r : recoveries) {                     // a range being sent again
                    while (r.next <= r.to && r.qp.tryPostSend(wr.reset().wrId(-3).opcode(Opcode.SEND).signaled(true)
                            .addSge(r.party.address(r.next), MarketDataFeed.length(r.next), r.party.mr().lkey()))
                            != QueuePair.BACK_PRESSURED) {
                        r.next++;
                        recoverySends++;
                    }
                }
                for (MarketDataFeed.Party p : parties) {
                    while (p.cq().poll(wcs) > 0) {
                        WorkCompletion wc = wcs[0];
                        if (wc.status() != WcStatus.SUCCESS) {
                            continue;                               // a subscriber went: its line errs, the feed goes on
                        }
                        if (wc.opcode() == Opcode.RECV) {           // a recovery request: [from, to]
                            Recovery r = recoveries.stream().filter(x -> x.qp == wc.qp()).findFirst().orElseThrow();
                            long at = MarketDataFeed.SLOT * wc.wrId();
                            long from = p.mem().get(ValueLayout.JAVA_LONG_UNALIGNED, at);
                            long to = Math.min(p.mem().get(ValueLayout.JAVA_LONG_UNALIGNED, at + 8), seq - 1);
                            r.next = r.next <= r.to ? Math.min(r.next, from) : from;
                            r.to = Math.max(r.to, to);
                            p.postRecv(r.qp, wc.wrId(), 16);
                        }
                    }
                }
            }
            ChildSide.say("RECOVERY SENT " + recoverySends + " ticks again");
            for (Recovery r : recoveries) {
                r.id.disconnect();
                r.id.destroyQp();
                r.id.close();
            }
            toGroup.close();
            feed.destroyQp();
            feed.close();
            for (CmId l : listeners) {
                l.close();
            }
            for (MarketDataFeed.Party p : parties) {
                p.close();
            }
            ChildSide.say("CLEAN");
        }
    }
}
