package io.regmem.registration.udp;

import io.regmem.registration.AhAttributes;
import io.regmem.registration.DatagramDrop;
import io.regmem.registration.Opcode;
import io.regmem.registration.WcStatus;
import io.regmem.registration.spi.GracePeriod;
import io.regmem.registration.spi.Grh;
import io.regmem.registration.spi.PostedWr;
import io.regmem.registration.spi.QpContext;
import io.regmem.registration.spi.Segments;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.DatagramChannel;
import java.util.concurrent.locks.ReentrantLock;
import org.agrona.collections.Int2IntHashMap;
import org.agrona.collections.Object2ObjectHashMap;

/**
 * What arrives on one of a device's sockets: each datagram is checked whole (length, format, tag)
 * before anything of it is used, then placed into the posted receive of each QP it is for, as a NIC's
 * receive path checks a UD packet (the Q_Key, a receive, room for the GRH area and the message), or
 * dropped and counted. A datagram whose destination QP's lock is busy stays in hand until the next
 * progress (the members already served are not served again). Used under the carrier's receive lock.
 */
final class UdpInbound {
    /** Hop limit written in the GRH (RoCE's default for a UD QP's address handle). */
    private static final int HOP_LIMIT = 64;
    /** Senders' addresses remembered, at most, before the memory of them starts again. */
    private static final int SOURCES = 1024;
    /** Datagrams taken from a socket per progress, at most. */
    private static final int BATCH = 64;
    /** The longest gap in a sender's sequence counted as lost (a longer one is a sender that started again). */
    static final int MAX_GAP = 1 << 20;
    private final UdpCarrier carrier;
    private final boolean fromGroups;
    private final ByteBuffer buf = ByteBuffer.allocateDirect(UdpWire.MAX_DATAGRAM + 1);
    private final MemorySegment seg = MemorySegment.ofBuffer(buf);
    private final Segments src = new Segments();
    private final Segments dst = new Segments();
    private final Grh grh = new Grh();
    private final UdpQp[] one = new UdpQp[1];
    private final Object2ObjectHashMap<InetSocketAddress, AhAttributes> sources = new Object2ObjectHashMap<>();
    /** The last sequence number of each sender QP, by sender address, on the unicast socket. */
    private final Object2ObjectHashMap<InetSocketAddress, Int2IntHashMap> unicastSenders = new Object2ObjectHashMap<>();
    private InetSocketAddress lastFrom;
    private boolean lastFromSelf;
    private AhAttributes lastSource;
    /** The sender whose sequences {@link #countGap} looked up last, and where they are. */
    private Object2ObjectHashMap<InetSocketAddress, Int2IntHashMap> gapSenders;
    private InetSocketAddress gapFrom;
    private Int2IntHashMap gapLast;
    /** That sender's QP and the last sequence number it sent (stored into {@link #gapLast} when another sender comes). */
    private int gapQpn = -1;
    private int gapSeq;
    /** The datagram in hand, and the members left to serve. */
    private boolean pending;
    private UdpQp[] targets;
    private int next;
    private int length;
    private int flags;
    private int trafficClass;
    private int srcQpn;
    private int qkey;
    private int imm;
    private boolean fromSelf;
    private InetAddress destination;
    private AhAttributes source;

    UdpInbound(UdpCarrier carrier, boolean fromGroups) {
        this.carrier = carrier;
        this.fromGroups = fromGroups;
    }

    /** Takes and places what arrived on {@code ch}, up to a batch; the datagrams taken. */
    int drain(DatagramChannel ch) {
        return drain(ch, null);
    }

    /** Takes and places what {@code ch} received, or else what {@code local}'s publications hold, up to a batch. */
    private int drain(DatagramChannel ch, LocalGroups local) {
        int work = 0;
        for (int i = 0; i < BATCH; i++) {
            if (!pending) {
                if (!(ch != null ? receive(ch) : receive(local))) {
                    return work;
                }
                work++;
                if (!pending) {
                    continue; // dropped, or for nobody here
                }
            }
            if (!deliver()) {
                return work; // a member's lock is busy: the rest at the next progress
            }
        }
        return work;
    }

    /** True if a datagram is in hand (a member's lock was busy). */
    boolean pending() {
        return pending;
    }

    /** Takes and places what the publications on this host hold, up to a batch; the datagrams taken. */
    int drainLocal(LocalGroups local) {
        return drain(null, local);
    }

