package io.regmem.registration.shm;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.core.internal.Fcntl;
import io.regmem.core.internal.Libc;
import io.regmem.registration.udp.LocalGroups;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.security.SecureRandom;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import org.agrona.collections.ArrayUtil;
import org.agrona.collections.Long2ObjectHashMap;

/**
 * An shm device's multicast groups in shared memory ({@link LocalGroups}): each QP that sends to a
 * group writes its datagrams once into a {@link GroupRing} of its own (a memfd, sealed so that only it
 * can write it), and every device of this host that joined the group maps that ring read-only and
 * copies each datagram into its members' receives, at its own pace: a member that lags past the ring
 * loses datagrams (counted {@code LOST}); none ever holds the sender or another member. The devices
 * find each other's rings through their {@link GroupDirectory}s.
 *
 * <p>Locks: {@link #lock} orders the tables (held briefly, never across a wait for another device,
 * except while a fetch is served: replies are 64 bytes into an empty socket).
 */
final class ShmGroups implements LocalGroups {
    private static final System.Logger LOG = System.getLogger("io.regmem.registration.shm");
    private static final AtomicLong PUBLICATIONS = new AtomicLong();
    private static final SecureRandom RANDOM = new SecureRandom();
    /** A device's publications at most (each a descriptor and a mapping): past it, the oldest ends. */
    static final int MAX_PUBLICATIONS = 256;
    /** How long a member keeps reading the ring of a process that died (what it wrote before it died). */
    private static final long DEAD_DRAIN_NANOS = 1_000_000_000L;
    final String owner;
    private final InetSocketAddress endpoint;
    final long k0;
    final long k1;
    private final int multicastPort;
    private final int capacity;
    private final boolean alsoUdp;
    private final long pid = ProcessHandle.current().pid();
    private final Object lock = new Object();
    private volatile GroupDirectory directory;
    private final GroupRetries retries;
    private boolean closed;
    /** This device's publications, by {@link #key}; replaced under {@link #lock}, never mutated. */
    private volatile Long2ObjectHashMap<GroupPublication> publications = new Long2ObjectHashMap<>();
    /** The groups this device hears (under {@link #lock}). */
    private final Set<InetAddress> joined = new HashSet<>();
    /** The publications of this host this device reads; replaced under {@link #lock}. */
    private volatile GroupSubscription[] subscriptions = new GroupSubscription[0];
    /** The receive lock's: where {@link #next} looks first, and whose datagram it took last. */
    private int turn;
    private InetSocketAddress from;

    ShmGroups(String owner, InetSocketAddress endpoint, long k0, long k1, int multicastPort, int capacity, boolean alsoUdp) {
        this.owner = owner;
        this.endpoint = endpoint;
        this.k0 = k0;
        this.k1 = k1;
        this.multicastPort = multicastPort;
        this.capacity = capacity;
        this.alsoUdp = alsoUdp;
        this.retries = new GroupRetries(owner);
    }

    /** A publication's key: its QP and its group, as the datagrams' header carries it ({@code groupLo}). */
    private static long key(int qpn, long groupLo) {
        return (long) qpn << 32 | groupLo >>> 32; // (the IPv4 address is the high half of groupLo)
    }

    /** The directory, listening from the first use (lock held). */
    private GroupDirectory directory() {
        if (closed) {
            throw new RdmaException(Errno.ENODEV, owner + ": the device is closed");
        }
        if (directory == null) {
            directory = new GroupDirectory(this, multicastPort);
        }
        return directory;
    }

    @Override
    public void join(InetAddress group) {
        GroupDirectory d;
        synchronized (lock) {
            d = directory();
            joined.add(group);
            for (GroupPublication p : publications.values()) {
                if (p.group().equals(group)) {
                    hearOwn(p, false); // (its own QPs hear what it sends to the group: multicast loopback)
                }
            }
        }
        for (String other : d.others()) {
            if (!fetch(other, group, false)) {
                retries.add(other, new GroupRetries.Attempt() {
                    @Override
                    public boolean run(String listener) {
                        return fetch(listener, group, false);
                    }

                    @Override
                    public boolean matters() {
                        synchronized (lock) {
                            return !closed && joined.contains(group);
                        }
                    }
                });
            }
        }
    }

