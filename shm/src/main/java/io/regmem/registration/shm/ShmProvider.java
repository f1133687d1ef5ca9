package io.regmem.registration.shm;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.core.internal.Libc;
import io.regmem.registration.DeviceAttributes;
import io.regmem.registration.link.Link;
import io.regmem.registration.spi.ProviderDevice;
import io.regmem.registration.spi.ProviderOptions;
import io.regmem.registration.udp.UdpDatagrams;
import io.regmem.registration.spi.RdmaProvider;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.agrona.concurrent.IdleStrategy;

/**
 * The shm provider, {@code RdmaDevice.open("shm", options)}: regmem's verbs between processes of one
 * host (and between devices of one JVM) over the same-host lane: rings in a sealed memfd per
 * connection, where the target checks every request against its own key tables and moves the bytes
 * itself. Linux only; no native library beyond libc. Connections are made by {@code host:port}
 * ({@link ShmCm}) with the same authenticated handshake and secret as ucx.
 *
 * <p>Options: the {@link DeviceAttributes} limits, which lower what the device accepts;
 * {@code iWarp=true} and {@code integrityHandover=true} are refused with {@link Errno#EOPNOTSUPP};
 * {@code progressThread=true} and {@code idleStrategy} ({@code busy}, {@code yield}, {@code backoff}
 * (the default), {@code sleep}) as ucx's, except that with {@code backoff} or {@code sleep} a progress
 * thread that found nothing to do for 50 us sleeps until a peer publishes work into one of its lanes
 * and wakes it (a futex in the lane's memory), or 10 ms pass; {@code secret}, {@code secretFile},
 * {@code handshakeTimeoutMillis} (default 10000) and {@code answerTimeoutMillis} (default 5000; 0: for
 * ever) as ucx's; {@code inlineThreshold} (default {@value #INLINE_THRESHOLD} bytes): a WRITE's or
 * SEND's bytes up to it travel inside the request, larger ones are pulled by the target (one
 * {@code process_vm_readv}) or, where the kernel does not allow that, streamed through the ring; a
 * READ's bytes up to it come back through the ring, larger ones are copied out of the target by the
 * initiator from the range the target granted (or through the ring where that is not allowed);
 * {@code ringBytes} (default 2 MiB, a power of two from 64 KiB to 256 MiB): each of a connection's
 * four rings, asked for by the connecting side; {@code pull=false}: this device never copies out of its
 * peers (as where the kernel refuses it), so their large WRITEs and SENDs are streamed through the ring,
 * and its own large READs come back through it.
 */
public final class ShmProvider implements RdmaProvider {
    /**
     * The default {@code inlineThreshold}: up to it a copy into the ring and one out of it cost less than the
     * target's {@code process_vm_readv}, a system call of a few microseconds whatever its size (BENCHMARKS.md).
     */
    static final long INLINE_THRESHOLD = 16384;
    /** The default {@code answerTimeoutMillis}. */
    static final long ANSWER_TIMEOUT_MILLIS = 5_000;
    private static final Set<String> OWN_OPTIONS = Stream.concat(Stream.of("progressThread", "idleStrategy", "secret",
            "secretFile", "handshakeTimeoutMillis", "answerTimeoutMillis", "inlineThreshold", "ringBytes", "pull", "groupRingBytes",
            "multicastUdp"),
            UdpDatagrams.OPTIONS.stream()).collect(Collectors.toUnmodifiableSet());
    /**
     * What an shm device offers before options lower it: the usual limits, no iWARP, no signature
     * offload; as many multicast groups as one socket may join (its unicast datagrams ride the kernel's
     * UDP; its groups are shared memory, and also UDP multicast with {@code multicastUdp}).
     */
    static final DeviceAttributes DEFAULTS = DeviceAttributes.defaults().withIntegrityHandover(false)
            .withMulticast(UdpDatagrams.kernelGroups(), 56);
    private static final AtomicInteger DEVICES = new AtomicInteger();
    /** The default {@code groupRingBytes}: the ring of each QP's publication to a group. */
    static final long GROUP_RING = SameHostGroups.DEFAULT_RING;

    /** Made by {@link java.util.ServiceLoader}. */
    public ShmProvider() {
    }

    @Override
    public String name() {
        return "shm";
    }

    /**
     * Opens an shm device.
     *
     * @throws RdmaException {@link Errno#ENOSYS} where the lane's system calls are not there (not Linux,
     *                       native access refused); {@link Errno#EINVAL} for an unknown option or a bad
     *                       value; {@link Errno#EOPNOTSUPP} for a capability the lane does not have
     */
    @Override
    public ProviderDevice open(Map<String, String> given) {
        ProviderOptions options = ProviderOptions.of("shm", given, OWN_OPTIONS);
        Libc.requireBound("shm");
        boolean progress = options.progressThread();
        IdleStrategy idle = options.idleStrategy();
        byte[] secret = options.secret();
        int handshakeMillis = (int) options.millis("handshakeTimeoutMillis", Link.HANDSHAKE_MILLIS, 1);
        long answerMillis = options.millis("answerTimeoutMillis", ANSWER_TIMEOUT_MILLIS, 0);
        long inline = options.number("inlineThreshold", INLINE_THRESHOLD, 0, 65536);
        long ring = options.number("ringBytes", Lane.DEFAULT_CAPACITY, LaneOffer.MIN_RING, LaneOffer.MAX_RING);
        if (Long.bitCount(ring) != 1) {
            throw options.invalid("ringBytes must be a power of two, got " + ring);
        }
        boolean pull = options.flag("pull", true);
        long groupRing = options.number("groupRingBytes", GROUP_RING, GroupRing.MIN_CAPACITY, GroupRing.MAX_CAPACITY);
        if (Long.bitCount(groupRing) != 1) {
            throw options.invalid("groupRingBytes must be a power of two, got " + groupRing);
        }
        boolean multicastUdp = options.flag("multicastUdp", false);
        DeviceAttributes attributes = options.attributes(DEFAULTS, "its READs carry no remotely written sink",
                "no T10-PI signature offload");
        UdpDatagrams datagrams = new UdpDatagrams(options).localGroups(SameHostGroups.factory((int) groupRing, multicastUdp));
        ShmDevice device = new ShmDevice(attributes, secret, handshakeMillis, answerMillis * 1_000_000L, inline, ring, pull);
        device.datagrams = datagrams.of("shm-" + ProcessHandle.current().pid() + "-" + DEVICES.incrementAndGet(), device::secret,
                device.grace);
        return progress ? device.startProgressThread(idle, options.idleSleeps()) : device;
    }
}
