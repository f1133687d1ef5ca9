package io.regmem.netty;

import io.netty.channel.IoHandlerFactory;
import io.regmem.core.BufferPool;
import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.Access;
import io.regmem.registration.PoolRegistration;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.RdmaDevice;
import java.util.Objects;

/**
 * What the Netty transport's channels share on one regmem device: a protection domain, a pool of
 * registered buffers and the {@link RegmemByteBufAllocator} over it (every channel's default
 * {@code ALLOCATOR}: what a pipeline allocates there is sent without a copy), and the defaults of each
 * connection. Every event loop of every group made with {@link RegmemIoHandler#newFactory(RegmemTransport)}
 * runs its channels' connections on this device: one completion queue per event loop, one RC
 * connection (a queue pair) per channel. The device is the caller's ({@code shm} between processes of
 * one host, {@code ucx} across hosts; its secret authenticates every connection): close the
 * transport after the event loop groups, and the device after the transport.
 *
 * <pre>{@code
 * RdmaDevice dev = RdmaDevice.open("shm");
 * RegmemTransport transport = RegmemTransport.builder(dev).build();
 * EventLoopGroup group = new MultiThreadIoEventLoopGroup(RegmemIoHandler.newFactory(transport));
 * new ServerBootstrap().group(group).channel(RegmemServerSocketChannel.class)...
 * }</pre>
 */
public final class RegmemTransport implements AutoCloseable {
    /** A connection's default receive buffer: the largest message one SEND carries. */
    public static final int DEFAULT_RECEIVE_SIZE = 64 << 10;
    /** A connection's default receives posted (the credits its peer starts with). */
    public static final int DEFAULT_RECEIVES = 16;
    /** A connection's default sends outstanding at once. */
    public static final int DEFAULT_SENDS = 32;
    /** The default entries of each event loop's completion queue. */
    public static final int DEFAULT_CQ_ENTRIES = 16384;
    /** How long an event loop with nothing to do polls before it sleeps, by default. */
    public static final long DEFAULT_BUSY_POLL_NANOS = 50_000;
    /** How long an event loop polls on while a chunk of one of its connections is under way, by default. */
    public static final long DEFAULT_CHUNK_POLL_NANOS = 250_000;
    /** An event loop thread's timer slack, by default: 0, the one the thread inherited. */
    public static final long DEFAULT_TIMER_SLACK_NANOS = 0;

    private final RdmaDevice device;
    private final ProtectionDomain pd;
    private final BufferPool pool;
    private final PoolRegistration registration;
    private final RegmemByteBufAllocator allocator;
    final int receiveSize;
    final int receives;
    final int sends;
    final int cqEntries;
    final long busyPollNanos;
    final long chunkPollNanos;
    final long timerSlackNanos;
    /** Event loops made on it and not yet destroyed (under this transport's monitor). */
    private int loops;
    private boolean closed;

    private RegmemTransport(Builder b) {
        this.device = b.device;
        this.receiveSize = b.receiveSize;
        this.receives = b.receives;
        this.sends = b.sends;
        this.cqEntries = b.cqEntries;
        this.busyPollNanos = b.busyPollNanos;
        this.chunkPollNanos = b.chunkPollNanos;
        this.timerSlackNanos = b.timerSlackNanos;
        ProtectionDomain p = device.allocPd();
        BufferPool made = null;
        try {
            made = BufferPool.builder().name("regmem-netty").largestClass(1 << 20)
                    .maxBytes(b.poolBytes).build();
            this.registration = p.register(made, Access.LOCAL_WRITE, Access.REMOTE_READ, Access.REMOTE_WRITE);
        } catch (RuntimeException e) {
            if (made != null) {
                made.close();
            }
            p.close();
            throw e;
        }
        this.pd = p;
        this.pool = made;
        this.allocator = new RegmemByteBufAllocator(registration);
    }

    /** A builder of a transport on {@code device}. */
    public static Builder builder(RdmaDevice device) {
        return new Builder(Objects.requireNonNull(device, "device"));
    }

    /** The device the connections run on. */
    public RdmaDevice device() {
        return device;
    }

    /** The protection domain of every connection and of the pool. */
    public ProtectionDomain pd() {
        return pd;
    }

    /** The allocator over the registered pool: every channel's default {@code ALLOCATOR}. */
    public RegmemByteBufAllocator allocator() {
        return allocator;
    }

    /** An {@link IoHandlerFactory} of event loops on this transport ({@link RegmemIoHandler#newFactory}). */
    public IoHandlerFactory ioHandlerFactory() {
        return RegmemIoHandler.newFactory(this);
    }

