package io.regmem.registration.shm;

import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;

/**
 * Sets up a same-host connection's lane once the authenticated handshake has exchanged the two
 * {@link LaneOffer}s: the requester makes the sealed memfd and hands it over the listener's one-time
 * abstract socket with the ticket; each side checks through the kernel that the socket's peer is the
 * process the handshake named ({@link PeerProcess}); each copies the other's probe word to learn
 * whether the kernel lets it copy out of the other (Yama, seccomp, namespaces) and says so in the
 * lane. Where Yama's scope is 1, the requester first lets its listener, and no other process, trace
 * it ({@code PR_SET_PTRACER}). Used by the shm provider; every step has the handshake's deadline.
 */
final class LaneSetup {
    private static final System.Logger LOG = System.getLogger("io.regmem.registration.shm");
    private static final SecureRandom RANDOM = new SecureRandom();
    /** This process's probe word: a random value at a fixed address, for the peers' probe copies. */
    private static final MemorySegment PROBE = Arena.global().allocate(8, 8);
    private static final long PROBE_VALUE = RANDOM.nextLong();
    private static final String BOOT_ID = PeerProcess.bootId();
    private static final long SELF_START = PeerProcess.startTime(PeerProcess.self());
    private static final long NETNS = PeerProcess.netns();
    /** Set once the warning that copies are refused was logged. */
    private static volatile boolean warned;

    static {
        PROBE.set(JAVA_LONG, 0, PROBE_VALUE);
    }

    private LaneSetup() {
    }

    /** This process's offer (a requester's: no socket). */
    static LaneOffer offer(long ringBytes) {
        return new LaneOffer(PeerProcess.self(), SELF_START, BOOT_ID, NETNS, PROBE.address(), PROBE_VALUE, ringBytes, null, null);
    }

    /** True if the peer's offer comes from this host (same boot id). */
    static boolean sameHost(LaneOffer peer) {
        return !BOOT_ID.isEmpty() && BOOT_ID.equals(peer.bootId());
    }

    /**
     * Why the lane cannot work with the peer of {@code offer}, or null if it may: another host, or
     * another network namespace (the listener's socket is abstract: unreachable from another one).
     */
    static String unreachable(LaneOffer peer) {
        if (!sameHost(peer)) {
            return "the peer is on another host (boot id " + peer.bootId() + ")";
        }
        if (NETNS != 0 && peer.netns() != 0 && NETNS != peer.netns()) {
            return "the peer is in another network namespace (net:[" + peer.netns() + "], this process net:[" + NETNS
                    + "]): its abstract sockets are out of reach";
        }
        return null;
    }

    /**
     * A listener's offer from its ACCEPT, checked: well formed, from this host, for rings of
     * {@code ringBytes} (the size the requester asked for).
     *
     * @throws IOException naming the rule it breaks
     */
    static LaneOffer listenerOffer(byte[] bytes, long ringBytes) throws IOException {
        LaneOffer theirs = LaneOffer.decode(bytes, true);
        if (!sameHost(theirs)) {
            throw new IOException("the listener is on another host (boot id " + theirs.bootId() + "): the lane connects "
                    + "processes of one host; use ucx between hosts");
        }
        if (theirs.ringBytes() != ringBytes) {
            throw new IOException("the listener answered rings of " + theirs.ringBytes() + " bytes, not " + ringBytes);
        }
        return theirs;
    }

    /** Whether this process may copy out of {@code pid}, by copying its probe word; logs once when refused. */
    static boolean probe(int pid, long address, long value) {
        long[] out = new long[1];
        int rc = PeerProcess.probe(pid, address, out);
        boolean ok = rc == 0 && out[0] == value;
        if (!ok && !warned) {
            warned = true;
            LOG.log(System.Logger.Level.WARNING, "regmem shm: this process may not copy out of its peer process " + pid
                    + " (process_vm_readv: " + (rc == 0 ? "wrong value" : "errno " + -rc) + "; Yama ptrace_scope "
                    + PeerProcess.ptraceScope() + "): large transfers from it go through the rings (two copies)");
        }
        return ok;
    }

    /**
     * A lane between two QPs of this JVM (one memfd, mapped once per side); each pulls if it may, and
     * says whether its progress thread may sleep.
     */
    static Lane[] local(long ringBytes, boolean activePulls, boolean passivePulls, boolean activeSleeps,
            boolean passiveSleeps) {
        int fd = Lane.create(ringBytes);
        try {
            int self = PeerProcess.self();
            Lane a = Lane.attach(fd, ringBytes, true, self, null);
            Lane b = Lane.attach(fd, ringBytes, false, self, null);
            boolean pulls = probe(self, PROBE.address(), PROBE_VALUE);
            a.announce(pulls && activePulls, activeSleeps);
            b.announce(pulls && passivePulls, passiveSleeps);
            return new Lane[] {a, b};
        } finally {
            SharedFile.close(fd);
        }
    }

