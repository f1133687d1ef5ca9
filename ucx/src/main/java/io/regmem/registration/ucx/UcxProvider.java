package io.regmem.registration.ucx;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.DeviceAttributes;
import io.regmem.registration.spi.ProviderDevice;
import io.regmem.registration.spi.ProviderOptions;
import io.regmem.registration.spi.RdmaProvider;
import io.regmem.registration.shm.SameHostGroups;
import io.regmem.registration.udp.UdpDatagrams;
import io.regmem.registration.link.Link;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import java.util.concurrent.atomic.AtomicInteger;
import org.agrona.concurrent.IdleStrategy;

/**
 * The UCX provider, {@code RdmaDevice.open("ucx", options)}, on the system's {@code libucp} (1.13 or
 * later) through FFM. A device is a UCP context and its workers (a main one, and one per peer
 * process it is connected to: {@link UcxChannel}); memory registers with
 * {@code ucp_mem_map}; every work request travels as a UCX active message that the target executes
 * against its own key tables (see {@link UcxReceiver}). Connections are made by {@code host:port}
 * ({@link UcxCm}): within the JVM in place, between processes and hosts over a TCP bootstrap socket
 * that exchanges worker addresses and then watches the peer. Each worker keeps one UCX endpoint per
 * peer worker. {@code -Dregmem.ucx.libdir=DIR} loads {@code libucp.so.0} from {@code DIR}.
 *
 * <p>Options: the {@link DeviceAttributes} limits ({@code maxSendSge=4}, ...), which lower what the
 * device accepts; {@code iWarp=true} and {@code integrityHandover=true} are refused with
 * {@link Errno#EOPNOTSUPP} (UCX offers neither iWARP READ semantics nor T10-PI offload);
 * {@code oneSided=true} (UCX 1.19 or later; {@link Errno#EOPNOTSUPP} before) trusts peers: RDMA WRITE and
 * READ into peer memory from the peer's {@code chunkSource()} go as UCX puts and gets, which the target
 * does not check (see README);
 * {@code progressThread=true} runs the device without anybody polling (a target that only serves
 * RDMA READs and WRITEs needs nobody to poll it), idling as {@code idleStrategy} says:
 * {@code busy} (spin), {@code yield}, {@code backoff} (the default: spin, yield, then park from 1 us
 * up to 1 ms) or {@code sleep} (park 100 us). {@code secret=TEXT} or {@code secretFile=PATH} give the
 * secret that authenticates connections between processes (else {@code REGMEM_SECRET},
 * {@code REGMEM_SECRET_FILE}, or the user's {@code ~/.regmem/secret}: {@code io.regmem.registration.link.Secret});
 * {@code handshakeTimeoutMillis} (default 10000) bounds each half of a connection's handshake;
 * {@code answerTimeoutMillis} (default 5000; 0: wait for ever) is how long a request waits for its
 * target's answer before it completes {@code RETRY_EXC_ERR} and its QP moves to the error state, as a
 * NIC's retries running out; {@code rndvThreshold} (default 65536) is the size from which a WRITE,
 * and a READ's answer, go by UCX's rendezvous protocol rather than eagerly with the header (through a
 * bounce buffer of the QP's at each end, so a peer never holds the application's memory);
 * {@code sameHostLane} (default true, or false where the environment has
 * {@code REGMEM_UCX_SAME_HOST_LANE=false}): a connection whose two devices both have it on and whose
 * peer is on this host (another process, or this JVM) runs over the shm provider's same-host lane
 * instead of UCX: rings in a sealed memfd, the target checking and copying itself
 * ({@code io.regmem.registration.shm.SameHostLane}); the handshake, its secret, the keys and the QPs stay
 * ucx's, and a debug line (System.Logger {@code io.regmem.registration.ucx}) says which way each
 * connection took. {@code oneSided} and {@code rndvThreshold} then do not apply to it.
 * {@code datagramBind}, {@code multicastPort} and {@code udOversizeError}: its UD QPs and multicast,
 * over UDP ({@link UdpDatagrams}); with {@code sameHostLane}, its groups' datagrams also go into
 * shared-memory rings that the members on this host (ucx or shm devices) read instead of the UDP copy
 * ({@link SameHostGroups}).
 */
