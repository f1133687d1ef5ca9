package io.regmem.registration.fuzz;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.AddressHandle;
import io.regmem.registration.AhAttributes;
import io.regmem.registration.DatagramDrop;
import io.regmem.registration.Opcode;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import io.regmem.registration.testkit.Providers;
import io.regmem.registration.testkit.UdNode;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;

/**
 * The datagram part of the API fuzz: three devices with one UD QP each (Q_Keys differing), random
 * receives of random sizes, unicast and multicast sends of random lengths (some over the path MTU)
 * with right, wrong and "own" Q_Keys to live and dead QP numbers, attaches and detaches, refused
 * posts, QPs destroyed and made again; after each step the model says which receive each datagram
 * lands in (byte-checked) and which drop counter moves, and the run fails at the first difference.
 */
final class UdModelFuzz implements AutoCloseable {
    private static final int MTU = 1024;
    private static final int[] RECEIVE_SIZES = {20, 40, 48, 100, 300, 40 + MTU};
    private final long seed;
    private final SplittableRandom rnd;
    private final UdNode[] nodes = new UdNode[3];
    private final Side[] sides = new Side[3];
    private final InetAddress group;
    private final WorkRequest wr = new WorkRequest(1);
    private final Map<String, Integer> counts = new TreeMap<>();
    private final ArrayDeque<String> history = new ArrayDeque<>();
    /** The completions each node's CQ gave after a send, in order. */
    private final List<List<WorkCompletion>> arrived = List.of(new ArrayList<>(), new ArrayList<>(), new ArrayList<>());
    private int op;

    /** One QP and what the model knows of it. */
    private final class Side {
        final int index;
        QueuePair qp;
        final ArrayDeque<int[]> receives = new ArrayDeque<>(); // {slot, size}
        final HashSet<Integer> usedSlots = new HashSet<>();
        boolean member;
        final EnumMap<DatagramDrop, Long> drops = new EnumMap<>(DatagramDrop.class);
        AddressHandle unicast;
        AddressHandle multicast;

        Side(int index) {
            this.index = index;
            for (DatagramDrop d : DatagramDrop.values()) {
                drops.put(d, 0L);
            }
        }

        void create() {
            QpInitAttributes attrs = new QpInitAttributes().maxSendWr(8).maxRecvWr(16);
            if (index == 2) {
                attrs.qkey(0x42);
            }
            if (index == 0) {
                attrs.blockSelfMulticastLoopback(true);
            }
            qp = nodes[index].qp(attrs);
            receives.clear();
            usedSlots.clear();
            member = false;
        }

        int qkey() {
            return index == 2 ? 0x42 : QpInitAttributes.RDMA_UDP_QKEY;
        }
    }

    UdModelFuzz(long seed) throws UnknownHostException {
        this.seed = seed;
        this.rnd = new SplittableRandom(seed);
        this.group = InetAddress.getByName("239.79.0." + (1 + (int) (Math.abs(seed) % 200)));
        for (int i = 0; i < 3; i++) {
            nodes[i] = new UdNode(Map.of("activeMtu", String.valueOf(MTU)), 64);
            sides[i] = new Side(i);
            sides[i].create();
        }
        for (int i = 0; i < 3; i++) {
            sides[i].unicast = nodes[i].ah(nodes[(i + 1) % 3].device.datagramAddress());
            sides[i].multicast = nodes[i].ah(AhAttributes.of(group));
        }
    }

    Map<String, Integer> counts() {
        return counts;
    }

    void run(int n) {
        for (op = 0; op < n; op++) {
            int k = rnd.nextInt(100);
            Side s = sides[rnd.nextInt(3)];
            if (k < 30) {
                postRecv(s);
            } else if (k < 55) {
                send(s, false);
            } else if (k < 75) {
                send(s, true);
            } else if (k < 85) {
                membership(s);
            } else if (k < 95) {
                badPost(s);
            } else {
                recreate(s);
            }
        }
    }

    private void note(String what) {
        counts.merge(what.split(" ")[0], 1, Integer::sum);
        history.add(op + ": " + what);
        if (history.size() > 30) {
            history.removeFirst();
        }
    }

    private AssertionError mismatch(String what) {
        return new AssertionError("datagram fuzz (seed " + seed + ", replay with -Dregmem.fuzz.seed=" + seed + ", op " + op
                + "): " + what + "\nlast operations:\n  " + String.join("\n  ", history));
    }

