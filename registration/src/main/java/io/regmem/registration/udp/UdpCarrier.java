package io.regmem.registration.udp;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.DatagramDrop;
import io.regmem.registration.spi.DatagramDrops;
import io.regmem.registration.spi.GracePeriod;
import io.regmem.registration.spi.QpContext;
import java.io.IOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.lang.foreign.MemorySegment;
import java.net.BindException;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;
import java.net.StandardProtocolFamily;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.DatagramChannel;
import java.nio.channels.MembershipKey;
import org.agrona.collections.ArrayUtil;
import org.agrona.collections.Int2ObjectHashMap;

/**
 * A device's unreliable datagrams over the kernel's UDP/IP, for a provider that carries them between
 * processes and hosts (ucx), as libfabric's {@code udp} provider and RoCEv2's UDP encapsulation do:
 * one unicast socket per device (its datagram address, {@link #endpoint()}), and one multicast socket
 * (bound to the wildcard address at the multicast port, {@code SO_REUSEADDR}) that joins, on the
 * device's interface, every group one of its QPs is attached to. Every datagram carries the
 * {@link UdpWire} header and the tag of the device's secret; whatever arrives is checked before any of
 * it is used, and dropped and counted when it fails.
 *
 * <p>Sends go from the sending QP's thread ({@link UdpQp}); arrivals are taken by whoever progresses
 * the device (a CQ poll, its progress thread: {@link #progress()}), one thread at a time, and placed
 * into the destination QP's posted receive under that QP's lock, which is only tried: a busy QP keeps
 * the datagram in hand until the next progress, and nothing waits for a lock. Locks: the receive lock,
 * then a QP's; a QP's, then the socket's own (inside the JDK).
 */
public final class UdpCarrier implements AutoCloseable {
    /** The UDP port of every device's multicast socket unless the device option says otherwise. */
    public static final int DEFAULT_MULTICAST_PORT = 24791;
    private static final System.Logger LOG = System.getLogger("io.regmem.registration.udp");
    final String owner;
    final long k0;
    final long k1;
    private final DatagramChannel unicast;
    final InetSocketAddress endpoint;
    private final NetworkInterface nic;
    private final InterfaceWatch watch;
    final int multicastPort;
    private final GracePeriod grace;
    final GracePeriod.Reader reader;
    /** Orders changes of the QP table, the groups and the multicast socket. */
    private final Object lock = new Object();
    private volatile Int2ObjectHashMap<UdpQp> table = new Int2ObjectHashMap<>();
    private volatile UdpQp[] all = new UdpQp[0];
    /** Groups with an attached QP of this device; replaced, never mutated, under {@link #lock}. */
    private volatile UdpGroup[] groups = new UdpGroup[0];
    private DatagramChannel multicast;
    /**
     * The receive lock: 1 while a thread takes and places arrivals. Only tried on the data path
     * ({@link #progress}: a compare-and-set to take it, a release store to give it back, no fence
     * after), waited for only by {@link #close}.
     */
    private volatile int receiving;
    private static final VarHandle RECEIVING;

