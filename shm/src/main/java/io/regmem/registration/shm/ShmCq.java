package io.regmem.registration.shm;

import io.regmem.registration.spi.CqMembers;
import io.regmem.registration.spi.ProviderCq;
import io.regmem.registration.spi.ProviderQp;

/**
 * An shm CQ: polling it progresses the QPs whose work completes on it (their answers, their peers'
 * requests they serve, their requests still to start), and through each QP connected inside this JVM
 * its peer, whose progress serves this side's requests.
 */
final class ShmCq implements ProviderCq {
    private final CqMembers<ShmQp> members = new CqMembers<>(new ShmQp[0]);
    private final ShmDevice device;

    ShmCq(ShmDevice device) {
        this.device = device;
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

    @Override
    public void attach(ProviderQp qp, boolean sends, boolean receives) {
        members.add((ShmQp) qp, sends, receives);
    }

    @Override
    public void detach(ProviderQp qp) {
        members.remove((ShmQp) qp);
    }

    @Override
    public boolean progressesOnItsOwn() {
        return device.hasProgressThread();
    }

    @Override
    public void destroy() {
    }
}