    private void postRecv(Side s) {
        if (s.receives.size() == 16) {
            return;
        }
        int slot;
        do {
            slot = rnd.nextInt(63); // slot 63 is the send slot
        } while (s.usedSlots.contains(slot));
        int size = RECEIVE_SIZES[rnd.nextInt(RECEIVE_SIZES.length)];
        note("recv " + s.index + " slot " + slot + " size " + size);
        nodes[s.index].postRecv(s.qp, slot, size);
        s.usedSlots.add(slot);
        s.receives.add(new int[] {slot, size});
    }

    private void send(Side from, boolean toGroup) {
        int length = rnd.nextInt(8) == 0 ? MTU + 1 + rnd.nextInt(64) : rnd.nextInt(320);
        Side to = sides[(from.index + 1) % 3];
        int qpn = toGroup ? AhAttributes.MULTICAST_QPN : rnd.nextInt(10) == 0 ? 0x0FFFFF : to.qp.qpNum();
        int choice = rnd.nextInt(4);
        int qkey = choice == 0 ? 0x8000_0000 : choice == 1 ? 0x42 : QpInitAttributes.RDMA_UDP_QKEY;
        int effective = qkey < 0 ? from.qkey() : qkey;
        byte fill = (byte) (op * 31 + 7);
        UdNode n = nodes[from.index];
        n.slot(63).asSlice(0, Math.max(length, 1)).fill(fill);
        note((toGroup ? "multicast " : "unicast ") + from.index + " -> " + (toGroup ? "group" : Integer.toHexString(qpn))
                + " length " + length + " qkey 0x" + Integer.toHexString(qkey));
        from.qp.postSend(n.send(wr, 63, length).ud(toGroup ? from.multicast : from.unicast, qpn, qkey));
        for (List<WorkCompletion> got : arrived) {
            got.clear();
        }
        WorkCompletion sent = null;
        for (int tries = 0; sent == null && tries < 1000; tries++) { // the sender's poll executes it
            WorkCompletion wc = n.take();
            if (wc != null && wc.opcode() == Opcode.SEND) {
                sent = wc;
            } else if (wc != null) {
                arrived.get(from.index).add(wc);
            }
        }
        if (sent == null || sent.status() != WcStatus.SUCCESS || sent.qp() != from.qp) {
            throw mismatch("the send completed " + sent);
        }
        List<Side> targets = new ArrayList<>();
        if (length > MTU) {
            counts.merge("over-MTU", 1, Integer::sum); // never sent
        } else if (toGroup) {
            for (Side s : sides) {
                if (s.member && !(s == from && s.index == 0)) {
                    targets.add(s);
                }
            }
        } else if (qpn == to.qp.qpNum()) {
            targets.add(to);
        } else { // counted where it was found missing: the sender's fabric (soft), the destination device (UDP)
            (Providers.datagramsCrossANetwork() ? to : from).drops.merge(DatagramDrop.NO_QP, 1L, Long::sum);
        }
        int[] expected = new int[sides.length];
        List<int[]> heads = new ArrayList<>();
        for (Side t : targets) {
            int[] head = expectedOutcome(t, length, effective);
            heads.add(head);
            if (head != null) {
                expected[t.index]++;
            }
        }
        collect(expected);
        for (int i = 0; i < targets.size(); i++) {
            if (heads.get(i) != null) {
                checkDelivery(from, targets.get(i), heads.get(i), length, fill);
            }
        }
        for (Side s : sides) {
            if (!arrived.get(s.index).isEmpty()) {
                throw mismatch("QP " + s.index + ": unexpected completions " + arrived.get(s.index));
            }
            for (DatagramDrop d : DatagramDrop.values()) {
                long got = nodes[s.index].device.counters().datagramsDropped(d);
                if (got != s.drops.get(d)) {
                    throw mismatch("device " + s.index + ": " + d + " drops " + got + ", the model says " + s.drops.get(d));
                }
            }
        }
    }

    /**
     * Takes the completions that arrive until each side has the {@code expected} number and each
     * device's drop counters reached the model's (at once on soft; a provider over UDP delivers when
     * its devices are progressed), for up to 10 s.
     */
    private void collect(int[] expected) {
        long deadline = System.nanoTime() + 10_000_000_000L;
        boolean done = false;
        while (!done && System.nanoTime() < deadline) {
            done = true;
            for (Side s : sides) {
                WorkCompletion wc;
                while ((wc = nodes[s.index].take()) != null) {
                    arrived.get(s.index).add(wc);
                }
                if (arrived.get(s.index).size() < expected[s.index]) {
                    done = false;
                }
                for (DatagramDrop d : DatagramDrop.values()) {
                    if (nodes[s.index].device.counters().datagramsDropped(d) < s.drops.get(d)) {
                        done = false;
                    }
                }
            }
        }
    }

