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

    /** The sleeping words of its QPs' lanes (a QP still without one has nothing to wake it for). */
    @Override
    public int sleeping(long[] words, int from) {
        if (others() > 0) {
            return -1; // a datagram arrives on a socket: no peer wakes the sleeper for it
        }
        int n = from;
        for (ShmQp qp : members.senders()) {
            n = sleep(qp, words, n);
        }
        for (ShmQp qp : members.receivers()) {
            n = sleep(qp, words, n);
        }
        if (n < 0) {
            awake();
            return -1;
        }
        return n - from;
    }

    /** Sets the sleeping word of {@code qp}'s lane into {@code words[n]}: the next index, or -1 once full. */
    private static int sleep(ShmQp qp, long[] words, int n) {
        if (n < 0) {
            return -1;
        }
        long w = qp.sleeping(true);
        if (w == 0) {
            return n;
        }
        for (int i = 0; i < n; i++) {
            if (words[i] == w) {
                return n; // (a QP that sends and receives here, or two CQs' QPs on one lane)
            }
        }
        if (n == words.length) {
            return -1;
        }
        words[n] = w;
        return n + 1;
    }

    @Override
    public void awake() {
        for (ShmQp qp : members.senders()) {
            qp.sleeping(false);
        }
        for (ShmQp qp : members.receivers()) {
            qp.sleeping(false);
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
