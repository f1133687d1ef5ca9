package io.regmem.registration.shm;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.link.HostPort;
import io.regmem.registration.link.Link;
import io.regmem.registration.link.LinkedCm;
import io.regmem.registration.link.Refusal;
import io.regmem.registration.spi.CmContext;
import io.regmem.registration.spi.LocalRendezvous;
import io.regmem.registration.spi.QpContext;
import java.io.IOException;
import java.net.InetAddress;
import java.net.NetworkInterface;

/**
 * shm connection setup by {@code host:port}, on the connection layer every provider connecting by
 * address shares ({@link LinkedCm}). Between two IDs of this JVM the connection is made in place
 * (one memfd, mapped by each side). Between processes, the authenticated HELLO and ACCEPT carry each
 * side's {@link LaneOffer}; accepting hands the requester a one-time abstract socket where it passes
 * the lane's memfd ({@link LaneSetup}); the life line's end makes the QP take what the peer had
 * already written into the rings, then err. A peer on another host is refused.
 */
final class ShmCm extends LinkedCm {
    private static final System.Logger LOG = System.getLogger("io.regmem.registration.shm");
    static final Link.Kind KIND = new Link.Kind("shm", "lane offer");
    private static final LocalRendezvous LOCAL = new LocalRendezvous();

    private final ShmDevice device;

    ShmCm(ShmDevice device, CmContext ctx) {
        super(ctx, LOCAL, KIND, LOG, device::secret, device.handshakeMillis);
        this.device = device;
        ctx.attach(this);
    }

    /** A route leads to a process of this host only: the host must be one of this machine's addresses. */
    @Override
    public void route(String resolved) {
        String host = HostPort.parse(ctx.name(), "shm", resolved).host();
        try {
            InetAddress a = InetAddress.getByName(host);
            if (a.isLoopbackAddress() || a.isAnyLocalAddress() || NetworkInterface.getByInetAddress(a) != null) {
                return;
            }
        } catch (IOException e) {
            // not this host's
        }
        throw new RdmaException(Errno.EHOSTUNREACH, ctx.name() + ": resolveRoute to " + resolved
                + ": shm reaches processes of this host only");
    }

    /** The requester's offer, if it is a same-host lane's this process can reach. */
    @Override
    protected Object admit(Link.Peer hello) throws IOException {
        LaneOffer offer = LaneOffer.decode(hello.address(), false);
        String unreachable = LaneSetup.unreachable(offer);
        if (unreachable != null) {
            throw new Refusal.Refused(Refusal.UNREACHABLE, unreachable + "; the shm provider connects processes that "
                    + "share a host and a network namespace (use ucx otherwise)");
        }
        return offer;
    }

    /** HELLO with this side's offer, the answer; then the lane, READY. */
    @Override
    protected Link.Peer request(Link l, QpContext qp, String address, byte[] privateData) throws IOException {
        l.sendHello(0, Link.token(), LaneSetup.offer(device.ringBytes).encode(), privateData);
        Link.Peer p = awaitAccept(l, () -> { });
        if (p == null) {
            return null;
        }
        LaneOffer theirs = LaneSetup.listenerOffer(p.address(), device.ringBytes);
        Lane lane = LaneSetup.join(theirs, device.ringBytes, l.deadline(), device.pull, device.sleeps());
        ShmQp mine = ShmContexts.qp(qp);
        mine.onBroken = this::cut;
        mine.connect(lane);
        l.sendReady();
        return p;
    }

    /**
     * ACCEPT with this side's offer and a one-time socket, the requester's memfd on it, then its
     * authenticated READY (all within the handshake's time).
     */
    @Override
    protected void acceptRequest(Link l, QpContext qp, Object admitted, byte[] privateData) throws IOException {
        LaneOffer peerOffer = (LaneOffer) admitted;
        try (LaneSetup.Listening listening = new LaneSetup.Listening(peerOffer.ringBytes())) {
            l.sendAccept(0, Link.token(), listening.offer.encode(), privateData);
            long deadline = l.deadline();
            Lane lane = listening.complete(peerOffer, deadline, device.pull, device.sleeps(), l::peerClosed);
            try {
                l.awaitReady(deadline, () -> { });
            } catch (IOException | RuntimeException e) {
                lane.close();
                throw e;
            }
            ShmQp mine = ShmContexts.qp(qp);
            mine.onBroken = this::cut;
            mine.connect(lane);
        }
    }

    @Override
    protected void linkLocal(QpContext passive, QpContext active) {
        ShmQp.linkLocal(ShmContexts.qp(passive), ShmContexts.qp(active));
    }

    @Override
    protected void peerGone(QpContext qp) {
        ShmContexts.qp(qp).peerGone(true);
    }
}