    // ---- the listener's side ----

    /** A listener's one-time socket for one request, and its offer; close it when done. */
    static final class Listening implements AutoCloseable {
        final LaneOffer offer;
        private final int socket;

        Listening(long ringBytes) throws IOException {
            byte[] ticket = new byte[LaneOffer.TICKET];
            RANDOM.nextBytes(ticket);
            byte[] tag = new byte[12];
            RANDOM.nextBytes(tag);
            String name = "regmem-shm-" + PeerProcess.self() + "-" + HexFormat.of().formatHex(tag);
            this.socket = UnixSocket.listen(name);
            this.offer = new LaneOffer(PeerProcess.self(), SELF_START, BOOT_ID, NETNS, PROBE.address(), PROBE_VALUE, ringBytes, name,
                    ticket);
        }

        /**
         * Takes the requester's memfd (it must come from the process {@code requester} names, with the
         * ticket), maps it as the listener's side and probes the requester; gives up at once when
         * {@code requesterGone} says the requester is gone (its handshake connection closed).
         *
         * @throws IOException naming what failed (the requester is then refused)
         */
        Lane complete(LaneOffer requester, long deadline, boolean mayPull, boolean maySleep, BooleanSupplier requesterGone)
                throws IOException {
            int sock = UnixSocket.accept(socket, deadline, requesterGone);
            PeerProcess peer = null;
            int fd = -1;
            try {
                peer = PeerProcess.of(sock, requester.startTime());
                UnixSocket.Received got = UnixSocket.receive(sock, LaneOffer.TICKET, deadline);
                fd = got.fd();
                if (!MessageDigest.isEqual(got.data(), offer.ticket())) {
                    throw new IOException("the lane's memfd came without this request's ticket");
                }
                if (fd < 0) {
                    throw new IOException("the lane's message carried no memfd");
                }
                String bad = SharedFile.verify(fd, Lane.size(offer.ringBytes()));
                if (bad != null) {
                    throw new IOException("the lane's memfd is refused: " + bad);
                }
                Lane lane = Lane.attach(fd, offer.ringBytes(), false, peer.pid, peer);
                if (lane == null) {
                    throw new IOException("the lane's memfd does not hold a lane of " + offer.ringBytes() + "-byte rings");
                }
                peer = null; // the lane's now
                lane.announce(mayPull && probe(lane.peerPid, requester.probeAddress(), requester.probeValue()), maySleep);
                return lane;
            } finally {
                SharedFile.close(fd);
                SharedFile.close(sock);
                if (peer != null) {
                    peer.close();
                }
            }
        }

        @Override
        public void close() {
            SharedFile.close(socket);
        }
    }

    // ---- the requester's side ----

    /**
     * Makes the lane with the listener that sent {@code listener}: hands it the memfd, waits until it
     * mapped it and probed this process, then probes it.
     *
     * @throws IOException naming what failed
     */
    static Lane join(LaneOffer listener, long ringBytes, long deadline, boolean mayPull, boolean maySleep)
            throws IOException {
        int sock = UnixSocket.connect(listener.socket());
        PeerProcess peer = null;
        int fd = -1;
        Lane lane = null;
        try {
            peer = PeerProcess.of(sock, listener.startTime());
            if (PeerProcess.ptraceScope() == 1) {
                PeerProcess.allowTracer(peer.pid); // Yama scope 1: this listener, and no other process, may copy out
            }
            fd = Lane.create(ringBytes);
            lane = Lane.attach(fd, ringBytes, true, peer.pid, peer);
            peer = null;
            UnixSocket.send(sock, listener.ticket(), fd);
            while (!lane.peerReady()) {
                if (System.nanoTime() - deadline > 0) {
                    throw new IOException("the listener did not take the lane in time");
                }
                if (lane.peer != null && !lane.peer.alive()) {
                    throw new IOException("the listener's process exited");
                }
                // The listener closes the socket once it mapped the lane and said so, or refused it.
                if (UnixSocket.readableNow(sock) && !lane.peerReady()) {
                    throw new IOException("the listener refused the lane (it closed the lane's socket)");
                }
                LockSupport.parkNanos(100_000L);
            }
            lane.announce(mayPull && probe(lane.peerPid, listener.probeAddress(), listener.probeValue()), maySleep);
            Lane done = lane;
            lane = null;
            return done;
        } finally {
            SharedFile.close(fd);
            SharedFile.close(sock);
            if (peer != null) {
                peer.close();
            }
            if (lane != null) {
                lane.close();
            }
        }
    }
}
