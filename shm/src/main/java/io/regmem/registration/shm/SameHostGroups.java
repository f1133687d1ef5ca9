package io.regmem.registration.shm;

import io.regmem.core.internal.Fcntl;
import io.regmem.core.internal.Mman;
import io.regmem.core.internal.Poll;
import io.regmem.core.internal.Sockets;
import io.regmem.core.internal.Unistd;
import io.regmem.registration.udp.LocalGroups;
import java.util.List;

/**
 * Multicast groups among the processes of this host in shared memory ({@link ShmGroups}), for a
 * provider's datagrams ({@code UdpDatagrams.localGroups}): shm's, and ucx's for its members on this
 * host while its groups also go over UDP multicast to the others.
 */
public final class SameHostGroups {
    /** The default ring of each QP's publication to a group. */
    public static final int DEFAULT_RING = 1 << 20;
    /** The native bindings a group's first use calls ({@link #link}). */
    private static final List<Class<?>> LINKED = List.of(Sockets.class, Poll.class, Unistd.class, Mman.class, Fcntl.class);

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
        return (owner, endpoint, k0, k1, port) -> {
            link();
            return new ShmGroups(owner, endpoint, k0, k1, port, ringBytes, alsoUdp);
        };
    }

    /**
     * Links the native calls the groups make at their first use (the JVM links each binding class once,
     * tens of milliseconds each while cold), when a device's datagrams open: a first send to a group or a
     * first join, and the other devices' answers to it, do not wait for that.
     */
    private static void link() {
        for (Class<?> c : LINKED) {
            try {
                Class.forName(c.getName(), true, c.getClassLoader());
            } catch (ClassNotFoundException e) {
                throw new AssertionError(e); // (a class of regmem's own)
            }
        }
    }
}
