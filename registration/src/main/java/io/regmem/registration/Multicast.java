package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.net.InetAddress;
import java.util.HashSet;
import java.util.List;

/**
 * Attaching UD QPs to multicast groups ({@code ibv_attach_mcast}, {@code ibv_detach_mcast}): the
 * rules and the device's limits here, the delivery in the provider. Under the device lock.
 */
final class Multicast {
    private Multicast() {
    }

    static void attach(QueuePair qp, InetAddress gid) {
        RdmaDevice device = qp.device;
        synchronized (device.lock) {
            qp.checkAlive("attachMulticast");
            DeviceAttributes a = device.attributes();
            if (a.maxMcastGroups() == 0) {
                throw new RdmaException(Errno.EOPNOTSUPP, qp + ": attachMulticast on device " + device.name()
                        + ", which has no multicast (maxMcastGroups 0)");
            }
            check(qp, gid, "attachMulticast");
            if (qp.groups.contains(gid)) {
                return; // attached already: still one copy per datagram
            }
            List<QueuePair> qps = device.tracker.survivors(QueuePair.class);
            HashSet<InetAddress> groups = new HashSet<>();
            int members = 0;
            for (QueuePair q : qps) {
                groups.addAll(q.groups);
                if (q.groups.contains(gid)) {
                    members++;
                }
            }
            if (!groups.contains(gid) && groups.size() >= a.maxMcastGroups()) {
                throw new RdmaException(Errno.ENOMEM, qp + ": attachMulticast(" + gid.getHostAddress() + "): the device's QPs "
                        + "are attached to " + groups.size() + " groups already (maxMcastGroups " + a.maxMcastGroups() + ")");
            }
            if (members >= a.maxMcastQpAttach()) {
                throw new RdmaException(Errno.ENOMEM, qp + ": attachMulticast(" + gid.getHostAddress() + "): " + members
                        + " of the device's QPs are attached to it already (maxMcastQpAttach " + a.maxMcastQpAttach() + ")");
            }
            qp.provider().attachMulticast(gid); // throws: nothing attached
            qp.groups.add(gid);
        }
    }

    static void detach(QueuePair qp, InetAddress gid) {
        synchronized (qp.device.lock) {
            qp.checkAlive("detachMulticast");
            check(qp, gid, "detachMulticast");
            if (!qp.groups.contains(gid)) {
                throw new RdmaException(Errno.EINVAL, qp + ": detachMulticast(" + gid.getHostAddress()
                        + "): the QP is not attached to that group");
            }
            qp.provider().detachMulticast(gid);
            qp.groups.remove(gid);
        }
    }

    /** Detaches {@code qp} from every group (its destruction; device lock held by the caller). */
    static void detachAll(QueuePair qp) {
        for (InetAddress gid : qp.groups) {
            qp.provider().detachMulticast(gid);
        }
        qp.groups.clear();
    }

    private static void check(QueuePair qp, InetAddress gid, String call) {
        if (qp.qpType() != QpType.UD) {
            throw new RdmaException(Errno.EINVAL, qp + ": " + call + " on an RC QP; only UD QPs join multicast groups");
        }
        if (gid == null || !gid.isMulticastAddress()) {
            throw new RdmaException(Errno.EINVAL, qp + ": " + call + "(" + gid + "): not a multicast address (IPv4 224.0.0.0/4, "
                    + "IPv6 ff00::/8)");
        }
    }
}