    /** Takes the next datagram out of a publication on this host, and checks it; false if there is none. */
    private boolean receive(LocalGroups local) {
        int n = local.next(seg);
        if (n < 0) {
            return false;
        }
        check(n, local.from(), true);
        return true;
    }

    private boolean receive(DatagramChannel ch) {
        buf.clear();
        SocketAddress a;
        try {
            a = ch.receive(buf);
        } catch (IOException | RuntimeException e) { // closed (the device closes, the last group was left), or transient
            return false;
        }
        if (a == null) {
            return false;
        }
        check(buf.position(), (InetSocketAddress) a, false);
        return true;
    }

    /**
     * Checks the {@code n} bytes that arrived from {@code from} (out of a publication on this host if
     * {@code local}); keeps them in hand if a QP here takes them.
     */
    void check(int n, InetSocketAddress from, boolean local) {
        // (the header read as five 8-byte words, each field taken out of its word: UdpWire's layout)
        long w0 = seg.get(UdpWire.LONG, 0);
        if (n < UdpWire.HEADER + UdpWire.TAG || n > UdpWire.HEADER + UdpWire.MAX_MESSAGE + UdpWire.TAG
                || (int) w0 != UdpWire.MAGIC || (byte) (w0 >>> 32) != UdpWire.VERSION) {
            carrier.dropped(DatagramDrop.MALFORMED);
            return;
        }
        // (out of a ring on this host, the tag is not checked: only a device that proved the secret when it handed the
        // ring over can write it, sealed against every other writer)
        if (!local && SipHash.hash(carrier.k0, carrier.k1, seg, 0, n - UdpWire.TAG) != seg.get(UdpWire.LONG, n - UdpWire.TAG)) {
            carrier.dropped(DatagramDrop.UNAUTHENTICATED);
            return;
        }
        long w1 = seg.get(UdpWire.LONG, 8);
        long w2 = seg.get(UdpWire.LONG, 16);
        long w3 = seg.get(UdpWire.LONG, 24);
        long lo = seg.get(UdpWire.LONG, 32);
        int f = (int) (w0 >>> 40) & 0xFF;
        int s = (int) w1;
        int d = (int) (w1 >>> 32);
        boolean group = (f & UdpWire.F_MULTICAST) != 0;
        if ((f & ~UdpWire.FLAGS) != 0 || (w0 >>> 56) != 0 || group != fromGroups
                || s < 0 || s > UdpWire.MAX_QPN || (group ? d != UdpWire.MAX_QPN : d < 0 || d >= UdpWire.MAX_QPN)
                || (w3 >>> 32) != 0 || (!group && lo != 0)) {
            carrier.dropped(DatagramDrop.MALFORMED);
            return;
        }
        int seq = (int) w3;
        if (group) {
            UdpGroup g = carrier.group(lo);
            if (g == null) {
                return; // a group another socket of this host joined (the kernel hands it to every socket on the port)
            }
            if (!local && carrier.local != null && carrier.local.hears(from)) {
                return; // the same datagram comes out of its sender's publication on this host
            }
            countGap(g.senders, from, s, seq);
            targets = g.members;
            destination = g.group;
        } else {
            countGap(unicastSenders, from, s, seq);
            UdpQp q = carrier.qp(d);
            if (q == null) {
                carrier.dropped(DatagramDrop.NO_QP);
                return;
            }
            one[0] = q;
            targets = one;
            destination = carrier.endpoint.getAddress();
        }
        length = n - UdpWire.HEADER - UdpWire.TAG;
        flags = f;
        trafficClass = (int) (w0 >>> 48) & 0xFF;
        srcQpn = s;
        qkey = (int) w2;
        imm = (int) (w2 >>> 32);
        source = source(from);
        fromSelf = lastFromSelf;
        next = 0;
        pending = true;
    }

    /**
     * Counts the datagrams that sender QP {@code srcQpn} at {@code from} sent to this destination
     * before {@code seq} and that never came ({@link DatagramDrop#LOST}); a sequence that goes back,
     * or jumps by more than {@link #MAX_GAP}, is a sender that started again: nothing is counted.
     */
    private void countGap(Object2ObjectHashMap<InetSocketAddress, Int2IntHashMap> senders, InetSocketAddress from, int srcQpn,
                          int seq) {
        int before;
        if (senders == gapSenders && from == gapFrom && srcQpn == gapQpn) { // (a steady sender: no lookup, no store)
            before = gapSeq;
        } else {
            flushGap();
            Int2IntHashMap last = senders.get(from);
            if (last == null) {
                if (senders.size() >= SOURCES) {
                    senders.clear();
                }
                last = new Int2IntHashMap(0);
                senders.put(from, last);
            }
            gapSenders = senders;
            gapFrom = from;
            gapLast = last;
            gapQpn = srcQpn;
            before = last.get(srcQpn);
        }
        gapSeq = seq;
        if (before == 0) {
            return; // the first this device sees of that sender
        }
        long gap = (seq - before - 1) - (before < 0 && seq > 0 ? 1 : 0); // (the sequence skips 0)
        if (gap > 0 && gap <= MAX_GAP) {
            carrier.dropped(DatagramDrop.LOST, gap);
        }
    }

