package io.regmem.registration.shm;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.io.EOFException;
import java.io.IOException;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * How a device's groups find the publications of the other devices of this host (and network
 * namespace) that use the same multicast port: each such device listens on an abstract Unix socket
 * named {@code regmem-groups-<port>-<pid>-<random>}, which the others find in {@code /proc/net/unix}. A
 * device that joins a group asks every other listener for its publications to the group
 * ({@link GroupMessage#FETCH}); a device that makes a publication hands it to every other listener
 * ({@link GroupMessage#OFFER}, pushed) before it writes into it. Either way the two cannot miss each
 * other: each listens before it looks. Every message is tagged with the devices' key; every wait has
 * a deadline ({@link #REPLY_NANOS}, {@link #FETCH_NANOS}), and a connection is never waited for ({@link UnixSocket#connectNow}):
 * a stopped or hostile device costs a joining or publishing one at most that deadline.
 *
 * <p>One daemon thread per device serves its listener and, every 100 ms, lets the groups sweep the
 * publications that ended ({@link ShmGroups#sweep}); nothing escapes it.
 */
final class GroupDirectory implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger("io.regmem.registration.shm");
    /** How long a device waits for another's reply. */
    static final long REPLY_NANOS = 100_000_000L;
    /**
     * How long a joining device waits for another's publications: longer than other replies, since a
     * fetch answered late (its process starved or paused) is made again later, and the datagrams
     * written meanwhile are not heard; a push answered late is made again too, but is read from its start.
     */
    static final long FETCH_NANOS = 500_000_000L;
    private static final String PREFIX = "regmem-groups-";
    private static final SecureRandom RANDOM = new SecureRandom();
    private final ShmGroups groups;
    final String name;
    private final String prefix;
    private final int listener;
    private final Thread server;
    private volatile boolean closed;

    /**
     * Listens, and starts serving.
     *
     * @throws RdmaException {@link Errno#ENOMEM} if the socket cannot be made
     */
    GroupDirectory(ShmGroups groups, int multicastPort) {
        this.groups = groups;
        byte[] r = new byte[8];
        RANDOM.nextBytes(r);
        this.prefix = PREFIX + multicastPort + "-";
        this.name = prefix + ProcessHandle.current().pid() + "-" + HexFormat.of().formatHex(r);
        try {
            this.listener = UnixSocket.listen(name, 64);
        } catch (IOException e) {
            throw new RdmaException(Errno.ENOMEM, groups.owner + ": groups cannot listen on @" + name + ": " + e.getMessage(), e);
        }
        this.server = Thread.ofPlatform().daemon().name("regmem-shm-groups-" + groups.owner).start(this::serve);
    }

    /** The listeners of the other devices of this host on the same port (in {@code /proc/net/unix}). */
    List<String> others() {
        Set<String> found = new LinkedHashSet<>();
        try (var lines = Files.lines(Path.of("/proc/net/unix"))) {
            lines.forEach(line -> {
                int at = line.lastIndexOf(" @" + prefix);
                if (at < 0) {
                    return;
                }
                String[] f = line.trim().split("\\s+");
                // Num RefCount Protocol Flags Type St Inode Path: a listener has __SO_ACCEPTCON (0x10000) in Flags
                if (f.length >= 8 && f[3].equals("00010000")) {
                    String n = line.substring(at + 2).trim();
                    if (!n.equals(name)) {
                        found.add(n);
                    }
                }
            });
        } catch (IOException | RuntimeException e) {
            LOG.log(System.Logger.Level.WARNING, groups.owner + ": /proc/net/unix cannot be read: no other device's groups are "
                    + "found", e);
        }
        return new ArrayList<>(found);
    }

    /**
     * Asks the device listening at {@code other} for its publications to {@code group}; maps them.
     *
     * @return false if it is worth asking again (it did not answer in time, or took no connection)
     */
    boolean fetch(String other, InetAddress group, boolean fromStart) {
        long nonce = RANDOM.nextLong();
        int sock;
        try {
            sock = send(other, new GroupMessage(GroupMessage.FETCH, GroupMessage.ipv4(group), 0, 0, 0, 0, 0, 0,
                    nonce), -1, groups.k0, groups.k1);
        } catch (IOException e) {
            return false; // gone meanwhile, or not taking connections
        }
        try {
            long deadline = System.nanoTime() + FETCH_NANOS;
            UnixSocket.Received r = receive(sock, deadline);
            SharedFile.close(r.fd());
            GroupMessage count = GroupMessage.decode(r.data(), groups.k0, groups.k1);
            if (count == null || count.type() != GroupMessage.COUNT || count.nonce() != nonce || count.capacity() < 0
                    || count.capacity() > 4096) {
                groups.refused();
                return true; // (not a device of this secret: nothing to ask it again)
            }
            for (long i = 0; i < count.capacity(); i++) {
                r = receive(sock, deadline);
                GroupMessage offer = GroupMessage.decode(r.data(), groups.k0, groups.k1);
                if (offer == null || offer.type() != GroupMessage.OFFER || offer.nonce() != nonce
                        || offer.group() != GroupMessage.ipv4(group)) {
                    SharedFile.close(r.fd());
                    groups.refused();
                    break;
                }
                groups.offered(offer, r.fd(), UnixSocket.peerPidfd(sock), fromStart);
            }
            return true;
        } catch (EOFException e) { // it refused the request: a device of another secret
            groups.refused();
            return true;
        } catch (IOException e) {
            LOG.log(System.Logger.Level.DEBUG, () -> groups.owner + ": @" + other + " did not answer for " + group.getHostAddress()
                    + ": " + e.getMessage());
            return false;
        } finally {
            SharedFile.close(sock);
        }
    }

    /**
     * Hands {@code offer} with {@code fd} to the device at {@code other}; waits for its word, at most a
     * reply's deadline.
     *
     * @return false if it is worth handing it again (no word in time, or no connection taken)
     */
    boolean push(String other, GroupMessage offer, int fd) {
        int sock;
        try {
            sock = send(other, offer, fd, groups.k0, groups.k1);
        } catch (IOException e) {
            return false;
        }
        try {
            UnixSocket.Received r = receive(sock, System.nanoTime() + REPLY_NANOS);
            SharedFile.close(r.fd());
            GroupMessage ack = GroupMessage.decode(r.data(), groups.k0, groups.k1);
            if (ack == null || ack.type() != GroupMessage.ACK || ack.nonce() != offer.nonce()) {
                groups.refused();
            }
            return true; // (taken, or refused by a device of another secret: nothing to hand it again)
        } catch (EOFException e) {
            groups.refused();
            return true;
        } catch (IOException e) {
            LOG.log(System.Logger.Level.DEBUG, () -> groups.owner + ": @" + other + " did not take a publication in time: "
                    + e.getMessage());
            return false;
        } finally {
            SharedFile.close(sock);
        }
    }

    /** Connects to {@code other}, sends {@code m}, with {@code fd} if not negative; the connected socket. */
    static int send(String other, GroupMessage m, int fd, long k0, long k1) throws IOException {
        int sock = UnixSocket.connectNow(other);
        try {
            UnixSocket.send(sock, m.encode(k0, k1), fd);
            return sock;
        } catch (IOException | RuntimeException e) {
            SharedFile.close(sock);
            throw e;
        }
    }

    /** Reads one message from {@code sock} by the deadline: it, and the descriptor that came with it (-1 if none). */
    static UnixSocket.Received receive(int sock, long deadline) throws IOException {
        return UnixSocket.receive(sock, GroupMessage.BYTES, deadline);
    }

    private void serve() {
        long lastSweep = System.nanoTime();
        while (!closed) {
            try {
                if (UnixSocket.awaitReadable(listener, System.nanoTime() + REPLY_NANOS) && !closed) {
                    int sock = UnixSocket.accept(listener, System.nanoTime() + REPLY_NANOS, () -> false);
                    try {
                        handle(sock);
                    } finally {
                        SharedFile.close(sock);
                    }
                }
            } catch (IOException e) {
                LOG.log(System.Logger.Level.DEBUG, () -> groups.owner + ": a group request failed: " + e.getMessage());
            } catch (RuntimeException | Error e) { // (a thread of regmem's: nothing escapes it; it goes on serving)
                LOG.log(System.Logger.Level.WARNING, groups.owner + ": serving a group request failed", e);
            }
            long now = System.nanoTime();
            if (now - lastSweep >= REPLY_NANOS) {
                lastSweep = now;
                try {
                    groups.sweep();
                } catch (RuntimeException | Error e) {
                    LOG.log(System.Logger.Level.WARNING, groups.owner + ": sweeping ended publications failed", e);
                }
            }
        }
    }

    /** One request: a fetch is answered with this device's publications; a pushed offer is taken, and acknowledged. */
    private void handle(int sock) throws IOException {
        UnixSocket.Received r;
        try {
            r = receive(sock, System.nanoTime() + REPLY_NANOS);
        } catch (IOException e) {
            return; // nothing (our own wake-up at close), or not in time
        }
        GroupMessage m = GroupMessage.decode(r.data(), groups.k0, groups.k1);
        if (m == null || m.type() != GroupMessage.FETCH && m.type() != GroupMessage.OFFER) {
            SharedFile.close(r.fd());
            groups.refused();
            return;
        }
        if (m.type() == GroupMessage.FETCH) {
            SharedFile.close(r.fd());
            groups.serveFetch(sock, m);
            return;
        }
        int pidfd = UnixSocket.peerPidfd(sock);
        groups.offered(m, r.fd(), pidfd, true);
        UnixSocket.send(sock, new GroupMessage(GroupMessage.ACK, m.group(), 0, 0, 0, 0, 0, 0, m.nonce()).encode(groups.k0,
                groups.k1), -1);
    }

    /** Stops serving (the thread ends within a request's deadline) and closes the listener. */
    @Override
    public void close() {
        closed = true;
        try {
            SharedFile.close(UnixSocket.connectNow(name)); // wakes the thread up
        } catch (IOException e) {
            // it wakes up by itself at its next deadline
        }
        try {
            server.join(2 * REPLY_NANOS / 1_000_000L + 1_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        SharedFile.close(listener);
    }
}