public final class UcxProvider implements RdmaProvider {
    private static final AtomicInteger DEVICES = new AtomicInteger();

    /** Made by {@link java.util.ServiceLoader}. */
    public UcxProvider() {
    }

    @Override
    public String name() {
        return "ucx";
    }

    /** What a UCX device offers before options lower it: the usual limits, no iWARP, no signature offload. */
    static final DeviceAttributes DEFAULTS = DeviceAttributes.defaults().withIntegrityHandover(false)
            .withMulticast(UdpDatagrams.kernelGroups(), 56);

    /** Options besides the {@link DeviceAttributes} components. */
    private static final Set<String> OWN_OPTIONS = Stream.concat(Stream.of("progressThread", "idleStrategy", "oneSided",
            "secret", "secretFile", "handshakeTimeoutMillis", "answerTimeoutMillis", "rndvThreshold", "sameHostLane"),
            UdpDatagrams.OPTIONS.stream()).collect(Collectors.toUnmodifiableSet());
    /** The default of {@code rndvThreshold}, in bytes. */
    static final long RNDV_THRESHOLD = 65536;
    /** The UCX minor version (1.x) whose remote-key unpack survives a key of memory that is gone. */
    static final int ONE_SIDED_MINOR = 19;
    /** The default of {@code answerTimeoutMillis}. */
    static final long ANSWER_TIMEOUT_MILLIS = 5_000;

    /**
     * Opens a UCX device: a UCP context and worker.
     *
     * @throws RdmaException {@link Errno#ENODEV} if UCX is missing or too old (the message names the
     *                       package to install); {@link Errno#EINVAL} for an unknown option or a bad value;
     *                       {@link Errno#EOPNOTSUPP} for a capability UCX does not have
     */
    @Override
    public ProviderDevice open(Map<String, String> given) {
        ProviderOptions options = ProviderOptions.of("ucx", given, OWN_OPTIONS);
        boolean progress = options.progressThread();
        IdleStrategy idle = options.idleStrategy();
        boolean oneSided = options.flag("oneSided", false);
        boolean lane = options.flag("sameHostLane", UcxLanes.defaultEnabled());
        byte[] secret = options.secret();
        int handshakeMillis = (int) options.millis("handshakeTimeoutMillis", Link.HANDSHAKE_MILLIS, 1);
        long answerMillis = options.millis("answerTimeoutMillis", ANSWER_TIMEOUT_MILLIS, 0);
        long rndvThreshold = options.number("rndvThreshold", RNDV_THRESHOLD, 1, 1L << 31);
        DeviceAttributes attributes = options.attributes(DEFAULTS, "UCX READs carry no remotely written sink",
                "UCX has no T10-PI signature offload");
        Ucp ucp = Ucp.get();
        if (oneSided && (ucp.major < 1 || (ucp.major == 1 && ucp.minor < ONE_SIDED_MINOR))) {
            throw new RdmaException(Errno.EOPNOTSUPP, "ucx: oneSided=true needs UCX 1." + ONE_SIDED_MINOR + " or later, this is "
                    + ucp.major + "." + ucp.minor + "." + ucp.release + ": before 1.19, ucp_ep_rkey_unpack crashes the process "
                    + "when a peer's key names memory the peer has already given back (a peer that exits, or frees a "
                    + "pool), which a one-sided request unpacks at its first use (UCX commit 8721af17, 'Keep md_map "
                    + "consistent with tl_rkey'); every request goes as a checked message without it");
        }
        UdpDatagrams datagrams = new UdpDatagrams(options);
        if (lane) { // its groups' members on this host read its datagrams out of shared memory, as its connections do
            datagrams.localGroups(SameHostGroups.factory(SameHostGroups.DEFAULT_RING, true));
        }
        String name = "regmem-" + ProcessHandle.current().pid() + "-" + DEVICES.incrementAndGet();
        UcxDevice device = new UcxDevice(ucp, attributes, name, secret, handshakeMillis);
        device.oneSided = oneSided;
        device.lanes.enabled = lane;
        device.answerTimeoutNanos = answerMillis * 1_000_000L;
        device.rndvThreshold = rndvThreshold;
        device.datagrams = datagrams.of(name, device::secret, device.grace);
        return progress ? device.startProgressThread(idle, options.idleSleeps()) : device;
    }
}