    /**
     * Deregisters the pool and closes it and the PD; a second call does nothing. Shut the event loop
     * groups down first (their channels' connections and CQs go with them); buffers still held by the
     * application read zeros afterwards (the pool's rule), never crash.
     *
     * @throws RdmaException {@link Errno#EBUSY} while an event loop made on it has not been destroyed
     *                       (the transport stays as it was)
     */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        if (loops > 0) {
            throw new RdmaException(Errno.EBUSY, this + ": " + loops + " event loop(s) made on it still run: shut their "
                    + "groups down first (shutdownGracefully().sync())");
        }
        closed = true;
        registration.close();
        pool.close();
        pd.close();
    }

    /**
     * An event loop is made on this transport.
     *
     * @throws RdmaException {@link Errno#EBADF} once the transport is closed
     */
    synchronized void loopMade() {
        if (closed) {
            throw new RdmaException(Errno.EBADF, this + ": closed: make event loop groups on an open transport");
        }
        loops++;
    }

    /** An event loop made on this transport was destroyed. */
    synchronized void loopDestroyed() {
        loops--;
    }

    @Override
    public String toString() {
        return "RegmemTransport[" + device + ", receives " + receives + " x " + receiveSize + " B, sends " + sends + "]";
    }

    /** Settings of a {@link RegmemTransport}; each has a default. */
    public static final class Builder {
        private final RdmaDevice device;
        private int receiveSize = DEFAULT_RECEIVE_SIZE;
        private int receives = DEFAULT_RECEIVES;
        private int sends = DEFAULT_SENDS;
        private int cqEntries = DEFAULT_CQ_ENTRIES;
        private long busyPollNanos = DEFAULT_BUSY_POLL_NANOS;
        private long chunkPollNanos = DEFAULT_CHUNK_POLL_NANOS;
        private long timerSlackNanos = DEFAULT_TIMER_SLACK_NANOS;
        private long poolBytes = 1L << 30;

        private Builder(RdmaDevice device) {
            this.device = device;
        }

        /**
         * Bytes of each receive a connection posts (1 KiB to 1 MiB, default 64 KiB): the largest piece
         * of the byte stream one SEND carries; a write is cut into pieces of the peer's size.
         */
        public Builder receiveSize(int bytes) {
            this.receiveSize = check("receiveSize", bytes, 1 << 10, 1 << 20);
            return this;
        }

        /**
         * Receives each connection posts by default (2 to 4096, default 16): the credits its peer may
         * spend before it waits for more. {@code SO_RCVBUF} sets it per channel (bytes / receiveSize).
         */
        public Builder receives(int n) {
            this.receives = check("receives", n, 2, 4096);
            return this;
        }

        /** SENDs a connection keeps outstanding at most by default (2 to 4096, default 32); {@code SO_SNDBUF} per channel. */
        public Builder sends(int n) {
            this.sends = check("sends", n, 2, 4096);
            return this;
        }

        /** Entries of each event loop's CQ (1,024 to 1,048,576, default 16,384): its channels' receives and sends together. */
        public Builder cqEntries(int n) {
            this.cqEntries = check("cqEntries", n, 1 << 10, 1 << 20);
            return this;
        }

        /**
         * How long an event loop that finds nothing to do keeps polling before it sleeps on its
         * completion channel (0 to 1 s, default 50 us); {@code Long.MAX_VALUE}: it never sleeps (one
         * core per event loop, the lowest latency).
         */
        public Builder busyPollNanos(long nanos) {
            if (nanos < 0 || nanos > 1_000_000_000L && nanos != Long.MAX_VALUE) {
                throw new RdmaException(Errno.EINVAL, "RegmemTransport: busyPollNanos " + nanos + " is not 0 to 1 s or Long.MAX_VALUE");
            }
            this.busyPollNanos = nanos;
            return this;
        }

        /**
         * How long an event loop keeps polling after its last work, if that is longer than
         * {@code busyPollNanos}, while a chunk of one of its connections is under way (0 to 1 s, default
         * 250 us): a piece larger than the receiver's receive, which the receiver copies out of the
         * sender's memory, this side's that the peer reads or the peer's that this side reads. The
         * answer, and often the peer's reply, come when the copy ends, tens to hundreds of microseconds
         * later, and a loop that slept meanwhile adds its wake-up to the round trip. 0: only
         * {@code busyPollNanos} counts.
         */
        public Builder chunkPollNanos(long nanos) {
            if (nanos < 0 || nanos > 1_000_000_000L) {
                throw new RdmaException(Errno.EINVAL, "RegmemTransport: chunkPollNanos " + nanos + " is not 0 to 1 s");
            }
            this.chunkPollNanos = nanos;
            return this;
        }

        /**
         * The timer slack of each event loop's thread (Linux's {@code PR_SET_TIMERSLACK}), set when the
         * loop starts (1 ns to 50 ms; default 0: the thread keeps the one it inherited, 50 us unless its
         * creator changed it). A loop that sleeps looks at its connections in sleeps that start at a
         * microsecond, and the kernel may let each run over by its timer slack: on a 2-vCPU VM a 2 us
         * sleep measured 72-77 us with Linux's default, 33 us with 1 us of slack, 11-14 us with 1 ns. A
         * small slack wakes a sleeping loop sooner and more often: where its wake-ups take a CPU that the
         * work needs, it can cost more than it saves (on that VM, gRPC's 64 KiB calls one at a time were
         * not faster with 1 ns).
         */
        public Builder timerSlackNanos(long nanos) {
            if (nanos < 0 || nanos > 50_000_000L) {
                throw new RdmaException(Errno.EINVAL, "RegmemTransport: timerSlackNanos " + nanos + " is not 0 to 50 ms");
            }
            this.timerSlackNanos = nanos;
            return this;
        }

        /** The most bytes the registered pool holds (default 1 GiB): received and allocated buffers together. */
        public Builder poolBytes(long bytes) {
            if (bytes < 16 << 20) {
                throw new RdmaException(Errno.EINVAL, "RegmemTransport: poolBytes " + bytes + " is under 16 MiB");
            }
            this.poolBytes = bytes;
            return this;
        }

        private static int check(String what, int v, int min, int max) {
            if (v < min || v > max) {
                throw new RdmaException(Errno.EINVAL, "RegmemTransport: " + what + " " + v + " is not within " + min + " to " + max);
            }
            return v;
        }

        /**
         * The transport: its PD, pool and registration are made now.
         *
         * @throws RdmaException as {@code allocPd} and the pool's registration (nothing is left behind)
         */
        public RegmemTransport build() {
            return new RegmemTransport(this);
        }
    }
}
