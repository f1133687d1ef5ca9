package io.regmem.registration.shm;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.DeviceAttributes;
import io.regmem.registration.QpType;
import io.regmem.registration.link.Secret;
import io.regmem.registration.spi.CmContext;
import io.regmem.registration.spi.CqContext;
import io.regmem.registration.spi.DatagramDrops;
import io.regmem.registration.spi.GracePeriod;
import io.regmem.registration.spi.MrContext;
import io.regmem.registration.spi.ProgressFaults;
import io.regmem.registration.spi.ProviderCm;
import io.regmem.registration.spi.ProviderCq;
import io.regmem.registration.spi.ProviderDevice;
import io.regmem.registration.spi.ProviderMr;
import io.regmem.registration.spi.ProviderQp;
import io.regmem.registration.spi.QpContext;
import io.regmem.registration.udp.UdpDatagrams;
import java.net.InetSocketAddress;
import java.util.Arrays;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;
import org.agrona.concurrent.IdleStrategy;

/**
 * An shm device: its limits and options, its QPs, the grace-period domain of its data path (every
 * copy into or out of its registered memory runs in a section of it), and, if asked for, a progress
 * thread that serves and completes without anybody polling.
 */
final class ShmDevice implements ProviderDevice {

    final DeviceAttributes attributes;
    final GracePeriod grace;
    /** Bytes up to which a WRITE's or SEND's bytes travel inside the request. */
    final long inlineThreshold;
    /** How long a request waits for its answer (0: for ever). */
    final long answerTimeoutNanos;
    /** Each ring's data bytes, for the connections this device asks for. */
    final long ringBytes;
    final int handshakeMillis;
    /** False if this device never copies out of its peers ({@code pull=false}). */
    final boolean pull;
    private byte[] secret;
    private volatile ShmQp[] qps = new ShmQp[0];
    private Thread progressThread;
    /**
     * Its UD QPs and multicast ({@link UdpDatagrams}: unicast over the kernel's UDP, groups in shared-memory
     * rings, {@link SameHostGroups}; set once, before the device is used); null for a lane engine of another provider.
     */
    UdpDatagrams datagrams;
    /** The progress thread's sleep (null: it never sleeps: no thread, or idleStrategy busy or yield). */
    private Waker waker;
    private volatile boolean closed;
    /** How long the progress thread finds nothing to do before it sleeps until a peer wakes it (10 ms at most). */
    static final long SLEEP_AFTER_NANOS = 50_000L;
    static final long SLEEP_NANOS = 10_000_000L;

    ShmDevice(DeviceAttributes attributes, byte[] secret, int handshakeMillis, long answerTimeoutNanos, long inlineThreshold,
            long ringBytes, boolean pull) {
        this(attributes, new GracePeriod(), secret, handshakeMillis, answerTimeoutNanos, inlineThreshold, ringBytes, pull);
    }

    /** A device whose data path runs in sections of {@code grace} (another provider's, for {@link SameHostLane}). */
    ShmDevice(DeviceAttributes attributes, GracePeriod grace, byte[] secret, int handshakeMillis, long answerTimeoutNanos,
            long inlineThreshold, long ringBytes, boolean pull) {
        this.attributes = attributes;
        this.grace = grace;
        this.pull = pull;
        this.secret = secret;
        this.handshakeMillis = handshakeMillis;
        this.answerTimeoutNanos = answerTimeoutNanos;
        this.inlineThreshold = inlineThreshold;
        this.ringBytes = ringBytes;
    }

    /**
     * Starts the progress thread (before any CQ exists), idling as {@code idle} says between rounds with
     * no work; if {@code sleep}, after {@value #SLEEP_AFTER_NANOS} ns with nothing to do it sleeps until
     * a peer publishes work into one of its lanes and wakes it ({@link Waker}), or 10 ms pass.
     */
    ShmDevice startProgressThread(IdleStrategy idle, boolean sleep) {
        waker = sleep ? new Waker() : null;
        progressThread = Thread.ofPlatform().daemon().name("regmem-shm-progress").start(() -> {
            long[] words = new long[Waker.MAX];
            long lastWork = System.nanoTime();
            while (!closed) {
                try {
                    int work = progressRound(); // (a QP whose progress fails errs alone: ShmQp.progress)
                    if (work > 0) {
                        lastWork = System.nanoTime();
                        idle.idle(work);
                    } else if (waker != null && System.nanoTime() - lastWork > SLEEP_AFTER_NANOS
                            && (datagrams == null || !datagrams.active())) { // (nothing wakes it for a datagram)
                        sleepUntilWoken(words);
                        lastWork = System.nanoTime();
                    } else {
                        idle.idle(0);
                    }
                } catch (RuntimeException | Error e) {
                    ProgressFaults.survived("regmem shm: the progress thread", e);
                }
            }
        });
        return this;
    }

    /**
     * Lets another thread sleep on this device's lanes ({@link #sleepUntilWoken}): a device without a
     * progress thread of its own (another provider's lane engine). Lanes made from now on say so to their peers.
     */
    synchronized void enableSleep() {
        if (waker == null) {
            waker = new Waker();
        }
    }

