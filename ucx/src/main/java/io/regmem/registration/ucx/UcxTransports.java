package io.regmem.registration.ucx;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Which transports a connection runs on, and whether its RDMA WRITEs and READs may go as UCX's own
 * puts and gets by default. They may only where the hardware checks what regmem's target would: on
 * InfiniBand and RoCE ({@code rc_*}, {@code dc_*}; {@code ud_*} carries active messages only) the
 * NIC refuses a put or get whose remote key is wrong, stale, out of range or lacks the right, and
 * {@code ucp_mem_unmap} (a deregistration) revokes the key before it returns, which is the promise
 * of {@code ib_dereg_mr}. On shared memory ({@code posix}, {@code sysv}, {@code cma}, {@code knem},
 * {@code xpmem}), TCP and {@code self} nothing checks a key but the target's code, so requests go
 * as messages the target checks. One transport of another kind on an endpoint is enough to keep it
 * on messages (UCX picks a lane per operation and size, so any of them may carry a put).
 *
 * <p>UCX tells an endpoint's transports from 1.14 on ({@code UCP_EP_ATTR_FIELD_TRANSPORTS}); regmem
 * asks only from 1.19 on, the first whose remote-key unpack survives a key of memory that is gone
 * (see {@link UcxProvider}). Before that, and whenever the answer is missing, a connection uses
 * messages.
 */
final class UcxTransports {
    private UcxTransports() {
    }

    /** UCX transports whose remote keys the NIC enforces and whose unmap revokes them. */
    static final Set<String> NIC_ENFORCED = Set.of("rc_verbs", "rc_mlx5", "dc_mlx5", "ud_verbs", "ud_mlx5");
    /** Of those, the ones that carry puts and gets (ud carries active messages and wire-up only). */
    private static final Set<String> RMA = Set.of("rc_verbs", "rc_mlx5", "dc_mlx5");

    /**
     * Null if a connection on {@code transports} (UCX's names, as {@code ucp_ep_query} reports them;
     * null: unknown) of UCX {@code major.minor} carries WRITEs and READs as NIC-checked puts and gets;
     * else why it carries them as messages the target checks.
     */
    static String whyNotOneSided(int major, int minor, List<String> transports) {
        if (major < 1 || (major == 1 && minor < UcxProvider.ONE_SIDED_MINOR)) {
            return "UCX " + major + "." + minor + " cannot tell an endpoint's transports safely (1." + UcxProvider.ONE_SIDED_MINOR
                    + " or later can)";
        }
        if (transports == null || transports.isEmpty()) {
            return "UCX did not say which transports the endpoint uses";
        }
        boolean rma = false;
        for (String t : transports) {
            if (t == null || !NIC_ENFORCED.contains(t)) {
                return "the endpoint uses " + t + ", whose keys no NIC checks";
            }
            rma |= RMA.contains(t);
        }
        return rma ? null : "no transport of the endpoint carries puts and gets (" + transports + ")";
    }

    private static final Pattern LANE = Pattern.compile("lane\\[\\d+\\]:\\s*\\d+:([A-Za-z0-9_]+)/");

    /**
     * The transport of each lane in {@code ucp_ep_print_info}'s description of an endpoint (its lines
     * {@code lane[0]:  3:posix/memory.0 md[1] -> ...}), or null if it names none.
     */
    static List<String> lanes(String info) {
        if (info == null) {
            return null;
        }
        List<String> tls = new ArrayList<>();
        Matcher m = LANE.matcher(info);
        while (m.find()) {
            tls.add(m.group(1));
        }
        return tls.isEmpty() ? null : tls;
    }

    /**
     * True if large transfers on an endpoint whose lanes run {@code lanes} (null: unknown) should go
     * by UCX's rendezvous: everywhere but on TCP alone, where UCX 1.13's rendezvous adds a round trip
     * and moves the bytes through the same socket anyway (eager messages there measured 2-3x the
     * bandwidth of rendezvous ones).
     */
    static boolean rendezvousPays(List<String> lanes) {
        if (lanes == null) {
            return true;
        }
        for (String t : lanes) {
            if (!t.equals("tcp")) {
                return true;
            }
        }
        return false;
    }

    /** The most transports asked for. */
    private static final int MAX = 32;
    // ucp_ep_attr_t (UCX 1.19): field_mask, name[32], local and remote sockaddr_storage (128 each),
    // then transports {entries, num_entries, entry_size}; ucp_transport_entry_t {transport_name, device_name}.
    private static final long ATTR_SIZE = 512;
    private static final long ATTR_TRANSPORTS = 8 + 32 + 128 + 128;
    private static final long FIELD_TRANSPORTS = 1L << 3;
    private static final long ENTRY_SIZE = 16;

    /**
     * The transport names of endpoint {@code ep} (worker lock held), or null where UCX cannot tell:
     * before 1.19 (see above), or if the query fails.
     */
    static List<String> of(Ucp ucp, long ep) {
        if (ep == 0 || ucp.major < 1 || (ucp.major == 1 && ucp.minor < UcxProvider.ONE_SIDED_MINOR)) {
            return null;
        }
        try (Arena a = Arena.ofConfined()) {
            MemorySegment attr = a.allocate(ATTR_SIZE, 8);
            MemorySegment entries = a.allocate(MAX * ENTRY_SIZE, 8);
            attr.set(ValueLayout.JAVA_LONG, 0, FIELD_TRANSPORTS);
            attr.set(ValueLayout.JAVA_LONG, ATTR_TRANSPORTS, entries.address());
            attr.set(ValueLayout.JAVA_INT, ATTR_TRANSPORTS + 8, MAX);
            attr.set(ValueLayout.JAVA_LONG, ATTR_TRANSPORTS + 16, ENTRY_SIZE);
            if (ucp.epQuery(ep, attr.address()) != UcpLayout.UCS_OK) {
                return null;
            }
            int n = attr.get(ValueLayout.JAVA_INT, ATTR_TRANSPORTS + 8);
            if (n < 0 || n > MAX) {
                return null;
            }
            List<String> names = new ArrayList<>(n);
            for (int i = 0; i < n; i++) {
                long name = entries.get(ValueLayout.JAVA_LONG, i * ENTRY_SIZE);
                names.add(name == 0 ? null : MemorySegment.ofAddress(name).reinterpret(256).getString(0));
            }
            return names;
        }
    }
}
