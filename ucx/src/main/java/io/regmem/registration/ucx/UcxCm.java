package io.regmem.registration.ucx;

import io.regmem.core.RdmaException;
import io.regmem.registration.link.Link;
import io.regmem.registration.link.LinkedCm;
import io.regmem.registration.shm.SameHostLane;
import io.regmem.registration.spi.CmContext;
import io.regmem.registration.spi.LocalRendezvous;
import io.regmem.registration.spi.QpContext;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.concurrent.locks.LockSupport;

/**
 * UCX connection setup by {@code host:port}, on the connection layer every provider connecting by
 * address shares ({@link LinkedCm}: the listener, admission, the authenticated handshake, the CM
 * events, the life line). Connecting to a listener of this JVM is done in place: accepting gives
 * each QP its device's endpoint to the other's worker (or the same-host lane). Connecting to another
 * process: the requester's HELLO carries its worker address and QP number (and a same-host lane offer
 * where the device has the lane), accepting answers with the listener's own and waits until the
 * requester's QP is ready, so that nothing is sent to a QP that cannot take it; where the lane cannot
 * be set up, the requester says NO_LANE and the listener answers again over UCX. A peer that does not
 * prove it holds the device's secret never reaches UCX.
 */
final class UcxCm extends LinkedCm {
    private static final System.Logger LOG = System.getLogger("io.regmem.registration.ucx");
    /** What the shared handshake calls this provider and its address. */
    static final Link.Kind KIND = new Link.Kind("ucx", "worker address");
    /** Connection setup between ucx IDs of this JVM (no socket: the two QPs connect directly). */
    private static final LocalRendezvous LOCAL = new LocalRendezvous();
    /** How long a QP whose link ended waits for answers to what it still has under way. */
    static final long VERDICT_GRACE_NANOS = 200_000_000L;

    private final UcxDevice device;

    /** A request from another process: its HELLO and what the HELLO's address says. */
    private record Requested(Link.Peer peer, UcxHello hello) {
    }

    UcxCm(UcxDevice device, CmContext ctx) {
        super(ctx, LOCAL, KIND, LOG, device::secret, device.handshakeMillis());
        this.device = device;
        ctx.attach(this);
    }

    @Override
    protected Object admit(Link.Peer hello) throws IOException {
        return new Requested(hello, UcxHello.decode(hello.address()));
    }

    /**
     * HELLO with a worker of this QP's own and the lane's offer, then an authenticated ACCEPT (join
     * the lane, or connect over UCX; READY) or REJECT. A listener that does not prove it holds the
     * secret is a rejection, and a log line; its worker address never reaches UCX.
     */
    @Override
    protected Link.Peer request(Link l, QpContext qp, String address, byte[] privateData) throws IOException {
        UcxQp mine = qp(qp);
        // A worker of its own for the connections to this listener: a peer process that dies in
        // the middle of a send stops only its own connections' receives (UcxChannel).
        byte[] worker = mine.useChannel("listener " + address);
        SameHostLane lane = device.lanes.lane();
        l.sendHello(mine.number, mine.localToken, new UcxHello(worker, lane == null ? null : lane.requesterOffer()).encode(),
                privateData);
        // The answer waits for the listener's application to accept; its wire-up needs this worker.
        Link.Peer p = awaitAccept(l, () -> progressQuietly(mine.device));
        if (p == null) {
            return null;
        }
        UcxHello theirs = UcxHello.decode(p.address());
        if (theirs.laneOffer() == null) {
            mine.connect(theirs.worker(), p.qp(), p.token());
            l.sendReady();
        } else {
            if (lane == null) {
                throw new IOException("the listener answered a same-host lane this device did not offer");
            }
            String why = UcxLaneSetup.join(l, mine, lane, theirs.laneOffer());
            if (why == null) {
                l.sendReady();
            } else { // over UCX, as if the lane were off: the listener answers again
                LOG.log(System.Logger.Level.DEBUG, "regmem ucx: " + ctx.name() + ": no same-host lane to " + address + ": "
                        + why + "; the connection goes over UCX");
                l.sendNoLane();
                Link.Peer q = awaitAccept(l, () -> progressQuietly(mine.device));
                if (q == null) {
                    return null;
                }
                UcxHello overUcx = UcxHello.decode(q.address());
                if (overUcx.laneOffer() != null) {
                    throw new IOException("the listener offered the same-host lane again after NO_LANE");
                }
                mine.connect(overUcx.worker(), q.qp(), q.token());
                l.sendReady();
            }
        }
        took(mine, address);
        return p;
    }

