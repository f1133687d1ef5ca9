package io.regmem.registration.shm;

import io.regmem.registration.udp.LocalGroups;

/**
 * Multicast groups among the processes of this host in shared memory ({@link ShmGroups}), for a
 * provider's datagrams ({@code UdpDatagrams.localGroups}): shm's, and ucx's for its members on this
 * host while its groups also go over UDP multicast to the others.
 */
public final class SameHostGroups {
    /** The default ring of each QP's publication to a group. */
    public static final int DEFAULT_RING = 1 << 20;

    private SameHostGroups() {
    }

    /**
     * Local groups whose publications have rings of {@code ringBytes} (a power of two from 64 KiB to
     * 64 MiB), whose datagrams also go over UDP multicast if {@code alsoUdp}.
     */
    public static LocalGroups.Factory factory(int ringBytes, boolean alsoUdp) {
        if (!GroupRing.validCapacity(ringBytes)) {
            throw new IllegalArgumentException("a group's ring has a power of two from 64 KiB to 64 MiB bytes, not " + ringBytes);
        }
        return (owner, endpoint, k0, k1, port) -> new ShmGroups(owner, endpoint, k0, k1, port, ringBytes, alsoUdp);
    }
}
