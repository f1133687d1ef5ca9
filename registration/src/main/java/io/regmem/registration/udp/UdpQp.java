package io.regmem.registration.udp;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.AhAttributes;
import io.regmem.registration.DatagramDrop;
import io.regmem.registration.Opcode;
import io.regmem.registration.WcStatus;
import io.regmem.registration.spi.GracePeriod;
import io.regmem.registration.spi.PostedWr;
import io.regmem.registration.spi.ProviderQp;
import io.regmem.registration.spi.QpContext;
import io.regmem.registration.spi.Segments;
import java.lang.foreign.MemorySegment;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.concurrent.locks.ReentrantLock;
import org.agrona.collections.Object2ObjectHashMap;

/**
 * An unreliable-datagram QP carried over UDP ({@link UdpCarrier}): a send is gathered from the
 * QP's registered memory into its datagram buffer behind the {@link UdpWire} header, tagged and
 * handed to the kernel when it is posted (the post's thread, under the QP's execution lock, which the
 * post itself takes: {@link #postsUnderExecutionLock()}), and completes
 * then: {@code SUCCESS} once the kernel took it (UD is unreliable: what becomes of it later is not
 * the sender's to know), and, as on every provider, {@code SUCCESS} unsent when it is larger than
 * the path MTU ({@code LOC_LEN_ERR} with the device option that asks for it). A send the socket has
 * no room for stays queued until the next progress. Its receives are placed by the carrier.
 */
public final class UdpQp implements ProviderQp {
    final UdpCarrier carrier;
    final QpContext ctx;
    private final GracePeriod.Reader reader;
    private final boolean oversizeError;
    private final ByteBuffer out;
    private final MemorySegment outSeg;
    private final Segments src = new Segments();
    private final Segments dst = new Segments();
    /** Where this QP's datagrams went, by address handle: their socket address and sequence (lock held). */
    private static final class Destination {
        final InetSocketAddress to;
        final long groupLo;
        int seq;
        /** This QP's publication to the group on this host, once it sent there (kept while it is open). */
        LocalGroups.Claim claim;

        Destination(InetSocketAddress to, long groupLo) {
            this.to = to;
            this.groupLo = groupLo;
        }
    }

    /** Destinations remembered, at most, per kind, before the memory of them starts again. */
    private static final int DESTINATIONS = 4096;
    private static final Destination NOWHERE = new Destination(null, 0);
    private final Object2ObjectHashMap<AhAttributes, Destination> unicast = new Object2ObjectHashMap<>();
    private final Object2ObjectHashMap<AhAttributes, Destination> groups = new Object2ObjectHashMap<>();
    /** The last destination (a steady stream to one allocates nothing and looks nothing up). */
    private AhAttributes lastAh;
    private boolean lastGroup;
    private Destination last;
    /** A send waits for room in the socket: the carrier's progress runs this QP again. */
    private volatile boolean waiting;

    UdpQp(UdpCarrier carrier, QpContext ctx, GracePeriod.Reader reader, boolean oversizeError) {
        this.carrier = carrier;
        this.ctx = ctx;
        this.reader = reader;
        this.oversizeError = oversizeError;
        this.out = ByteBuffer.allocateDirect(UdpWire.HEADER + Math.max(ctx.pathMtu(), 0) + UdpWire.TAG);
        this.outSeg = MemorySegment.ofBuffer(out);
        ctx.attach(this);
    }

    /** Sends run at once, on the posting thread: posted under the execution lock, they take no second lock. */
    @Override
    public boolean postsUnderExecutionLock() {
        return true;
    }

    /** Runs the sends now, under the execution lock the post holds ({@link #postsUnderExecutionLock()}). */
    @Override
    public void sendPosted(long firstSeq, int count) {
        assert ctx.lock().isHeldByCurrentThread() : ctx.name() + ": sends posted without the QP's execution lock";
        run();
    }

    @Override
    public void recvPosted(long firstSeq, int count) {
        // Receives are taken when a datagram arrives (UdpInbound).
    }

    @Override
    public void stop() {
        // Sends run under the QP's lock, which the caller holds: nothing is in progress.
    }

    @Override
    public int importRemoteKey(MemorySegment exported) {
        throw new RdmaException(Errno.EINVAL, ctx.name() + ": a UD QP imports no remote keys (UD carries SENDs only)");
    }

    @Override
    public void attachMulticast(InetAddress gid) {
        carrier.join(gid, this);
    }

    @Override
    public void detachMulticast(InetAddress gid) {
        carrier.leave(gid, this);
    }

    @Override
    public void destroy() {
        carrier.remove(this);
        reader.close();
    }

    @Override
    public String diagnostics() {
        return carrier + (waiting ? "; a send waits for room in the socket" : "");
    }

    /** True if the carrier's progress should run this QP: a send waits, or its queues flush. */
    boolean needsRun() {
        return waiting || ctx.isError() && !ctx.idle();
    }

    /** Runs this QP if its lock is free: 1 if it did, else 0. */
    int tryRun() {
        ReentrantLock l = ctx.lock();
        if (!l.tryLock()) {
            return 0;
        }
        try {
            if (!ctx.isDestroyed()) {
                run();
            }
        } finally {
            l.unlock();
        }
        return 1;
    }

