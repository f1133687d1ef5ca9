package io.regmem.registration.shm;

import io.regmem.registration.spi.CqMembers;
import io.regmem.registration.spi.MembersCq;

/**
 * An shm CQ: polling it progresses the QPs whose work completes on it (their answers, their peers'
 * requests they serve, their requests still to start), and through each QP connected inside this JVM
 * its peer, whose progress serves this side's requests.
 */
final class ShmCq extends MembersCq<ShmQp> {
    ShmCq(ShmDevice device) {
        super(new ShmQp[0], device::hasProgressThread);
    }

    @Override
    public void progress() {
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
