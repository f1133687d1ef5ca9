package io.regmem.registration.udp;

import io.regmem.core.RdmaException;
import java.lang.foreign.MemorySegment;
import java.net.InetAddress;
import java.net.InetSocketAddress;

/**
 * How a provider carries multicast groups among the processes of one host without the kernel's IP
 * multicast (shm: one shared-memory ring per sending QP and group, that every member maps read-only).
 * The datagrams it carries are the same bytes as over UDP ({@link UdpWire}: header, message, tag),
 * and the carrier checks them the same way once they are out of the ring. Called by a
 * {@link UdpCarrier}: {@link #join} and {@link #leave} under its lock, {@link #publish} under the
 * sending QP's lock, {@link #next} under its receive lock.
 */
public interface LocalGroups {
    /** Makes a device's local groups once its carrier is open. */
    interface Factory {
        /**
         * The local groups of the device {@code owner} (for messages) whose datagram address is
         * {@code endpoint}, keyed as its datagrams are ({@code k0}, {@code k1}: the SipHash key its
         * secret gives), on multicast port {@code multicastPort} (devices share groups only on the same port).
         */
        LocalGroups open(String owner, InetSocketAddress endpoint, long k0, long k1, int multicastPort);
    }

    /**
     * This device starts hearing {@code group} (its first member QP): every publication to the group
     * on this host is mapped before this returns, and each one's datagrams written after it returned
     * are heard.
     *
     * @throws RdmaException if the device cannot take part in groups on this host
     */
    void join(InetAddress group);

    /** This device stops hearing {@code group} (its last member QP left): its publications are unmapped. */
    void leave(InetAddress group);

    /**
     * Writes the datagram {@code datagram[0, length)} (header, message and tag) once into QP
     * {@code qpn}'s publication to {@code group} ({@code groupLo}: the group as the header carries it),
     * made at its first datagram (every member on this host maps it then). Never waits for a member.
     *
     * @throws RdmaException if the publication cannot be made
     */
    void publish(int qpn, InetAddress group, long groupLo, MemorySegment datagram, int length);

    /**
     * A place in a publication for one datagram, written in place (no copy of it in between), under
     * the sending QP's lock: {@link #claim}, write the datagram's bytes into {@link #ring()} there,
     * {@link #commit}. Members see nothing of a claim until it is committed; one never committed (its
     * source failed under the copy) is taken again by the next claim.
     */
    interface Claim {
        /** The memory the datagrams are written to. */
        MemorySegment ring();

        /**
         * True until the publication ends: a sender may keep this claim for its next datagrams to the
         * group while it is open (and asks {@link #publication} again once it is not).
         */
        boolean open();

        /**
         * Claims room for a datagram of {@code length} bytes (header, message and tag).
         *
         * @return where in {@link #ring()} its bytes go
         * @throws IllegalStateException if the publication ended (its QP was destroyed meanwhile)
         */
        long claim(int length);

        /** The claimed datagram is written: members may take it. */
        void commit();
    }

    /**
     * QP {@code qpn}'s publication to {@code group} ({@code groupLo}: the group as the header carries
     * it), made at its first datagram (every member on this host maps it then): where a datagram is
     * claimed, written in place and committed ({@link #publish} in three steps).
     *
     * @throws RdmaException if the publication cannot be made
     */
    Claim publication(int qpn, InetAddress group, long groupLo);

    /** QP {@code qpn} is destroyed: its publications end (members take what is left of them, then unmap them). */
    void retire(int qpn);

    /**
     * Copies the next datagram of any publication this device hears into {@code into}.
     *
     * @return its length, or -1 if there is none now
     */
    int next(MemorySegment into);

    /** True if a publication this device hears may hold a datagram it did not take yet (no lock, no allocation). */
    boolean ready();

    /** The datagram address of the device whose datagram {@link #next} copied last. */
    InetSocketAddress from();

    /** True if this device hears the publications of the device at {@code endpoint} (its datagrams over UDP are the same). */
    boolean hears(InetSocketAddress endpoint);

    /** True if group datagrams also go over the kernel's UDP multicast (to members on other hosts). */
    boolean alsoUdp();

    /** Ends every publication and unmaps every one this device heard. */
    void close();
}
