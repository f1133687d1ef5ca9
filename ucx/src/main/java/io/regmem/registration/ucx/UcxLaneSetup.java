package io.regmem.registration.ucx;

import io.regmem.registration.link.Link;
import io.regmem.registration.shm.SameHostLane;
import java.io.IOException;

/**
 * The same-host lane's part of a ucx connection's handshake, each side's: the requester joins the lane
 * the listener's ACCEPT offered, the listener offers it and takes the requester's memfd; either, where
 * the lane cannot be set up, leaves it so that the connection goes over UCX (NO_LANE, then a second
 * ACCEPT: {@link UcxCm}).
 */
final class UcxLaneSetup {
    private static final System.Logger LOG = System.getLogger("io.regmem.registration.ucx");

    private UcxLaneSetup() {
    }

    /**
     * The requester's side of the lane the listener offered: joins it and connects the QP over it.
     *
     * @return null if the QP is connected over the lane, else why not (the QP then left the lane)
     */
    static String join(Link l, UcxQp mine, SameHostLane lane, byte[] listenerOffer) {
        SameHostLane.Qp q = mine.useLane(lane, l::close);
        try {
            lane.join(q, listenerOffer, l.deadline());
            mine.laneConnected();
            return null;
        } catch (IOException | RuntimeException e) {
            mine.leaveLane();
            return e instanceof IOException ? e.getMessage() : e.toString();
        }
    }

    /** True if the requester's lane offer is one this side takes (this host and network namespace, same rings). */
    private static boolean takes(SameHostLane lane, UcxQp mine, UcxHello hello) {
        try {
            lane.checkRequester(hello.laneOffer());
            return true;
        } catch (IOException e) {
            LOG.log(System.Logger.Level.DEBUG, "regmem ucx: " + mine.ctx.name() + ": no same-host lane: " + e.getMessage());
            return false;
        }
    }

    /**
     * Accepts over the same-host lane: ACCEPT with this side's lane offer (a one-time socket), the
     * requester's memfd on it, its authenticated READY, then the QP is connected over the lane. Where
     * the lane cannot be set up (the requester cannot reach the socket, the kernel does not show
     * either process to the other, ...), the requester says NO_LANE and the QP leaves the lane.
     *
     * @return true if connected over the lane; false if the connection is to go over UCX (the offer is
     *         not one this side takes, the lane could not be set up)
     */
    static boolean accept(Link l, UcxQp mine, SameHostLane lane, UcxHello hello, byte[] privateData) throws IOException {
        if (!takes(lane, mine, hello)) {
            return false;
        }
        SameHostLane.Qp q = mine.useLane(lane, l::close);
        String why = null;
        SameHostLane.Accepting accepting;
        try {
            accepting = lane.accept(hello.laneOffer());
        } catch (IOException | RuntimeException e) { // (nothing was sent yet: the ACCEPT goes over UCX)
            mine.leaveLane();
            LOG.log(System.Logger.Level.DEBUG, "regmem ucx: " + mine.ctx.name() + ": no same-host lane with " + l.peerAddress()
                    + ": " + e + "; the connection goes over UCX");
            return false;
        }
        try (SameHostLane.Accepting a = accepting) {
            l.sendAccept(mine.number, mine.localToken, new UcxHello(mine.device.workerAddress(), a.offer()).encode(),
                    privateData);
            long deadline = l.deadline();
            try {
                a.complete(deadline, l::peerClosedOrSent);
            } catch (IOException | RuntimeException e) {
                why = e instanceof IOException ? e.getMessage() : e.toString();
            }
            if (l.awaitReadyOrNoLane(deadline, () -> { })) {
                if (why != null) {
                    throw new IOException("the requester says it took a lane this side could not set up: " + why);
                }
                a.connect(q);
                mine.laneConnected();
                return true;
            }
        } catch (IOException | RuntimeException e) {
            mine.leaveLane();
            throw e;
        }
        mine.leaveLane();
        LOG.log(System.Logger.Level.DEBUG, "regmem ucx: " + mine.ctx.name() + ": no same-host lane with " + l.peerAddress() + ": "
                + (why != null ? why : "the requester could not set it up") + "; the connection goes over UCX");
        return false;
    }
}
