package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.util.Arrays;
import java.util.Map;

/**
 * What a device can do: the limits of {@code ib_device_attr} that regmem's paths depend on.
 *
 * @param maxSendSge            SGEs per send work request
 * @param maxRecvSge            SGEs per receive work request
 * @param maxSgeRd              SGEs per RDMA READ work request
 * @param maxSglRd              READ SGE count above which registration is preferred (0: never)
 * @param maxFastRegPageListLen pages one fast-reg MR can map
 * @param maxQpWr               work requests per queue
 * @param maxCqe                entries per completion queue
 * @param maxMrSize             bytes one memory region can cover
 * @param pageSize              the device's page size for fast registration
 * @param iWarp                 iWARP semantics (READ sinks are remotely written, READ_WITH_INV)
 * @param integrityHandover     T10-PI signature offload ({@code IBK_INTEGRITY_HANDOVER}): integrity MRs and
 *                              QPs created with {@link QpInitAttributes#integrity(boolean)}; without it both
 *                              are refused with {@link Errno#EOPNOTSUPP}
 * @param activeMtu             the port's path MTU in bytes ({@code ibv_port_attr.active_mtu}: 256, 512, 1024,
 *                              2048 or 4096): the largest message an unreliable-datagram QP sends
 * @param maxMcastGroups        multicast groups the device's QPs may be attached to at once
 *                              ({@code max_mcast_grp}); 0: no multicast (a join or attach is
 *                              {@link Errno#EOPNOTSUPP})
 * @param maxMcastQpAttach      QPs of the device attached to one group ({@code max_mcast_qp_attach})
 */
