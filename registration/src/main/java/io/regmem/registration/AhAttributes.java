package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.Objects;

/**
 * Where an unreliable datagram goes ({@code struct ibv_ah_attr} with its GRH, as on RoCE): the
 * destination GID, which on RoCE is an IP address (IPv4 ones as IPv4-mapped GIDs), and the
 * destination's datagram port where the provider needs one to reach a process (0 on soft, whose
 * devices share one in-process fabric). A multicast GID addresses a group: sends to it name the QP
 * number {@link #MULTICAST_QPN}. Immutable.
 *
 * <p>Where they come from, as with rdma_cm: {@link RdmaDevice#datagramAddress()} (the device's own
 * port, handed to a peer), a received datagram's {@link WorkCompletion#source()}
 * ({@code ibv_create_ah_from_wc}), or a multicast group's address.
 */
public final class AhAttributes {
    /** The QP number a send to a multicast group names ({@code 0xFFFFFF}). */
    public static final int MULTICAST_QPN = 0xFFFFFF;

    private final InetAddress dgid;
    private final int port;

    private AhAttributes(InetAddress dgid, int port) {
        this.dgid = dgid;
        this.port = port;
    }

    /**
     * Attributes addressing {@code dgid} (port 0).
     *
     * @throws RdmaException {@link Errno#EINVAL} for null or the unspecified address (0.0.0.0, ::)
     */
    public static AhAttributes of(InetAddress dgid) {
        return of(dgid, 0);
    }

    /**
     * Attributes addressing {@code endpoint}'s address and port.
     *
     * @throws RdmaException {@link Errno#EINVAL} for null, an unresolved endpoint or the unspecified address
     */
    public static AhAttributes of(InetSocketAddress endpoint) {
        if (endpoint == null || endpoint.isUnresolved()) {
            throw new RdmaException(Errno.EINVAL, "AhAttributes: needs a resolved endpoint, got " + endpoint);
        }
        return of(endpoint.getAddress(), endpoint.getPort());
    }

    /**
     * Attributes addressing {@code dgid} at datagram {@code port}.
     *
     * @throws RdmaException {@link Errno#EINVAL} for a null or unspecified address or a port outside [0, 65535]
     */
    public static AhAttributes of(InetAddress dgid, int port) {
        if (dgid == null || dgid.isAnyLocalAddress()) {
            throw new RdmaException(Errno.EINVAL, "AhAttributes: a destination GID must be an address, got " + dgid);
        }
        if (port < 0 || port > 0xFFFF) {
            throw new RdmaException(Errno.EINVAL, "AhAttributes: port " + port + " is outside [0, 65535]");
        }
        return new AhAttributes(dgid, port);
    }

    /** The destination GID as an IP address (an {@link Inet4Address} for an IPv4-mapped GID). */
    public InetAddress dgid() {
        return dgid;
    }

    /**
     * The destination GID's 16 bytes ({@code ibv_gid}): an IPv4 address as {@code ::ffff:a.b.c.d}
     * (RoCEv2's IPv4-mapped form). A new array.
     */
    public byte[] gid() {
        return gidOf(dgid);
    }

    /** The 16-byte GID of an IP address (IPv4 addresses IPv4-mapped). */
    static byte[] gidOf(InetAddress a) {
        byte[] raw = a.getAddress();
        if (raw.length == 16) {
            return raw;
        }
        byte[] gid = new byte[16];
        gid[10] = (byte) 0xFF;
        gid[11] = (byte) 0xFF;
        System.arraycopy(raw, 0, gid, 12, 4);
        return gid;
    }

    /** The destination's datagram port (0 where the provider needs none). */
    public int port() {
        return port;
    }

    /** True if the GID is a multicast group's. */
    public boolean isMulticast() {
        return dgid.isMulticastAddress();
    }

    /** The destination as an endpoint ({@link #dgid()}, {@link #port()}). */
    public InetSocketAddress endpoint() {
        return new InetSocketAddress(dgid, port);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof AhAttributes a && a.port == port && a.dgid.equals(dgid);
    }

    @Override
    public int hashCode() {
        return Objects.hash(dgid, port);
    }

    @Override
    public String toString() {
        return "AhAttributes[" + dgid.getHostAddress() + (port != 0 ? " port " + port : "") + "]";
    }
}
