package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.net.InetAddress;
import java.util.ArrayList;

/**
 * A UDP port space ID's multicast joins ({@code rdma_join_multicast}, {@code rdma_leave_multicast}),
 * as librdmacm keeps them: a join is reported by a {@link CmEvent.Type#MULTICAST_JOIN} event, and the
 * ID's QP (a full member's, if the ID has one then) is attached when that event is taken; a leave
 * before then cancels it (no event, no attach). Guarded by the device lock.
 */
final class CmJoins {
    private static final class Join {
        final InetAddress group;
        final JoinFlag flag;

        Join(InetAddress group, JoinFlag flag) {
            this.group = group;
            this.flag = flag;
        }
    }

    private final CmId id;
    private final ArrayList<Join> joins = new ArrayList<>();

    CmJoins(CmId id) {
        this.id = id;
    }

    /** Joins {@code group} (device lock held, inside a CmEvents scope). See {@link CmId#joinMulticast}. */
    void join(InetAddress group, JoinFlag flag) {
        RdmaDevice device = id.device();
        if (id.portSpace() != PortSpace.UDP) {
            throw new RdmaException(Errno.EINVAL, id + ": joinMulticast on a TCP port space ID; groups are joined by "
                    + "UDP port space IDs, whose QPs are UD");
        }
        if (group == null || !group.isMulticastAddress() || flag == null) {
            throw new RdmaException(Errno.EINVAL, id + ": joinMulticast(" + group + ", " + flag + ") needs a multicast "
                    + "address (IPv4 224.0.0.0/4, IPv6 ff00::/8) and a join flag");
        }
        CmId.ConnState state = id.connState();
        if (state != CmId.ConnState.BOUND && state != CmId.ConnState.ADDR_RESOLVED && state != CmId.ConnState.ROUTE_RESOLVED) {
            throw new RdmaException(Errno.EINVAL, id + ": joinMulticast in state " + state + "; bind the ID "
                    + "first (bindAddr, or resolveAddr), as rdma_join_multicast needs a bound or resolved ID");
        }
        if (device.attributes().maxMcastGroups() == 0) {
            throw new RdmaException(Errno.EOPNOTSUPP, id + ": joinMulticast on device " + device.name()
                    + ", which has no multicast (maxMcastGroups 0)");
        }
        if (find(group) != null) {
            throw new RdmaException(Errno.EADDRINUSE, id + ": has joined " + group.getHostAddress() + " already");
        }
        joins.add(new Join(group, flag));
        UdParam ud = new UdParam(AhAttributes.of(group), AhAttributes.MULTICAST_QPN, QpInitAttributes.RDMA_UDP_QKEY);
        CmEvents.post(new CmEvent(CmEvent.Type.MULTICAST_JOIN, id, null, 0, ud, group));
    }

    /**
     * A MULTICAST_JOIN event is taken: attaches the ID's QP for a full member's join and returns the
     * event to deliver, a MULTICAST_ERROR if the attach failed (the join is gone then), or null if
     * the join was left meanwhile (nothing to deliver).
     */
    CmEvent take(CmEvent e) {
        synchronized (id.device().lock) {
            Join j = find(e.group());
            if (j == null || id.isDestroyed()) {
                return null;
            }
            QueuePair qp = id.qp();
            if (j.flag == JoinFlag.FULLMEMBER && qp != null) {
                try {
                    qp.attachMulticast(j.group);
                } catch (RdmaException failed) {
                    joins.remove(j);
                    return new CmEvent(CmEvent.Type.MULTICAST_ERROR, id, null, -failed.errno().value(), null, j.group);
                }
            }
            return e;
        }
    }

    /** Leaves {@code group} (device lock held). See {@link CmId#leaveMulticast}. */
    void leave(InetAddress group) {
        Join j = group == null ? null : find(group);
        if (j == null) {
            throw new RdmaException(Errno.EADDRNOTAVAIL, id + ": leaveMulticast(" + group + "): the ID has not joined it");
        }
        QueuePair qp = id.qp();
        if (qp != null && qp.groups.contains(group)) {
            qp.detachMulticast(group);
        }
        joins.remove(j);
    }

    /**
     * The provider lost {@code group} (its interface went down or away): the join ends, its QP is
     * detached, and a {@link CmEvent.Type#MULTICAST_ERROR} with {@code status} says so; nothing if the
     * ID has not joined it. Takes the device lock; the event is delivered after it is released.
     */
    void lost(InetAddress group, int status) {
        CmEvents.begin();
        try {
            synchronized (id.device().lock) {
                Join j = find(group);
                if (j == null || id.isDestroyed()) {
                    return;
                }
                QueuePair qp = id.qp();
                if (qp != null && qp.groups.contains(group)) {
                    qp.detachMulticast(group);
                }
                joins.remove(j);
                CmEvents.post(new CmEvent(CmEvent.Type.MULTICAST_ERROR, id, null, status, null, group));
            }
        } finally {
            CmEvents.end();
        }
    }

    /** The ID is destroyed: its QP is gone (and detached with it), so its joins just end. */
    void clear() {
        joins.clear();
    }

    private Join find(InetAddress group) {
        for (Join j : joins) {
            if (j.group.equals(group)) {
                return j;
            }
        }
        return null;
    }
}