    /** Asks the device listening at {@code other} for its publications to {@code group}; maps them. */
    private boolean fetch(String other, InetAddress group, boolean fromStart) {
        GroupDirectory d = directory;
        return d != null && d.fetch(other, group, fromStart);
    }

    /** A second descriptor of {@code fd} (close-on-exec), or -errno. */
    static int dup(int fd) {
        try (Arena a = Arena.ofConfined()) {
            return Fcntl.fcntl(a.allocate(Libc.CAPTURE), fd, Fcntl.F_DUPFD_CLOEXEC, 0);
        }
    }

    /** True if the process of {@code pidfd} has exited (its pidfd is readable). */
    private static boolean exited(int pidfd) {
        try {
            return UnixSocket.readableNow(pidfd);
        } catch (IOException e) {
            return false;
        }
    }

    /**
     * Takes an offered publication ({@code fd}, whose writer's process is {@code pidfd}, or -errno if it
     * is not known): maps it read-only if this device hears its group and does not read it yet, after
     * checking its seals, size and header; closes what it does not keep.
     */
    void offered(GroupMessage m, int fd, int pidfd, boolean fromStart) {
        boolean kept = false;
        try {
            InetSocketAddress at = m.endpoint();
            if (fd < 0 || at == null || m.qpn() < 0 || !GroupRing.validCapacity(m.capacity())) {
                refused();
                return;
            }
            InetAddress group = Inet4Address.getByAddress(new byte[] {
                (byte) (m.group() >>> 24), (byte) (m.group() >>> 16), (byte) (m.group() >>> 8), (byte) m.group()});
            synchronized (lock) {
                if (closed || !joined.contains(group)) {
                    return;
                }
                for (GroupSubscription s : subscriptions) {
                    if (s.pid == m.pid() && s.id == m.publication()) {
                        return; // (fetched and pushed both)
                    }
                }
                long size = GroupRing.bytes((int) m.capacity());
                if (SharedFile.verifyPublication(fd) != size) {
                    refused();
                    return;
                }
                Arena arena = Arena.ofShared();
                try {
                    MemorySegment ring = SharedFile.mapReadOnly(fd, size, arena);
                    String why = GroupRing.Reader.check(ring, size);
                    if (why != null) {
                        LOG.log(System.Logger.Level.WARNING, () -> owner + ": a publication to " + group.getHostAddress()
                                + " is refused: " + why);
                        arena.close();
                        return;
                    }
                    subscriptions = ArrayUtil.add(subscriptions, new GroupSubscription(group, m, at, arena,
                            new GroupRing.Reader(ring, fromStart), pidfd));
                    kept = true;
                } catch (RuntimeException e) {
                    arena.close();
                    throw e;
                }
            }
        } catch (UnknownHostException e) {
            refused();
        } finally {
            SharedFile.close(fd); // (the mapping keeps the memfd)
            if (!kept) {
                SharedFile.close(pidfd);
            }
        }
    }

    /** Answers a fetch on {@code sock}: this device's publications to the group, each with its descriptor. */
    void serveFetch(int sock, GroupMessage m) throws IOException {
        synchronized (lock) { // (a publication's descriptor stays open while it is sent)
            int n = 0;
            for (GroupPublication p : publications.values()) {
                n += GroupMessage.ipv4(p.group()) == m.group() ? 1 : 0;
            }
            UnixSocket.send(sock, new GroupMessage(GroupMessage.COUNT, m.group(), 0, pid, 0, n, 0, 0, m.nonce()).encode(k0, k1), -1);
            for (GroupPublication p : publications.values()) {
                if (GroupMessage.ipv4(p.group()) == m.group()) {
                    UnixSocket.send(sock, offer(p, m.nonce()).encode(k0, k1), p.fd());
                }
            }
        }
    }

