package io.regmem.registration.shm;

import io.regmem.registration.spi.CqMembers;
import io.regmem.registration.spi.MembersCq;
import io.regmem.registration.udp.UdpQp;

/**
 * An shm CQ: polling it progresses the QPs whose work completes on it (their answers, their peers'
 * requests they serve, their requests still to start), and through each QP connected inside this JVM
 * its peer, whose progress serves this side's requests; and, for its UD QPs, takes what arrived on
 * the device's datagram sockets.
 */
final class ShmCq extends MembersCq<ShmQp> {
    private final ShmDevice device;

    ShmCq(ShmDevice device) {
        super(new ShmQp[0], device::hasProgressThread, UdpQp.class); // (UD QPs: over UDP)
        this.device = device;
    }

    @Override
    public void progress() {
        if (others() > 0) {
            device.datagrams.progress(); // what arrived over UDP, and sends that wait for the socket
        }
        ShmQp[] s = members.senders();
        ShmQp[] r = members.receivers();
        for (ShmQp qp : s) {
            qp.progress();
        }
        for (ShmQp qp : r) {
            if (!CqMembers.contains(s, qp)) {
                qp.progress();
            }
        }
    }

    @Override
    public boolean idle() {
        if (others() > 0 && !device.datagrams.idle()) {
            return false; // (a datagram may be waiting in a socket or a ring, or a send for room)
        }
        for (ShmQp qp : members.senders()) {
            if (!qp.idleForPoll()) {
                return false;
            }
        }
        for (ShmQp qp : members.receivers()) {
            if (!qp.idleForPoll()) {
                return false;
            }
        }
        return true;
    }
}
