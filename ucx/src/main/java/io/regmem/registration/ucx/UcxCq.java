package io.regmem.registration.ucx;

import io.regmem.core.RdmaException;
import io.regmem.registration.shm.SameHostLane;
import io.regmem.registration.spi.CqMembers;
import io.regmem.registration.spi.MembersCq;
import io.regmem.registration.udp.UdpQp;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A UCX completion queue: polling it runs its QPs on the same-host lane ({@link SameHostLane}), and
 * for the others progresses the workers they use (which also serve the peers'
 * requests aimed at this process: without RDMA hardware a target must progress), places the
 * messages that arrived for the QPs whose receives complete here, and reaps, in order, the requests
 * of the QPs whose sends complete here.
 */
final class UcxCq extends MembersCq<UcxQp> {
    /** Looks that find the peer's own thread gone quiet before this side runs the peer again. */
    static final int PEER_QUIET = 64;
    private final UcxDevice device;

    UcxCq(UcxDevice device) {
        super(new UcxQp[0], device::hasProgressThread, UdpQp.class); // (UD QPs: over UDP)
        this.device = device;
    }

    /**
     * Progresses the worker, places what arrived, reaps what completed; then, for QPs whose peer is
     * in this JVM (another device), progresses the peer's worker and places its messages too (its
     * QP lock only tried), and once more this side: a poll in a single-threaded program sees a
     * round trip complete, as a poll of a soft CQ executes its QPs' peers.
     */
    @Override
    public void progress() {
        Thread me = Thread.currentThread();
        UcxQp[] qps = members.senders();
        UcxQp[] receivers = members.receivers();
        boolean overUcx = qps.length == 0 && receivers.length == 0;
        if (others() > 0) {
            device.datagrams.progress(); // UD QPs: what arrived over UDP, and sends that wait for the socket
            overUcx = false;
        }
        for (UcxQp qp : qps) {
            qp.pollers.polledBy(me);
            SameHostLane.Qp l = qp.lane;
            if (l != null) {
                l.progress();
            } else {
                overUcx = true;
            }
        }
        for (UcxQp qp : receivers) {
            qp.pollers.polledBy(me);
            SameHostLane.Qp l = qp.lane;
            if (l == null) {
                overUcx = true;
            } else if (!CqMembers.contains(qps, qp)) {
                l.progress();
            }
        }
        if (overUcx) {
            progressRounds(qps, receivers);
        }
    }



    private void progressRounds(UcxQp[] qps, UcxQp[] receivers) {
        boolean peers = false;
        for (int round = 0; round < 3; round++) {
            device.progressChannels(qps, receivers); // the workers its QPs use, each once
            for (UcxQp qp : receivers) {
                if (qp.lane == null && qp.receiveWork()) {
                    withLock(qp, true);
                }
            }
            for (UcxQp qp : qps) {
                if (qp.lane == null && qp.sendWork()) {
                    withLock(qp, false);
                }
            }
            for (UcxQp qp : qps) {
                peers |= progressPeer(qp);
            }
            for (UcxQp qp : receivers) {
                peers |= progressPeer(qp);
            }
            if (!peers) {
                return;
            }
        }
    }

    private static void withLock(UcxQp qp, boolean deliver) {
        ReentrantLock l = qp.ctx.lock();
        if (l.isHeldByCurrentThread()) { // a poll of a CQ with one user holds it already
            run(qp, deliver);
            return;
        }
        UcxDevice.lockSpinning(l); // its holder: an in-process peer's poll running it, for a moment
        try {
            run(qp, deliver);
        } finally {
            l.unlock();
        }
    }

    private static void run(UcxQp qp, boolean deliver) {
        if (deliver) {
            qp.deliver();
        } else {
            qp.reap();
        }
    }

    /**
     * The in-process peer's worker progresses and its receives are placed (its lock only tried), also
     * when the peer is a QP of the same device whose receives complete on another CQ (a loopback
     * pair of one device: polling the send CQ is enough, as on soft); false if there is no peer.
     */
    static boolean progressPeer(UcxQp qp) {
        UcxQp peer = qp.localPeer;
        if (peer == null) {
            return false;
        }
        Thread poller = peer.pollers.lastPoller();
        if (poller != null && poller != Thread.currentThread()) {
            long polls = peer.pollers.polls();
            if (polls != qp.peerPollsSeen) {
                qp.peerPollsSeen = polls;
                qp.peerQuiet = 0;
            }
            if (qp.peerQuiet++ < PEER_QUIET) {
                // Another thread polls the peer's own CQ (one thread per end): it runs the peer, and
                // doing its work from here too would only make the two threads meet on its locks.
                // Once that thread has not polled it for a while, the peer is run from here again.
                return false;
            }
        }
        try {
            if (peer.device != qp.device) {
                peer.device.tryProgress(); // busy: its own thread progresses it (waiting would park this one)
            }
            ReentrantLock l = peer.ctx.lock();
            if (!peer.destroyed && l.tryLock()) {
                try {
                    if (!peer.destroyed) {
                        peer.deliver();
                        peer.reap();
                    }
                } finally {
                    l.unlock();
                }
            }
        } catch (RdmaException closed) {
            return false; // the peer's device is closing: nothing of it to progress
        }
        return true;
    }
}