    /** Sets every lane's sleeping word, looks for work a last time, and sleeps unless it found some. */
    void sleepUntilWoken(long[] words) {
        ShmQp[] q = qps;
        int n = 0;
        for (ShmQp qp : q) {
            long w = qp.sleeping(true);
            if (w != 0 && n < words.length) {
                words[n++] = w;
            }
        }
        int work = 0;
        for (ShmQp qp : q) {
            work += qp.progress();
        }
        if (work == 0) {
            waker.sleep(words, n, SLEEP_NANOS);
        }
        for (ShmQp qp : q) {
            qp.sleeping(false);
        }
    }

    /** True if this device's progress thread may sleep (its peers then wake it). */
    boolean sleeps() {
        return waker != null;
    }

    /** How many times a peer woke the sleeping progress thread. */
    long woken() {
        Waker w = waker;
        return w == null ? 0 : w.woken();
    }

    /** One round of the progress thread's work, for a DeviceAgent: every QP's progress. */
    @Override
    public int progressRound() {
        int work = datagrams == null ? 0 : datagrams.progress();
        for (ShmQp qp : qps) {
            work += qp.progress();
        }
        return work;
    }

    boolean hasProgressThread() {
        return progressThread != null;
    }

    /** The secret of this device's connections: the configured one, or the user's default (made on first use). */
    synchronized byte[] secret() {
        if (secret == null) {
            secret = Secret.defaultSecret("shm");
        }
        return secret;
    }

    @Override
    public DeviceAttributes attributes() {
        return attributes;
    }

    @Override
    public ProviderMr registerMemory(MrContext mr) {
        if (mr.isIntegrity()) {
            throw new RdmaException(Errno.EOPNOTSUPP, mr.name() + ": shm: integrity (signature) MRs are not supported "
                    + "(T10-PI offload is a soft provider feature)");
        }
        return new ShmMr(this, mr);
    }

    @Override
    public ProviderQp createQp(QpContext ctx) {
        if (ctx.qpType() == QpType.UD) {
            return datagrams.carrier().createQp(ctx, datagrams.oversizeError());
        }
        return addQp(new ShmQp(this, ctx));
    }

    @Override
    public boolean datagrams() {
        return datagrams != null;
    }

    @Override
    public InetSocketAddress datagramEndpoint() {
        return datagrams.carrier().endpoint();
    }

    @Override
    public void countDropsIn(DatagramDrops sink) {
        if (datagrams != null) {
            datagrams.countDropsIn(sink);
        }
    }

    /** Adds {@code qp} to the QPs this device progresses and quiesces. */
    ShmQp addQp(ShmQp qp) {
        synchronized (this) {
            ShmQp[] next = Arrays.copyOf(qps, qps.length + 1);
            next[qps.length] = qp;
            qps = next;
        }
        return qp;
    }

    /** The live QPs (a snapshot: the array is replaced, never mutated). */
    ShmQp[] qps() {
        return qps;
    }

    synchronized void removeQp(ShmQp qp) {
        ShmQp[] q = qps;
        for (int i = 0; i < q.length; i++) {
            if (q[i] == qp) {
                ShmQp[] next = new ShmQp[q.length - 1];
                System.arraycopy(q, 0, next, 0, i);
                System.arraycopy(q, i + 1, next, i, q.length - i - 1);
                qps = next;
                return;
            }
        }
    }

    @Override
    public ProviderCq createCq(CqContext ctx) {
        ShmCq cq = new ShmCq(this);
        ctx.attach(cq);
        return cq;
    }

    @Override
    public ProviderCm createCmId(CmContext ctx) {
        return new ShmCm(this, ctx);
    }

    @Override
    public void quiesce() {
        grace.synchronize();
    }

    /**
     * Waits out the sections that checked {@code region} before its keys went invalid, the answers
     * of READs and atomics started before that will be placed into it (their targets executed them),
     * and the READs from it granted to peers that have yet to copy them out: each is placed, copied or
     * fails by the answer timeout (plus a second; 10 s with none; a grant is then withdrawn), whoever
     * progresses its QP, this thread included.
     */
    void quiesce(MrContext region) {
        grace.synchronize();
        long until = System.nanoTime() + 1_000_000_000L + (answerTimeoutNanos > 0 ? answerTimeoutNanos : 9_000_000_000L);
        for (ShmQp qp : qps) {
            ReentrantLock l = qp.ctx.lock();
            while (!qp.isDestroyed()) {
                if (System.nanoTime() - until >= 0) {
                    // Given up: under the QP's lock, where every placement runs, so none is being placed
                    // now and none will be (the requests fail, LOC_PROT_ERR).
                    l.lock();
                    try {
                        qp.abandonAnswersInto(region);
                    } finally {
                        l.unlock();
                    }
                    break;
                }
                if (l.tryLock()) {
                    try {
                        if (!qp.answersInto(region)) {
                            break;
                        }
                        qp.runWithPeer();
                    } finally {
                        l.unlock();
                    }
                }
                LockSupport.parkNanos(50_000L);
            }
        }
    }

    @Override
    public void close() {
        closed = true;
        Thread t = progressThread;
        if (t != null) {
            try {
                t.join(5_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        if (datagrams != null) {
            datagrams.close();
        }
    }

    /** The shm registration handle: the key is the verbs layer's, exported as its 4 bytes (big-endian). */
    private static final class ShmMr implements ProviderMr {
        private final ShmDevice device;
        private final MrContext region;

        ShmMr(ShmDevice device, MrContext region) {
            this.device = device;
            this.region = region;
        }

        @Override
        public void deregister() {
            device.quiesce(region);
        }
    }
}
