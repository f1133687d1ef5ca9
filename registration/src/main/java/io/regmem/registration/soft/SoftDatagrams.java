package io.regmem.registration.soft;

import io.regmem.registration.AhAttributes;
import io.regmem.registration.DatagramDrop;
import io.regmem.registration.Opcode;
import io.regmem.registration.WcStatus;
import io.regmem.registration.spi.GracePeriod;
import io.regmem.registration.spi.Grh;
import io.regmem.registration.spi.MemoryAccess;
import io.regmem.registration.spi.PostedWr;
import io.regmem.registration.spi.QpContext;
import io.regmem.registration.spi.Segments;
import java.net.InetAddress;

/**
 * A soft UD QP's sends: one datagram to a QP number, or one copy to each member of a multicast
 * group, each checked at its destination as a NIC's receive path checks it (the Q_Key, a posted
 * receive, room for the GRH area and the message) and dropped and counted there when it fails;
 * nothing a destination does makes the send fail. A member whose lock is busy leaves the rest of the
 * fan-out for the next progress (the send stays queued; the members already served are not served
 * again). Runs under the sending QP's lock, like the rest of its executor.
 */
final class SoftDatagrams {
    /** Hop limit of the GRH (RoCE's default for a UD QP's address handle). */
    private static final int HOP_LIMIT = 64;
    private final SoftQueuePair qp;
    private final QpContext ctx;
    private final MemoryAccess memory;
    private final GracePeriod.Reader reader;
    private final boolean oversizeError;
    private final Segments src = new Segments();
    private final Segments framed = new Segments();
    private final Segments dst = new Segments();
    private final Grh grh = new Grh();
    /** The send whose fan-out is under way, its members and the next one to serve (execution lock). */
    private long fanSeq = -1;
    private SoftQueuePair[] fan;
    private int fanNext;
    private boolean fanSkipsSelf;
    private final SoftQueuePair[] one = new SoftQueuePair[1];
    private static final SoftQueuePair[] NONE = new SoftQueuePair[0];

    SoftDatagrams(SoftQueuePair qp, GracePeriod.Reader reader, boolean oversizeError) {
        this.qp = qp;
        this.ctx = qp.ctx;
        this.memory = ctx.memory();
        this.reader = reader;
        this.oversizeError = oversizeError;
    }

    /**
     * Executes send {@code w}: its status, or null when a destination's lock was busy (the send
     * stays queued, and the next progress serves the destinations left).
     */
    WcStatus send(PostedWr w) {
        reader.enter();
        try {
            if (!memory.gatherLocal(w, src, false)) {
                fanSeq = -1;
                return WcStatus.LOC_PROT_ERR;
            }
            long length = src.total();
            if (length > ctx.pathMtu()) { // IBA C10-93.1.1: not sent, and no error unless asked for
                fanSeq = -1;
                return oversizeError ? WcStatus.LOC_LEN_ERR : WcStatus.SUCCESS;
            }
            AhAttributes to = w.udAddress();
            if (w.seq() != fanSeq) {
                fanSeq = w.seq();
                fanNext = 0;
                fan = destinations(w, to);
            }
            InetAddress source = SoftFabric.SOURCE.dgid();
            framed.clear();
            framed.add(grh.fill(source, to.dgid(), length, w.opcode() == Opcode.SEND_WITH_IMM, HOP_LIMIT, ctx.trafficClass()), 0,
                    Grh.BYTES);
            framed.addAll(src);
            int qkey = w.remoteQkey() < 0 ? ctx.qkey() : w.remoteQkey();
            for (; fanNext < fan.length; fanNext++) {
                SoftQueuePair t = fan[fanNext];
                if (t == qp && fanSkipsSelf) {
                    continue;
                }
                if (t == qp) {
                    if (!deliver(t, w, qkey, length)) {
                        return fail();
                    }
                    continue;
                }
                if (!t.tryLockAsPeer()) {
                    return null; // busy: the rest of the fan-out at the next progress
                }
                boolean ok;
                try {
                    ok = deliver(t, w, qkey, length);
                } finally {
                    t.lock().unlock();
                }
                if (!ok) {
                    return fail();
                }
            }
            fanSeq = -1;
            fan = null;
            return WcStatus.SUCCESS;
        } finally {
            reader.exit();
            src.clear();
            framed.clear();
            dst.clear();
        }
    }

    private WcStatus fail() {
        fanSeq = -1;
        fan = null;
        return WcStatus.LOC_PROT_ERR;
    }

    /**
     * The QPs a send reaches: the group's members (a snapshot; this QP skipped if it blocks its
     * loopback), or the one QP.
     */
    private SoftQueuePair[] destinations(PostedWr w, AhAttributes to) {
        if (w.remoteQpn() == AhAttributes.MULTICAST_QPN) {
            fanSkipsSelf = ctx.blocksSelfMulticastLoopback();
            return SoftFabric.members(to.dgid());
        }
        fanSkipsSelf = false;
        SoftQueuePair t = SoftFabric.reaches(to) ? SoftFabric.qp(w.remoteQpn()) : null;
        if (t == null) {
            ctx.dropDatagram(DatagramDrop.NO_QP); // nothing there: counted where it was found missing
            return NONE;
        }
        one[0] = t;
        return one;
    }

    /**
     * Delivers the framed datagram to {@code t} (its lock held) or drops it there; false only when
     * this QP's own memory failed under the copy (the send fails with LOC_PROT_ERR).
     */
    private boolean deliver(SoftQueuePair t, PostedWr w, int qkey, long length) {
        QpContext to = t.ctx;
        if (to.isDestroyed() || to.isError()) {
            to.dropDatagram(DatagramDrop.NO_QP);
            return true;
        }
        if (qkey != to.qkey()) {
            to.dropDatagram(DatagramDrop.QKEY);
            return true;
        }
        PostedWr recv = to.nextRecv();
        if (recv == null) {
            to.dropDatagram(DatagramDrop.NO_RECEIVE);
            return true;
        }
        if (!to.memory().gatherLocal(recv, dst, true)) {
            to.completeRecv(WcStatus.LOC_PROT_ERR, Opcode.RECV, 0, false, 0, false, 0); // its own bad buffer
            return true;
        }
        long bytes = Grh.BYTES + length;
        if (dst.total() < bytes) {
            to.dropDatagram(DatagramDrop.TOO_SMALL);
            return true;
        }
        dst.truncate(bytes);
        int copied = Segments.copy(reader, framed, dst);
        if (copied == Segments.SRC_FAILED) {
            return false;
        }
        if (copied == Segments.DST_FAILED) {
            to.completeRecv(WcStatus.LOC_PROT_ERR, Opcode.RECV, 0, false, 0, false, 0);
            return true;
        }
        boolean imm = w.opcode() == Opcode.SEND_WITH_IMM;
        to.completeDatagram(bytes, imm, imm ? w.immData() : 0, w.solicited(), ctx.qpNum(), SoftFabric.SOURCE);
        return true;
    }
}