    static {
        try {
            RECEIVING = MethodHandles.lookup().findVarHandle(UdpCarrier.class, "receiving", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }
    private final UdpInbound fromUnicast;
    private final UdpInbound fromMulticast;
    private volatile DatagramDrops drops = (reason, count) -> { };
    private volatile boolean closed;
    /**
     * With groups in shared memory only, how often an idle unicast socket is looked at: a look is a
     * system call (about half a microsecond) that would otherwise sit on every progress, between a
     * datagram's arrival in a ring and its placement (and so is the clock's read: every sixteenth
     * progress). A socket that had datagrams is looked at every progress, and so is every socket of a
     * device whose groups also go over UDP (its multicast socket is looked at every progress anyway).
     * An idle socket that had a datagram within {@link #UNICAST_WARM_NANOS} is looked at this often; one
     * that had none for that long (or never) only every {@link #UNICAST_COLD_NANOS}: a spinning member
     * that only hears groups then pays the system call on few of its datagrams, and a device that starts
     * hearing unicast datagrams waits that long for its first one, once.
     */
    private static final long UNICAST_IDLE_NANOS = 2_000;
    private static final long UNICAST_COLD_NANOS = 50_000;
    private static final long UNICAST_WARM_NANOS = 1_000_000_000L;
    /** When the idle unicast socket was last looked at, and whether it had datagrams then (the receive lock's). */
    private long unicastLooked;
    /** When the unicast socket last had a datagram (cold at first). */
    private long unicastGot = System.nanoTime() - UNICAST_WARM_NANOS;
    private boolean unicastBusy;
    /** {@link #idle} found the idle unicast socket due: the next progress looks at it. */
    private boolean unicastWanted;
    private int progresses;
    /** Groups among this host's processes in shared memory, or null (groups ride the kernel's IP multicast). */
    final LocalGroups local;
    /** True if group datagrams go over UDP (no local groups, or they also go over UDP). */
    final boolean groupsOverUdp;

    /**
     * Opens the unicast socket on {@code bind} (port 0: any free one).
     *
     * @throws RdmaException {@link Errno#EADDRINUSE} if the port is taken; {@link Errno#EADDRNOTAVAIL}
     *                       if the address is not this host's; {@link Errno#EINVAL} for an IPv6 one
     */
    public UdpCarrier(String owner, InetSocketAddress bind, int multicastPort, byte[] secret, GracePeriod grace,
                      LocalGroups.Factory localGroups) {
        this.owner = owner;
        if (!(bind.getAddress() instanceof Inet4Address) || bind.getAddress().isAnyLocalAddress()) {
            throw new RdmaException(Errno.EINVAL, owner + ": datagrams bind an IPv4 address of this host (peers address "
                    + "the device's UD QPs by it), not " + bind);
        }
        byte[] key = UdpWire.key(secret);
        this.k0 = SipHash.k0(key);
        this.k1 = SipHash.k1(key);
        this.multicastPort = multicastPort;
        DatagramChannel ch = null;
        try {
            this.nic = NetworkInterface.getByInetAddress(bind.getAddress());
            if (nic == null) {
                throw new RdmaException(Errno.EADDRNOTAVAIL, owner + ": datagrams: " + bind.getAddress().getHostAddress()
                        + " is no address of this host");
            }
            this.watch = new InterfaceWatch(owner, nic);
            ch = DatagramChannel.open(StandardProtocolFamily.INET);
            ch.bind(bind);
            ch.configureBlocking(false);
            ch.setOption(StandardSocketOptions.IP_MULTICAST_IF, nic);
            ch.setOption(StandardSocketOptions.IP_MULTICAST_LOOP, true);
            ch.setOption(StandardSocketOptions.SO_RCVBUF, 4 << 20);
            ch.setOption(StandardSocketOptions.SO_SNDBUF, 1 << 20);
            this.endpoint = (InetSocketAddress) ch.getLocalAddress();
        } catch (IOException e) {
            close(ch);
            Errno errno = e instanceof BindException ? Errno.EADDRINUSE : Errno.EIO;
            throw new RdmaException(errno, owner + ": datagrams cannot bind " + bind + ": " + e.getMessage(), e);
        } catch (RuntimeException e) {
            close(ch);
            throw e;
        }
        this.unicast = ch;
        this.grace = grace;
        this.reader = grace.newReader();
        this.fromUnicast = new UdpInbound(this, false);
        this.fromMulticast = new UdpInbound(this, true);
        LocalGroups made = null;
        if (localGroups != null) {
            try {
                made = localGroups.open(owner, endpoint, k0, k1, multicastPort);
            } catch (RuntimeException e) {
                close(unicast);
                reader.close();
                throw e;
            }
        }
        this.local = made;
        this.groupsOverUdp = made == null || made.alsoUdp();
    }

    /** Where peers address this device's UD QPs: the unicast socket's address. */
    public InetSocketAddress endpoint() {
        return endpoint;
    }

    /** Where this device counts what it drops before a QP ({@code ProviderDevice.countDropsIn}). */
    public void countDropsIn(DatagramDrops sink) {
        drops = sink;
    }

    void dropped(DatagramDrop reason) {
        drops.dropped(reason, 1);
    }

    void dropped(DatagramDrop reason, long count) {
        drops.dropped(reason, count);
    }

    /** A UD QP of this device, carried here ({@code ProviderDevice.createQp} for {@code QpType.UD}). */
    public UdpQp createQp(QpContext ctx, boolean oversizeError) {
        UdpQp qp = new UdpQp(this, ctx, grace.newReader(), oversizeError);
        synchronized (lock) {
            Int2ObjectHashMap<UdpQp> next = new Int2ObjectHashMap<>(table);
            next.put(ctx.qpNum(), qp);
            table = next;
            all = ArrayUtil.add(all, qp);
        }
        return qp;
    }

    void remove(UdpQp qp) {
        synchronized (lock) {
            for (UdpGroup g : groups) {
                if (UdpGroup.indexOf(g.members, qp) >= 0) {
                    leave(g.group, qp);
                }
            }
            Int2ObjectHashMap<UdpQp> next = new Int2ObjectHashMap<>(table);
            if (next.get(qp.ctx.qpNum()) == qp) {
                next.remove(qp.ctx.qpNum());
            }
            table = next;
            all = ArrayUtil.remove(all, qp);
        }
        if (local != null) {
            local.retire(qp.ctx.qpNum());
        }
    }

    /** The UD QP numbered {@code qpn}, or null (no lock, no allocation). */
    UdpQp qp(int qpn) {
        return table.get(qpn);
    }

    /** True if this device carries QPs (only then is anything received). */
    public boolean hasQps() {
        return all.length > 0;
    }

    /**
     * Attaches {@code qp} to {@code group}: the multicast socket (made at the first group) joins it
     * on the device's interface.
     *
     * @throws RdmaException {@link Errno#EOPNOTSUPP} for an IPv6 group; {@link Errno#ENOMEM} if the
     *                       kernel refuses another membership ({@code net.ipv4.igmp_max_memberships})
     */
    void join(InetAddress group, UdpQp qp) {
        if (!(group instanceof Inet4Address)) {
            throw new RdmaException(Errno.EOPNOTSUPP, owner + ": datagrams over UDP join IPv4 groups, not "
                    + group.getHostAddress());
        }
        synchronized (lock) {
            UdpGroup g = group(group);
            if (g != null) {
                groups = replace(groups, g, g.with(qp));
                return;
            }
            if (local != null) {
                local.join(group);
                if (!groupsOverUdp) {
                    groups = ArrayUtil.add(groups, new UdpGroup(group, null, new UdpQp[] {qp}));
                    return;
                }
            }
            boolean made = false;
            try {
                if (multicast == null) {
                    multicast = openMulticast();
                    made = true;
                }
                MembershipKey key = multicast.join(group, nic);
                groups = ArrayUtil.add(groups, new UdpGroup(group, key, new UdpQp[] {qp}));
            } catch (BindException e) {
                leftLocally(group);
                throw new RdmaException(Errno.EADDRINUSE, owner + ": the multicast port " + multicastPort + " is taken by a "
                        + "socket that does not share it (SO_REUSEADDR): give the devices another multicastPort", e);
            } catch (IOException e) {
                if (made) {
                    close(multicast);
                    multicast = null;
                }
                leftLocally(group);
                throw new RdmaException(Errno.ENOMEM, owner + ": the kernel refused to join " + group.getHostAddress()
                        + " on " + nic.getName() + " (" + e.getMessage() + "; net.ipv4.igmp_max_memberships limits a "
                        + "socket's groups)", e);
            }
        }
    }

    void leave(InetAddress group, UdpQp qp) {
        synchronized (lock) {
            UdpGroup g = group(group);
            if (g == null || UdpGroup.indexOf(g.members, qp) < 0) {
                return;
            }
            if (g.members.length > 1) {
                groups = replace(groups, g, g.without(qp));
                return;
            }
            leftLocally(group);
            if (g.key != null) {
                g.key.drop();
            }
            groups = ArrayUtil.remove(groups, g);
            if (groups.length == 0) {
                close(multicast); // (a receive in progress sees it closed, and stops)
                multicast = null;
            }
        }
    }

    private void leftLocally(InetAddress group) {
        if (local != null) {
            local.leave(group);
        }
    }

    private UdpGroup group(InetAddress group) {
        for (UdpGroup g : groups) {
            if (g.group.equals(group)) {
                return g;
            }
        }
        return null;
    }

    /** The group whose IPv4-mapped form ends with {@code lo}, or null (no allocation). */
    UdpGroup group(long lo) {
        for (UdpGroup g : groups) {
            if (g.lo == lo) {
                return g;
            }
        }
        return null;
    }

    private DatagramChannel openMulticast() throws IOException {
        DatagramChannel ch = DatagramChannel.open(StandardProtocolFamily.INET);
        try {
            ch.setOption(StandardSocketOptions.SO_REUSEADDR, true);
            ch.setOption(StandardSocketOptions.SO_RCVBUF, 4 << 20);
            ch.bind(new InetSocketAddress(multicastPort));
            ch.configureBlocking(false);
            return ch;
        } catch (IOException | RuntimeException e) {
            close(ch);
            throw e;
        }
    }

    /**
     * Sends the group datagram {@code b} (whole, from position 0) from QP {@code qpn} to {@code to} (the
     * group {@code groupLo} in the header's form) over UDP, and into its publication on this host too if
     * groups are also carried here (a group carried here only is written in place: {@code UdpQp}). As
     * {@link #send(ByteBuffer, InetSocketAddress)}.
     */
    int sendToGroup(int qpn, ByteBuffer b, MemorySegment bytes, InetSocketAddress to, long groupLo) {
        if (local != null) {
            local.publish(qpn, to.getAddress(), groupLo, bytes, b.limit());
        }
        return send(b, to);
    }

    /** Sends {@code b} to {@code to}: its bytes, 0 if the socket has no room now, -1 if the kernel refused it. */
    int send(ByteBuffer b, InetSocketAddress to) {
        try {
            return unicast.send(b, to);
        } catch (IOException | RuntimeException e) { // unreachable, unroutable, closed: a datagram lost on the way
            LOG.log(System.Logger.Level.DEBUG, () -> owner + ": a datagram to " + to + " was not sent: " + e);
            return -1;
        }
    }

    /**
     * Makes progress: QPs whose sends wait for room in the socket (or whose queues flush) run, if
     * their lock is free; then what arrived is taken and placed, if no other thread is at it. Never
     * waits for a lock; never throws for what a peer sent. The work done.
     */
    public int progress() {
        UdpQp[] qps = all;
        if (qps.length == 0 || closed) {
            return 0;
        }
        int work = 0;
        for (UdpQp qp : qps) {
            if (qp.needsRun()) {
                work += qp.tryRun();
            }
        }
        if (groups.length > 0 && groupsOverUdp) {
            watch.check(groups);
        }
        boolean lookUnicast = groupsOverUdp || unicastBusy || unicastWanted || unicastDue();
        if (!lookUnicast && multicast == null && !fromMulticast.pending() && !local.ready()) {
            return work; // nothing in the rings, the idle socket not due: no lock taken
        }
        if (!RECEIVING.compareAndSet(this, 0, 1)) {
            return work;
        }
        try {
            if (local != null) {
                work += fromMulticast.drainLocal(local);
            }
            if (lookUnicast) {
                int got = fromUnicast.drain(unicast);
                unicastBusy = got > 0;
                unicastWanted = false;
                long now = System.nanoTime();
                unicastLooked = unicastBusy ? 0 : now;
                if (unicastBusy) {
                    unicastGot = now;
                }
                work += got;
            }
            DatagramChannel m = multicast;
            if (m != null) {
                work += fromMulticast.drain(m);
            }
        } finally {
            RECEIVING.setRelease(this, 0);
        }
        return work;
    }

    /** True if the idle unicast socket is due for a look (warm or cold): every 16th call reads the clock. */
    private boolean unicastDue() {
        if ((++progresses & 15) != 0) {
            return false;
        }
        long now = System.nanoTime();
        return now - unicastLooked >= (now - unicastGot < UNICAST_WARM_NANOS ? UNICAST_IDLE_NANOS : UNICAST_COLD_NANOS);
    }

    /**
     * True if {@link #progress} has nothing to do now, found without any lock (a hint for a poller
     * spinning on an empty CQ, which then takes no lock): no QP's send waits, no datagram is in hand,
     * no publication on this host holds one for this reader, and the sockets are not due, which only a
     * device whose groups are carried on this host alone can say (its unicast socket is looked at every
     * {@link #UNICAST_IDLE_NANOS} or {@link #UNICAST_COLD_NANOS} while idle; another looks at its sockets on every
     * progress).
     */
    public boolean idle() {
        if (closed) {
            return true;
        }
        for (UdpQp qp : all) {
            if (qp.needsRun()) {
                return false;
            }
        }
        if (local == null || groupsOverUdp || multicast != null || unicastBusy || fromMulticast.pending() || local.ready()) {
            return false;
        }
        if (unicastDue()) {
            unicastWanted = true; // (the progress this hint leads to looks, whatever its own count says)
            return false;
        }
        return true;
    }

    /** Closes the sockets (the device closes; its QPs are gone). */
    @Override
    public void close() {
        closed = true;
        while (!RECEIVING.compareAndSet(this, 0, 1)) { // (a progress under way ends soon: it sees closed, or finishes its batch)
            Thread.onSpinWait();
        }
        try {
            synchronized (lock) {
                for (UdpGroup g : groups) {
                    if (g.key != null) {
                        g.key.drop();
                    }
                }
                groups = new UdpGroup[0];
                if (local != null) {
                    local.close();
                }
                close(multicast);
                multicast = null;
                close(unicast);
            }
            reader.close();
        } finally {
            RECEIVING.setRelease(this, 0);
        }
    }

    private static void close(DatagramChannel ch) {
        if (ch != null) {
            try {
                ch.close();
            } catch (IOException e) {
                // nothing held any more
            }
        }
    }

    /** For diagnostics: the sockets and groups. */
    @Override
    public String toString() {
        return "udp " + endpoint + ", multicast port " + multicastPort + " on " + nic.getName() + ", " + groups.length
                + " group(s)";
    }

    private static UdpGroup[] replace(UdpGroup[] a, UdpGroup old, UdpGroup now) {
        UdpGroup[] b = a.clone();
        b[UdpGroup.indexOf(b, old)] = now;
        return b;
    }
}