    private GroupMessage offer(GroupPublication p, long nonce) {
        return new GroupMessage(GroupMessage.OFFER, GroupMessage.ipv4(p.group()), p.qpn(), pid, p.id(), capacity,
                GroupMessage.ipv4(endpoint.getAddress()), endpoint.getPort(), nonce);
    }

    /** Something came that was not tagged with the key, or not as the protocol says: left, and logged. */
    void refused() {
        LOG.log(System.Logger.Level.DEBUG, () -> owner + ": a group message was refused (not tagged with the key, or malformed)");
    }

    @Override
    public void leave(InetAddress group) {
        GroupSubscription[] gone;
        synchronized (lock) {
            joined.remove(group);
            gone = subscriptions;
            GroupSubscription[] kept = new GroupSubscription[0];
            for (GroupSubscription s : gone) {
                if (!s.group.equals(group)) {
                    kept = ArrayUtil.add(kept, s);
                }
            }
            subscriptions = kept;
        }
        for (GroupSubscription s : gone) {
            if (s.group.equals(group)) {
                s.unmap();
            }
        }
    }

    @Override
    public void publish(int qpn, InetAddress group, long groupLo, MemorySegment datagram, int length) {
        try {
            publication(qpn, group, groupLo).write(datagram, length);
        } catch (IllegalStateException ended) {
            // the QP was destroyed meanwhile: nothing more is sent
        }
    }

    @Override
    public GroupRing.Writer publication(int qpn, InetAddress group, long groupLo) {
        GroupPublication p = publications.get(key(qpn, groupLo));
        return (p != null ? p : open(qpn, group, groupLo)).writer();
    }

    /** Makes QP {@code qpn}'s publication to {@code group}, and hands it to every other device here before it is written. */
    private GroupPublication open(int qpn, InetAddress group, long groupLo) {
        GroupPublication p;
        GroupDirectory d;
        synchronized (lock) {
            d = directory();
            long size = GroupRing.bytes(capacity);
            int fd = SharedFile.createPublication("regmem-group-" + group.getHostAddress(), size);
            Arena arena = Arena.ofShared();
            try {
                MemorySegment ring = SharedFile.map(fd, size, arena);
                GroupRing.Writer w = new GroupRing.Writer(ring, capacity);
                SharedFile.sealPublication(fd);
                p = new GroupPublication(qpn, group, key(qpn, groupLo), PUBLICATIONS.incrementAndGet(), fd, arena, w);
            } catch (RuntimeException e) {
                arena.close();
                SharedFile.close(fd);
                throw e;
            }
            Long2ObjectHashMap<GroupPublication> next = new Long2ObjectHashMap<>(publications);
            next.put(p.key(), p);
            if (next.size() > MAX_PUBLICATIONS) { // the oldest ends (made again, and handed over again, if it is sent to again)
                GroupPublication oldest = p;
                for (GroupPublication o : next.values()) {
                    oldest = o.id() < oldest.id() ? o : oldest;
                }
                next.remove(oldest.key());
                oldest.end();
            }
            publications = next;
            if (joined.contains(group)) {
                hearOwn(p, true);
            }
        }
        GroupPublication made = p;
        for (String other : d.others()) {
            if (!push(other, p, p.fd())) {
                retries.add(other, new GroupRetries.Attempt() {
                    @Override
                    public boolean run(String listener) {
                        int fd;
                        synchronized (lock) { // (a descriptor of its own: the publication's may close meanwhile)
                            fd = matters() ? dup(made.fd()) : -1;
                        }
                        try {
                            return fd < 0 || push(listener, made, fd);
                        } finally {
                            SharedFile.close(fd);
                        }
                    }

                    @Override
                    public boolean matters() {
                        return publications.get(made.key()) == made;
                    }
                });
            }
        }
        return p;
    }

    /** Reads this device's own publication {@code p} too (lock held). */
    private void hearOwn(GroupPublication p, boolean fromStart) {
        offered(offer(p, 0), dup(p.fd()), -1, fromStart);
    }