    /**
     * What the model says a datagram to {@code t} does: the receive it lands in (head of the queue),
     * or null when it is dropped (the drop recorded in the model).
     */
    private int[] expectedOutcome(Side t, int length, int qkey) {
        int[] head = t.receives.peek();
        DatagramDrop drop = qkey != t.qkey() ? DatagramDrop.QKEY : head == null ? DatagramDrop.NO_RECEIVE
                : head[1] < 40 + length ? DatagramDrop.TOO_SMALL : null;
        if (drop != null) {
            t.drops.merge(drop, 1L, Long::sum);
            counts.merge("drop." + drop, 1, Integer::sum);
            return null;
        }
        t.receives.poll();
        return head;
    }

    private void checkDelivery(Side from, Side t, int[] head, int length, byte fill) {
        WorkCompletion wc = arrived.get(t.index).isEmpty() ? null : arrived.get(t.index).removeFirst();
        if (wc == null || wc.qp() != t.qp || wc.status() != WcStatus.SUCCESS || wc.wrId() != head[0]
                || wc.byteLen() != 40 + length || wc.srcQp() != from.qp.qpNum() || !wc.withGrh()) {
            throw mismatch("QP " + t.index + ": expected the datagram in slot " + head[0] + " (" + (40 + length)
                    + " bytes from QP " + Integer.toHexString(from.qp.qpNum()) + "), got " + wc);
        }
        for (int i = 0; i < length; i++) {
            if (nodes[t.index].slot(head[0]).get(ValueLayout.JAVA_BYTE, 40 + i) != fill) {
                throw mismatch("QP " + t.index + ": byte " + i + " of the datagram in slot " + head[0] + " differs");
            }
        }
        t.usedSlots.remove(head[0]);
        counts.merge("delivered", 1, Integer::sum);
    }

    private void membership(Side s) {
        if (s.member && rnd.nextBoolean()) {
            note("detach " + s.index);
            s.qp.detachMulticast(group);
            s.member = false;
        } else if (!s.member && rnd.nextInt(4) == 0) {
            note("detach-unattached " + s.index);
            expectFailure(Errno.EINVAL, () -> s.qp.detachMulticast(group));
        } else {
            note("attach " + s.index + (s.member ? " again" : ""));
            s.qp.attachMulticast(group);
            s.member = true;
        }
    }

    private void badPost(Side s) {
        UdNode n = nodes[s.index];
        int before = s.qp.outstandingSends();
        switch (rnd.nextInt(4)) {
            case 0 -> {
                note("bad RDMA_WRITE " + s.index);
                expectFailure(Errno.EINVAL, () -> s.qp.postSend(n.send(wr, 63, 8).opcode(Opcode.RDMA_WRITE)
                        .ud(s.unicast, 0x100, 0)));
            }
            case 1 -> {
                note("bad no-destination " + s.index);
                expectFailure(Errno.EINVAL, () -> s.qp.postSend(n.send(wr, 63, 8)));
            }
            case 2 -> {
                note("bad group-QPN-to-unicast " + s.index);
                expectFailure(Errno.EINVAL, () -> s.qp.postSend(n.send(wr, 63, 8).ud(s.unicast, AhAttributes.MULTICAST_QPN,
                        0)));
            }
            default -> {
                note("bad foreign-AH " + s.index);
                AddressHandle foreign = sides[(s.index + 1) % 3].unicast;
                expectFailure(Errno.EINVAL, () -> s.qp.postSend(n.send(wr, 63, 8).ud(foreign, 0x100, 0)));
            }
        }
        if (s.qp.outstandingSends() != before || s.qp.state() != QueuePair.State.RTS) {
            throw mismatch("a refused post changed QP " + s.index);
        }
    }

    private void recreate(Side s) {
        note("recreate " + s.index + " (was QP " + Integer.toHexString(s.qp.qpNum()) + ")");
        s.qp.cmId().destroyQp();
        WorkCompletion wc = nodes[s.index].poll();
        if (wc != null) { // a destroyed QP's outstanding requests end with it, without completions (ibv_destroy_qp)
            throw mismatch("QP " + s.index + " destroyed: a completion " + wc);
        }
        s.create();
    }

    private void expectFailure(Errno errno, Runnable call) {
        try {
            call.run();
        } catch (RdmaException e) {
            if (e.errno() != errno) {
                throw mismatch("expected " + errno + ", got " + e);
            }
            return;
        }
        throw mismatch("expected " + errno + ", but it succeeded");
    }

    @Override
    public void close() {
        for (UdNode n : nodes) {
            n.close();
        }
    }
}