    /** Sends what is queued, in order, while the socket takes it (lock held). */
    private void run() {
        waiting = false;
        PostedWr w;
        while ((w = ctx.nextSend()) != null) {
            if (!ctx.isReady()) {
                break;
            }
            WcStatus status = send(w);
            if (status == null) {
                waiting = true; // no room in the socket: the next progress sends it
                break;
            }
            ctx.completeSend(status, status == WcStatus.SUCCESS ? w.totalLength() : 0);
        }
        if (ctx.isError()) {
            ctx.flush();
        }
    }

    /** Sends {@code w}: its status, or null when the socket has no room now. */
    private WcStatus send(PostedWr w) {
        reader.enter();
        try {
            if (!ctx.memory().gatherLocal(w, src, false)) {
                return WcStatus.LOC_PROT_ERR;
            }
            long length = src.total();
            if (length > ctx.pathMtu()) { // IBA C10-93.1.1: not sent, and no error unless asked for
                return oversizeError ? WcStatus.LOC_LEN_ERR : WcStatus.SUCCESS;
            }
            boolean group = w.remoteQpn() == AhAttributes.MULTICAST_QPN;
            Destination to = destination(w.udAddress(), group);
            if (to == NOWHERE) {
                ctx.dropDatagram(DatagramDrop.NO_QP); // nothing can be there: counted where it was found missing
                return WcStatus.SUCCESS;
            }
            boolean imm = w.opcode() == Opcode.SEND_WITH_IMM;
            int flags = (imm ? UdpWire.F_IMM : 0) | (w.solicited() ? UdpWire.F_SOLICITED : 0) | (group ? UdpWire.F_MULTICAST : 0);
            int qkey = w.remoteQkey() < 0 ? ctx.qkey() : w.remoteQkey();
            int seq = to.seq + 1 == 0 ? 1 : to.seq + 1; // (0: none seen yet, at the receiver)
            int n = UdpWire.HEADER + (int) length;
            if (group && !carrier.groupsOverUdp) {
                return publish(w, to, n, flags, qkey, imm, seq);
            }
            dst.add(outSeg, UdpWire.HEADER, length);
            if (Segments.copy(reader, src, dst) == Segments.SRC_FAILED) {
                return WcStatus.LOC_PROT_ERR;
            }
            UdpWire.header(outSeg, 0, flags, ctx.trafficClass(), ctx.qpNum(), w.remoteQpn(), qkey, imm ? w.immData() : 0,
                    seq, to.groupLo);
            outSeg.set(UdpWire.LONG, n, SipHash.hash(carrier.k0, carrier.k1, outSeg, 0, n));
            out.limit(n + UdpWire.TAG).position(0);
            if ((group ? carrier.sendToGroup(ctx.qpNum(), out, outSeg, to.to, to.groupLo) : carrier.send(out, to.to)) == 0) {
                return null;
            }
            to.seq = seq;
            return WcStatus.SUCCESS;
        } finally {
            reader.exit();
            src.clear();
            dst.clear();
        }
    }

    /**
     * Writes the group datagram of {@code w} ({@code n} bytes before its tag, its source gathered in
     * {@link #src}) in place into this QP's publication on this host, for a group carried there only:
     * no tag (only a device that proved the secret writes the ring, sealed against every other
     * writer) and no copy in between. Reader entered, lock held.
     */
    private WcStatus publish(PostedWr w, Destination to, int n, int flags, int qkey, boolean imm, int seq) {
        try {
            LocalGroups.Claim c = to.claim;
            if (c == null || !c.open()) {
                c = carrier.local.publication(ctx.qpNum(), to.to.getAddress(), to.groupLo);
                to.claim = c;
            }
            MemorySegment ring = c.ring();
            long at = c.claim(n + UdpWire.TAG);
            dst.add(ring, at + UdpWire.HEADER, n - UdpWire.HEADER);
            int copied = Segments.copy(reader, src, dst);
            if (copied == Segments.SRC_FAILED) {
                return WcStatus.LOC_PROT_ERR; // (the claim is left: the next one takes its place)
            }
            if (copied == Segments.COPIED) {
                UdpWire.header(ring, at, flags, ctx.trafficClass(), ctx.qpNum(), w.remoteQpn(), qkey, imm ? w.immData() : 0,
                        seq, to.groupLo);
                ring.set(UdpWire.LONG, at + n, 0L);
                c.commit();
            }
        } catch (IllegalStateException ended) {
            // the publication ended meanwhile (the device closes): nothing more is sent
        }
        to.seq = seq;
        return WcStatus.SUCCESS;
    }

    /** Where a datagram to {@code ah} goes (a group's at the multicast port), or {@link #NOWHERE}. */
    private Destination destination(AhAttributes ah, boolean group) {
        if (ah == lastAh && group == lastGroup) {
            return last;
        }
        Object2ObjectHashMap<AhAttributes, Destination> known = group ? groups : unicast;
        Destination d = known.get(ah);
        if (d == null) {
            if (!(ah.dgid() instanceof Inet4Address)) {
                d = NOWHERE;
            } else if (group) {
                d = new Destination(new InetSocketAddress(ah.dgid(), carrier.multicastPort), UdpWire.groupLo(ah.dgid()));
            } else {
                d = ah.port() == 0 ? NOWHERE : new Destination(new InetSocketAddress(ah.dgid(), ah.port()), 0L);
            }
            if (known.size() >= DESTINATIONS) {
                known.clear();
            }
            known.put(ah, d);
        }
        lastAh = ah;
        lastGroup = group;
        last = d;
        return d;
    }
}