    /**
     * Stores the sequence of the sender {@link #countGap} followed last into its map (it kept it in a
     * field meanwhile); a sequence of 0, which no sender sends, forgets the sender (none seen yet), as
     * the map holds no 0.
     */
    private void flushGap() {
        if (gapLast == null) {
            return;
        }
        if (gapSeq == 0) {
            gapLast.remove(gapQpn);
        } else {
            gapLast.put(gapQpn, gapSeq);
        }
    }

    private AhAttributes source(InetSocketAddress from) {
        if (from == lastFrom) { // (the JDK hands back the same object for the same sender)
            return lastSource;
        }
        AhAttributes ah = sources.get(from);
        if (ah == null) {
            if (sources.size() >= SOURCES) {
                sources.clear();
            }
            ah = AhAttributes.of(from);
            sources.put(from, ah);
        }
        lastFrom = from;
        lastSource = ah;
        lastFromSelf = from.equals(carrier.endpoint);
        return ah;
    }

    /** Serves the members left; false if one's lock was busy (the datagram stays in hand). */
    boolean deliver() {
        for (; next < targets.length; next++) {
            UdpQp t = targets[next];
            ReentrantLock l = t.ctx.lock();
            boolean held = l.isHeldByCurrentThread(); // (a poll of its CQ holds it: a reentry would fence twice)
            if (!held && !l.tryLock()) {
                return false;
            }
            try {
                place(t.ctx);
            } catch (RuntimeException e) { // this QP's own fault (its memory): it alone errs
                t.ctx.fatal("placing a datagram failed: " + e);
            } finally {
                if (!held) {
                    l.unlock();
                }
            }
        }
        pending = false;
        targets = null;
        one[0] = null;
        return true;
    }

    /** Places the datagram in hand into {@code to}'s next receive, or drops it there (its lock held). */
    private void place(QpContext to) {
        if (to.isDestroyed() || to.isError()) {
            to.dropDatagram(DatagramDrop.NO_QP);
            return;
        }
        if (fromGroups && fromSelf && srcQpn == to.qpNum() && to.blocksSelfMulticastLoopback()) {
            return; // its own multicast, which it asked not to receive
        }
        if (length > to.pathMtu()) { // longer than any packet its path carries: not a datagram a sender may send
            to.dropDatagram(DatagramDrop.MALFORMED);
            return;
        }
        if (qkey != to.qkey()) {
            to.dropDatagram(DatagramDrop.QKEY);
            return;
        }
        PostedWr recv = to.nextRecv();
        if (recv == null) {
            to.dropDatagram(DatagramDrop.NO_RECEIVE);
            return;
        }
        GracePeriod.Reader reader = carrier.reader;
        reader.enter();
        try {
            if (!to.memory().gatherLocal(recv, dst, true)) {
                to.completeRecv(WcStatus.LOC_PROT_ERR, Opcode.RECV, 0, false, 0, false, 0); // its own bad buffer
                return;
            }
            long bytes = Grh.BYTES + (long) length;
            if (dst.total() < bytes) {
                to.dropDatagram(DatagramDrop.TOO_SMALL); // (the receive stays posted)
                return;
            }
            dst.truncate(bytes);
            boolean withImm = (flags & UdpWire.F_IMM) != 0;
            src.add(grh.fill(source.dgid(), destination, length, withImm, HOP_LIMIT, trafficClass), 0, Grh.BYTES);
            src.add(seg, UdpWire.HEADER, length);
            if (Segments.copy(reader, src, dst) != Segments.COPIED) {
                to.completeRecv(WcStatus.LOC_PROT_ERR, Opcode.RECV, 0, false, 0, false, 0);
                return;
            }
            to.completeDatagram(bytes, withImm, withImm ? imm : 0, (flags & UdpWire.F_SOLICITED) != 0, srcQpn, source);
        } finally {
            reader.exit();
            src.clear();
            dst.clear();
        }
    }
}
