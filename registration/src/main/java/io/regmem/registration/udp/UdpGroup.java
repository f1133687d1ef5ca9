package io.regmem.registration.udp;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.channels.MembershipKey;
import org.agrona.collections.ArrayUtil;
import org.agrona.collections.Int2IntHashMap;
import org.agrona.collections.Object2ObjectHashMap;

/** A multicast group a device's QPs are attached to: its membership and its members (immutable). */
final class UdpGroup {
    final InetAddress group;
    /** The last 8 bytes of the group's IPv4-mapped form, as a datagram's header carries them. */
    final long lo;
    final MembershipKey key;
    final UdpQp[] members;
    /**
     * The last sequence number of each sender QP, by sender address, as this device saw the group's
     * stream since it joined (the carrier's receive lock; shared by the group's later member lists).
     */
    final Object2ObjectHashMap<InetSocketAddress, Int2IntHashMap> senders;

    UdpGroup(InetAddress group, MembershipKey key, UdpQp[] members) {
        this(group, key, members, new Object2ObjectHashMap<>());
    }

    private UdpGroup(InetAddress group, MembershipKey key, UdpQp[] members,
                     Object2ObjectHashMap<InetSocketAddress, Int2IntHashMap> senders) {
        this.group = group;
        this.lo = UdpWire.groupLo(group);
        this.key = key;
        this.members = members;
        this.senders = senders;
    }

    UdpGroup with(UdpQp qp) {
        return indexOf(members, qp) >= 0 ? this : new UdpGroup(group, key, ArrayUtil.add(members, qp), senders);
    }

    /** Where {@code x} is in {@code a} (by identity), or -1. */
    static int indexOf(Object[] a, Object x) {
        for (int i = 0; i < a.length; i++) {
            if (a[i] == x) {
                return i;
            }
        }
        return -1;
    }

    UdpGroup without(UdpQp qp) {
        return new UdpGroup(group, key, ArrayUtil.remove(members, qp), senders);
    }
}
