package io.regmem.registration.udp;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.core.internal.Sysctl;
import io.regmem.registration.link.HostPort;
import io.regmem.registration.spi.DatagramDrops;
import io.regmem.registration.spi.GracePeriod;
import io.regmem.registration.spi.ProviderOptions;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.util.Set;
import java.util.function.Supplier;

/**
 * A device's unreliable datagrams over the kernel's UDP/IP, for a provider whose own transport has
 * none (ucx, shm): its {@link UdpCarrier}, its sockets opened at the first use (the device's datagram
 * address asked for, or its first UD QP). Its device options ({@link #OPTIONS}): {@code datagramBind}
 * (default {@code 127.0.0.1:0}: an IPv4 address of this host that peers address the device's UD QPs
 * by, and a port, 0 for any), {@code multicastPort} (default {@value UdpCarrier#DEFAULT_MULTICAST_PORT}:
 * the port every member of a group listens on; all devices that share groups use the same),
 * {@code udOversizeError} (as soft's).
 */
public final class UdpDatagrams {
    /** The device options it reads. */
    public static final Set<String> OPTIONS = Set.of("datagramBind", "multicastPort", "udOversizeError");
    private final String provider;
    private String owner;
    private final HostPort bind;
    private final int multicastPort;
    private final boolean oversizeError;
    private Supplier<byte[]> secret;
    private GracePeriod grace;
    private volatile UdpCarrier carrier;
    private DatagramDrops drops = (reason, count) -> { };
    private LocalGroups.Factory localGroups;

    /**
     * Reads the options (before the device opens).
     *
     * @throws RdmaException {@link Errno#EINVAL} for a {@code datagramBind} that is not host:port, a
     *                       {@code multicastPort} outside [1, 65535], or a {@code udOversizeError} not a boolean
     */
    public UdpDatagrams(ProviderOptions options) {
        this.provider = options.provider();
        this.owner = provider;
        this.bind = HostPort.parseForBind(provider + " device", provider, options.get("datagramBind", "127.0.0.1:0"));
        this.multicastPort = (int) options.number("multicastPort", UdpCarrier.DEFAULT_MULTICAST_PORT, 1, 65535);
        this.oversizeError = options.flag("udOversizeError", false);
    }

    /** The device's name (for messages), secret (the datagrams' key) and grace period, once it opened. */
    public UdpDatagrams of(String deviceName, Supplier<byte[]> deviceSecret, GracePeriod deviceGrace) {
        this.owner = provider + " device " + deviceName;
        this.secret = deviceSecret;
        this.grace = deviceGrace;
        return this;
    }

    /** Carries the device's groups among this host's processes with {@code factory} (set before the first use). */
    public UdpDatagrams localGroups(LocalGroups.Factory factory) {
        this.localGroups = factory;
        return this;
    }

    /** True if a UD send over the path MTU completes {@code LOC_LEN_ERR} (option {@code udOversizeError}). */
    public boolean oversizeError() {
        return oversizeError;
    }

    /** The carrier, its sockets opened at the first call. */
    public UdpCarrier carrier() {
        UdpCarrier c = carrier;
        if (c != null) {
            return c;
        }
        synchronized (this) {
            if (carrier == null) {
                InetAddress host;
                try {
                    host = InetAddress.getByName(bind.host());
                } catch (UnknownHostException e) {
                    throw new RdmaException(Errno.EADDRNOTAVAIL, owner + ": datagramBind host '" + bind.host() + "' is unknown", e);
                }
                UdpCarrier made = new UdpCarrier(owner, new InetSocketAddress(host, bind.port()), multicastPort, secret.get(), grace,
                        localGroups);
                made.countDropsIn(drops);
                carrier = made;
            }
            return carrier;
        }
    }

    /** Where the device counts drops before a QP ({@code ProviderDevice.countDropsIn}). */
    public synchronized void countDropsIn(DatagramDrops sink) {
        drops = sink;
        if (carrier != null) {
            carrier.countDropsIn(sink);
        }
    }

    /** True if the carrier is open and carries QPs (a progress thread then must not sleep). */
    public boolean active() {
        UdpCarrier c = carrier;
        return c != null && c.hasQps();
    }

    /** Progresses the carrier, if it is open and carries QPs; the work done. */
    public int progress() {
        UdpCarrier c = carrier;
        return c == null ? 0 : c.progress(); // (nothing without QPs: UdpCarrier.progress)
    }

    /** True if {@link #progress} has nothing to do now (no lock taken: {@code UdpCarrier.idle}). */
    public boolean idle() {
        UdpCarrier c = carrier;
        return c == null || c.idle();
    }

    /** Closes the sockets, if any were opened. */
    public synchronized void close() {
        if (carrier != null) {
            carrier.close();
        }
    }

    /**
     * The multicast groups a socket of this host may join ({@code net.ipv4.igmp_max_memberships}, 20
     * if it cannot be read): the {@code maxMcastGroups} of a device that carries datagrams so.
     */
    public static int kernelGroups() {
        try {
            return Math.max(1, Math.min(8192, Sysctl.readInt("net/ipv4/igmp_max_memberships")));
        } catch (IOException | RuntimeException e) {
            return 20;
        }
    }
}
