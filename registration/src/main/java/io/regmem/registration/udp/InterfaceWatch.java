package io.regmem.registration.udp;

import io.regmem.core.Errno;
import java.io.IOException;
import java.net.NetworkInterface;

/**
 * Watches a device's interface while it has multicast groups: every {@link #CHECK_NANOS} (looked at
 * from the carrier's progress), whether the interface is still up. Once it is down (or gone), every
 * member QP of every group hears that the group is lost ({@code QpContext.multicastLost}, with
 * {@code -ENETDOWN} or {@code -ENODEV}), on a thread of its own that holds no lock; a CM join then
 * ends with {@code MULTICAST_ERROR}. Said once per time the interface goes down.
 */
final class InterfaceWatch {
    private static final System.Logger LOG = System.getLogger("io.regmem.registration.udp");
    /** How often the interface is looked at. */
    static final long CHECK_NANOS = 100_000_000L;
    private final String owner;
    private final NetworkInterface nic;
    private volatile long checkedAt;
    /** The interface was seen down, and the loss of its groups reported. */
    private volatile boolean down;

    InterfaceWatch(String owner, NetworkInterface nic) {
        this.owner = owner;
        this.nic = nic;
    }

    /** Looks at the interface if it is due; reports the loss of {@code groups} the first time it is down. */
    void check(UdpGroup[] groups) {
        long now = System.nanoTime();
        if (now - checkedAt < CHECK_NANOS) {
            return;
        }
        checkedAt = now;
        int status;
        try {
            if (nic.isUp()) {
                down = false;
                return;
            }
            status = -Errno.ENETDOWN.value();
        } catch (IOException gone) { // the interface is no more
            status = -Errno.ENODEV.value();
        }
        if (down) {
            return;
        }
        down = true;
        int why = status;
        LOG.log(System.Logger.Level.WARNING, () -> owner + ": the interface " + nic.getName() + " is " + (why == -Errno.ENODEV.value()
                ? "gone" : "down") + ": its " + groups.length + " multicast group(s) are lost");
        Thread.ofVirtual().name("regmem-udp-groups-lost").start(() -> {
            for (UdpGroup g : groups) {
                for (UdpQp m : g.members) {
                    try {
                        m.ctx.multicastLost(g.group, why);
                    } catch (RuntimeException | Error e) { // (a thread of regmem's: nothing escapes it)
                        LOG.log(System.Logger.Level.WARNING, owner + ": reporting the loss of " + g.group.getHostAddress()
                                + " to " + m.ctx.name() + " failed", e);
                    }
                }
            }
        });
    }
}