    /** Hands {@code p} ({@code fd}: a descriptor of it) to the device at {@code other}; waits for its word, at most a reply's deadline. */
    private boolean push(String other, GroupPublication p, int fd) {
        GroupDirectory d = directory;
        return d != null && d.push(other, offer(p, RANDOM.nextLong()), fd);
    }

    @Override
    public void retire(int qpn) {
        GroupPublication[] ended;
        synchronized (lock) {
            Long2ObjectHashMap<GroupPublication> next = new Long2ObjectHashMap<>(publications);
            ended = next.values().stream().filter(p -> p.qpn() == qpn).toArray(GroupPublication[]::new);
            for (GroupPublication p : ended) {
                next.remove(p.key());
                p.end();
            }
            publications = next;
        }
    }

    @Override
    public int next(MemorySegment into) {
        GroupSubscription[] s = subscriptions;
        int n = s.length;
        int first = turn < n ? turn : 0; // (fewer publications than when it was set)
        for (int i = 0; i < n; i++) {
            int at = first + i < n ? first + i : first + i - n; // (no division)
            GroupSubscription x = s[at];
            if (x.broken) {
                continue;
            }
            int length;
            try {
                length = x.reader.next(into);
            } catch (IllegalStateException | IndexOutOfBoundsException unmapped) { // left meanwhile
                continue;
            }
            if (length >= 0) {
                turn = at + 1 < n ? at + 1 : 0;
                from = x.from;
                return length;
            }
            if (length == GroupRing.Reader.BROKEN) {
                x.broken = true;
                LOG.log(System.Logger.Level.WARNING, () -> owner + ": the publication of " + x.from + " to "
                        + x.group.getHostAddress() + " is broken (a field the ring protocol does not allow): it is left");
            }
        }
        return -1;
    }

    @Override
    public boolean ready() {
        for (GroupSubscription x : subscriptions) {
            try {
                if (!x.broken && !x.reader.drained()) {
                    return true;
                }
            } catch (IllegalStateException unmapped) { // left meanwhile
                return true;
            }
        }
        return false;
    }

    @Override
    public InetSocketAddress from() {
        return from;
    }

    @Override
    public boolean hears(InetSocketAddress sender) {
        for (GroupSubscription s : subscriptions) {
            if (s.from.equals(sender)) {
                return true;
            }
        }
        return false;
    }

    @Override
    public boolean alsoUdp() {
        return alsoUdp;
    }

    /**
     * Unmaps the publications that ended (their writer closed them and they were read to the end), that
     * are broken, or whose process died (after what it wrote was read, or a second).
     */
    void sweep() {
        GroupDirectory d = directory;
        if (d != null) {
            retries.sweep(d::others);
        }
        GroupSubscription[] s = subscriptions;
        for (GroupSubscription x : s) {
            boolean done = x.broken || x.reader.ended();
            if (!done && x.pidfd >= 0 && exited(x.pidfd)) {
                long now = System.nanoTime();
                if (x.deadSince == 0) {
                    x.deadSince = now;
                }
                done = x.reader.drained() || now - x.deadSince > DEAD_DRAIN_NANOS;
            }
            if (done) {
                synchronized (lock) {
                    GroupSubscription[] now = subscriptions;
                    subscriptions = ArrayUtil.remove(now, x);
                    if (subscriptions == now) {
                        continue; // (left meanwhile)
                    }
                }
                x.unmap();
            }
        }
    }

    @Override
    public void close() {
        GroupDirectory d;
        GroupSubscription[] s;
        synchronized (lock) {
            closed = true;
            d = directory;
            directory = null;
            for (GroupPublication p : publications.values()) {
                p.end();
            }
            publications = new Long2ObjectHashMap<>();
            s = subscriptions;
            subscriptions = new GroupSubscription[0];
            joined.clear();
        }
        retries.clear(); // (after closed is set: what still runs ends at once, or at its deadline)
        if (d != null) {
            d.close();
        }
        for (GroupSubscription x : s) {
            x.unmap();
        }
    }

    /** For diagnostics. */
    @Override
    public String toString() {
        return "shm groups: " + publications.size() + " publication(s), " + subscriptions.length + " read";
    }
}