    /**
     * Connects the QP (the requester's worker address was authenticated with its HELLO) over the
     * same-host lane where both sides have it and reach each other, else over UCX; answers ACCEPT and
     * waits for the authenticated READY.
     */
    @Override
    protected void acceptRequest(Link l, QpContext qp, Object admitted, byte[] privateData) throws IOException {
        Requested r = (Requested) admitted;
        UcxQp mine = qp(qp);
        SameHostLane lane = r.hello().laneOffer() == null ? null : device.lanes.lane();
        if (lane == null) {
            acceptOverUcx(l, mine, r, privateData, false);
        } else if (!UcxLaneSetup.accept(l, mine, lane, r.hello(), privateData)) {
            // A peer of this host the lane cannot reach (another namespace): UCX's shared-memory
            // transports would not reach it either, so its channel has network transports only.
            acceptOverUcx(l, mine, r, privateData, SameHostLane.sameHost(r.hello().laneOffer()));
        }
        took(mine, l.peerAddress());
    }

    /**
     * Accepts over UCX: the QP connects to the requester's worker, ACCEPT with this side's, then READY;
     * {@code networkOnly}: on a channel without shared-memory transports.
     */
    private void acceptOverUcx(Link l, UcxQp mine, Requested r, byte[] privateData, boolean networkOnly) throws IOException {
        Object peerKey = ByteBuffer.wrap(r.hello().worker().clone());
        byte[] worker = mine.useChannel(networkOnly ? new UcxChannels.OverNetwork(peerKey) : peerKey); // one per requester worker
        mine.connect(r.hello().worker(), r.peer().qp(), r.peer().token());
        l.sendAccept(mine.number, mine.localToken, new UcxHello(worker, null).encode(), privateData);
        l.awaitReady(l.deadline(), () -> progressQuietly(mine.device));
    }

    /** Connects two QPs of this JVM (an accepted in-JVM request) to each other's workers, or over the lane. */
    @Override
    protected void linkLocal(QpContext passive, QpContext active) {
        UcxQp mine = qp(passive);
        UcxQp theirs = qp(active);
        SameHostLane myLane = mine.device.lanes.lane();
        SameHostLane theirLane = theirs.device.lanes.lane();
        if (myLane != null && theirLane != null) {
            SameHostLane.linkLocal(mine.useLane(myLane, null), theirs.useLane(theirLane, null));
            took(mine, "a QP of this JVM");
            return;
        }
        mine.useMainChannel(); // (a QP whose connection to another process failed may hold a channel)
        theirs.useMainChannel();
        byte[] myWorker = mine.device.workerAddress();
        byte[] theirWorker = theirs.device.workerAddress();
        theirs.connect(myWorker, mine.number, mine.localToken);
        mine.connect(theirWorker, theirs.number, theirs.localToken);
        theirs.localPeer = mine;
        mine.localPeer = theirs;
        took(mine, "a QP of this JVM");
    }

    /**
     * The link ended (the peer disconnected, or its process died): the QP errs. Over the lane, what the
     * peer wrote into the rings is taken first. Over UCX, a peer that refused a request and then closed
     * sent its verdict before the socket closed: the QP waits up to {@link #VERDICT_GRACE_NANOS} for the
     * requests it still has under way to be answered (the user's polls reap them), so that they
     * complete with the peer's verdict rather than a flush; a killed peer answers nothing and the wait
     * runs out.
     */
    @Override
    protected void peerGone(QpContext qp) {
        UcxQp mine = qp(qp);
        SameHostLane.Qp lane = mine.lane;
        if (lane != null) {
            lane.peerGone();
        } else {
            mine.device.retireChannel(mine.channel); // the peer may be gone: no new connection joins its channel
            long deadline = System.nanoTime() + VERDICT_GRACE_NANOS;
            while (mine.busy() && System.nanoTime() < deadline && !ctx.isDestroyed()) {
                LockSupport.parkNanos(1_000_000L);
            }
        }
        qp.toError();
    }

    @Override
    protected void disconnecting(QpContext qp) {
        UcxQp mine = qp(qp);
        if (mine.lane == null) {
            mine.device.retireChannel(mine.channel);
        }
        qp.toError();
    }

    /** The debug line that says which way a connection took. */
    private static void took(UcxQp qp, String peer) {
        if (LOG.isLoggable(System.Logger.Level.DEBUG)) {
            LOG.log(System.Logger.Level.DEBUG, "regmem ucx: " + qp.ctx.name() + ": connected to " + peer
                    + (qp.lane != null ? " over the same-host lane" : " over UCX (" + qp.channel + ")"));
        }
    }

    private static void progressQuietly(UcxDevice device) {
        try {
            device.progress();
        } catch (RdmaException closed) {
            // the device is closing: the handshake fails on its own
        }
    }

    private static UcxQp qp(QpContext qp) {
        return UcxContexts.qp(qp);
    }
}