public record DeviceAttributes(int maxSendSge, int maxRecvSge, int maxSgeRd, int maxSglRd, int maxFastRegPageListLen,
                               int maxQpWr, int maxCqe, long maxMrSize, long pageSize, boolean iWarp,
                               boolean integrityHandover, int activeMtu, int maxMcastGroups, int maxMcastQpAttach) {

    /** The path MTUs a port may have ({@code enum ibv_mtu}), in bytes. */
    private static final int[] MTUS = {256, 512, 1024, 2048, 4096};

    /**
     * Checks the limits: every count positive ({@code maxSglRd} and the multicast limits may be 0, the
     * latter two both or neither), the page size a power of two, the MTU one of 256 to 4096.
     */
    public DeviceAttributes {
        if (maxSendSge < 1 || maxRecvSge < 1 || maxSgeRd < 1 || maxSglRd < 0 || maxFastRegPageListLen < 1
                || maxQpWr < 1 || maxCqe < 1 || maxMrSize < 1 || Long.bitCount(pageSize) != 1
                || Arrays.stream(MTUS).noneMatch(m -> m == activeMtu) || maxMcastGroups < 0 || maxMcastQpAttach < 0
                || (maxMcastGroups == 0) != (maxMcastQpAttach == 0)) {
            throw new RdmaException(Errno.EINVAL, "DeviceAttributes: every limit must be positive (maxSglRd may be 0; "
                    + "maxMcastGroups and maxMcastQpAttach both 0 or both positive), pageSize a power of two and "
                    + "activeMtu one of " + Arrays.toString(MTUS) + ": " + describe(maxSendSge, maxRecvSge, maxSgeRd,
                    maxSglRd, maxFastRegPageListLen, maxQpWr, maxCqe, maxMrSize, pageSize, activeMtu, maxMcastGroups,
                    maxMcastQpAttach));
        }
    }

    /**
     * The limits with signature offload (as every device before the capability existed), a 4096-byte
     * MTU and rxe's multicast limits (8192 groups, 56 QPs per group).
     */
    public DeviceAttributes(int maxSendSge, int maxRecvSge, int maxSgeRd, int maxSglRd, int maxFastRegPageListLen,
                            int maxQpWr, int maxCqe, long maxMrSize, long pageSize, boolean iWarp) {
        this(maxSendSge, maxRecvSge, maxSgeRd, maxSglRd, maxFastRegPageListLen, maxQpWr, maxCqe, maxMrSize, pageSize,
                iWarp, true, 4096, 8192, 56);
    }

    /** These attributes without (or with) signature offload. */
    public DeviceAttributes withIntegrityHandover(boolean on) {
        return new DeviceAttributes(maxSendSge, maxRecvSge, maxSgeRd, maxSglRd, maxFastRegPageListLen, maxQpWr, maxCqe,
                maxMrSize, pageSize, iWarp, on, activeMtu, maxMcastGroups, maxMcastQpAttach);
    }

    /** These attributes without multicast ({@code maxMcastGroups} and {@code maxMcastQpAttach} 0). */
    public DeviceAttributes withoutMulticast() {
        return withMulticast(0, 0);
    }

    /** These attributes with the given multicast limits (both 0, or both positive). */
    public DeviceAttributes withMulticast(int groups, int qpAttach) {
        return new DeviceAttributes(maxSendSge, maxRecvSge, maxSgeRd, maxSglRd, maxFastRegPageListLen, maxQpWr, maxCqe,
                maxMrSize, pageSize, iWarp, integrityHandover, activeMtu, groups, qpAttach);
    }

    private static String describe(Object... v) {
        return Arrays.toString(v);
    }

    /**
     * Limits like a current RoCE/InfiniBand NIC's: 30 SGEs, 512-page fast-reg lists, 32768-deep queues,
     * signature offload, a 4096-byte path MTU, 8192 multicast groups of up to 56 QPs each (rxe's).
     */
    public static DeviceAttributes defaults() {
        return new DeviceAttributes(30, 30, 30, 0, 512, 32768, 1 << 22, Long.MAX_VALUE, 4096, false, true, 4096, 8192, 56);
    }

    /**
     * These attributes with the given options applied. Keys are the component names
     * ({@code maxSendSge=2}, {@code iWarp=true}, ...); unknown keys are left for the provider.
     *
     * @throws RdmaException {@link Errno#EINVAL} for a value that does not parse or breaks a limit
     */
    public DeviceAttributes with(Map<String, String> options) {
        try {
            return new DeviceAttributes(
                    intOpt(options, "maxSendSge", maxSendSge), intOpt(options, "maxRecvSge", maxRecvSge),
                    intOpt(options, "maxSgeRd", maxSgeRd), intOpt(options, "maxSglRd", maxSglRd),
                    intOpt(options, "maxFastRegPageListLen", maxFastRegPageListLen),
                    intOpt(options, "maxQpWr", maxQpWr), intOpt(options, "maxCqe", maxCqe),
                    options.containsKey("maxMrSize") ? Long.parseLong(options.get("maxMrSize")) : maxMrSize,
                    options.containsKey("pageSize") ? Long.parseLong(options.get("pageSize")) : pageSize,
                    options.containsKey("iWarp") ? parseBoolean("iWarp", options.get("iWarp")) : iWarp,
                    options.containsKey("integrityHandover")
                            ? parseBoolean("integrityHandover", options.get("integrityHandover")) : integrityHandover,
                    intOpt(options, "activeMtu", activeMtu), intOpt(options, "maxMcastGroups", maxMcastGroups),
                    intOpt(options, "maxMcastQpAttach", maxMcastQpAttach));
        } catch (NumberFormatException e) {
            throw new RdmaException(Errno.EINVAL, "DeviceAttributes: option value is not a number: " + e.getMessage(), e);
        }
    }

    private static int intOpt(Map<String, String> o, String key, int dflt) {
        return o.containsKey(key) ? Integer.parseInt(o.get(key)) : dflt;
    }

    private static boolean parseBoolean(String key, String s) {
        if (!"true".equalsIgnoreCase(s) && !"false".equalsIgnoreCase(s)) {
            throw new RdmaException(Errno.EINVAL, "DeviceAttributes: " + key + " must be true or false, got " + s);
        }
        return Boolean.parseBoolean(s);
    }
}
