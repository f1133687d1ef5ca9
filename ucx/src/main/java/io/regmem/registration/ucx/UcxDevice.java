package io.regmem.registration.ucx;

import io.regmem.core.ChunkSource;
import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.DeviceAttributes;
import io.regmem.registration.QpType;
import io.regmem.registration.spi.CmContext;
import io.regmem.registration.spi.CqContext;
import io.regmem.registration.spi.DatagramDrops;
import io.regmem.registration.spi.GracePeriod;
import io.regmem.registration.spi.Guard;
import io.regmem.registration.spi.MrContext;
import io.regmem.registration.spi.ProviderCm;
import io.regmem.registration.spi.ProviderCq;
import io.regmem.registration.spi.ProviderDevice;
import io.regmem.registration.spi.ProviderMr;
import io.regmem.registration.spi.ProviderQp;
import io.regmem.registration.spi.QpContext;
import io.regmem.registration.udp.UdpDatagrams;
import io.regmem.registration.link.Secret;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.ReentrantLock;
import org.agrona.collections.ArrayUtil;
import org.agrona.concurrent.IdleStrategy;

/**
 * A UCX device: one UCP context, its main worker (connections inside this JVM) and a worker per
 * peer process it is connected to ({@link UcxChannel}). Every call on a worker is made under
 * {@link #workerLock} (the workers are created {@code SERIALIZED}).
 *
 * <p>Memory registration is {@code ucp_mem_map} of the region's memory. Fast-registration MRs and
 * memory windows work as on every provider (the target checks each access against the verbs key
 * tables); integrity MRs are refused with {@code EOPNOTSUPP}.
 */
final class UcxDevice implements ProviderDevice {
    private final DeviceAttributes attributes;
    /**
     * Trusts peers ({@code oneSided=true}): RDMA WRITE and READ into peer memory that UCX allocated
     * ({@link RemoteKeyEnvelope#ONE_SIDED}) go as UCX puts and gets, which the target does not check.
     */
    volatile boolean oneSided;
    final Ucp ucp;
    private final UcpContext context;
    private final String name;
    /**
     * A context without UCX's shared-memory transports, for the channels to same-host peers the lane
     * could not reach (another network or pid namespace: UCX 1.13's shared-memory transports fail
     * there); made on first use, worker lock held.
     */
    private UcpContext networkContext;
    /** The main channel's worker. */
    final UcpWorker worker;
    /** The main channel: its worker serves the connections inside this JVM. */
    final UcxChannel main;
    /** The channels to other processes: a worker per peer process. */
    final UcxChannels channels = new UcxChannels(this);
    /** Where the AM callback's messages go: the QP they name, checked. */
    final UcxMessages messages = new UcxMessages(this);
    /** How the device's workers and QPs are progressed, and a deregistration's wait. */
    final UcxProgress progress = new UcxProgress(this);
    /** The AM handler's upcall stub, installed on every worker of the device. */
    MemorySegment amStub;
    /** Guards every call on the worker. */
    final ReentrantLock workerLock = new ReentrantLock();
    /** The data path's sections: a QP checks local keys and starts its UCX requests inside one. */
    final GracePeriod grace = new GracePeriod();
    /** The live QPs: replaced, never mutated, under {@code this}. */
    private volatile UcxQp[] qps = new UcxQp[0];
    private int nextQpNumber;
    /** The AM handler's upcall stub lives here; closed after the worker. */
    private final Arena arena = Arena.ofShared();
    /** Where the AM callback copies a message's header (it runs under the worker lock, one at a time). */
    final MemorySegment amHeader = arena.allocate(UcxAm.HEADER, 8);
    private final int amNumber;
    /** Set under the worker lock, once. */
    private boolean closed;
    /** This device's worker address (what a peer's endpoint connects to). */
    private final byte[] address;
    final UcxChunkSource chunkSource = new UcxChunkSource(this);
    final UcxRegistrations registrations = new UcxRegistrations(this);
    /** The same-host lane, for connections whose peer is on this host. */
    final UcxLanes lanes = new UcxLanes(this);

    /** The main channel's endpoints to peer workers (of this JVM), one per peer. */
    final UcxEndpoints endpoints;

    /** The handshake secret the options or environment named, or null for the user's default file. */
    private byte[] secret;
    /** How long each half of a connection's handshake may take. */
    private final int handshakeMillis;
    /**
     * How long a request waits for its target's answer before it completes RETRY_EXC_ERR (0: for
     * ever). Set once, before any QP exists.
     */
    long answerTimeoutNanos = UcxProvider.ANSWER_TIMEOUT_MILLIS * 1_000_000L;
    /**
     * WRITEs and READ answers of at least this many bytes go by UCX's rendezvous (one movement of
     * the bytes, straight into or out of the checked range); smaller ones eagerly with the header.
     * Set once, before any QP exists.
     */
    long rndvThreshold = UcxProvider.RNDV_THRESHOLD;

    /**
     * Its UD QPs and multicast, over UDP (set once by the provider, before the device is used; null
     * for a device made without it, which carries no datagrams).
     */
    UdpDatagrams datagrams;
    /** The progress thread, or null. */
    private Thread progressThread;
    private volatile boolean stopping;

    UcxDevice(Ucp ucp, DeviceAttributes attributes, String name, byte[] secret, int handshakeMillis) {
        this.ucp = ucp;
        this.name = name;
        this.attributes = attributes;
        this.secret = secret;
        this.handshakeMillis = handshakeMillis;
        this.context = new UcpContext(ucp, name);
        UcpWorker w;
        try {
            w = new UcpWorker(context);
        } catch (RuntimeException e) {
            context.close();
            throw e;
        }
        this.worker = w;
        int n;
        try {
            this.address = worker.address();
            this.main = new UcxChannel(this, 0, worker, address, null);
            this.endpoints = main.endpoints;
            n = UcxAm.install(this, arena);
        } catch (RuntimeException e) {
            worker.close();
            context.close();
            arena.close();
            throw e;
        }
        this.amNumber = n;
    }

    /**
     * Starts a thread that progresses this device's worker and runs its QPs (executes what peers
     * sent, answers them, completes sent requests into the CQs) without anybody polling, idling
     * with {@code idle} when there is nothing to do. QPs whose lock a user thread holds are left
     * to that thread.
     */
    UcxDevice startProgressThread(IdleStrategy idle, boolean sleep) {
        lanes.sleepy = sleep;
        progressThread = Thread.ofPlatform().daemon().name("regmem-ucx-progress-" + amNumber)
                .start(() -> progress.loop(idle, sleep, amNumber));
        return this;
    }

    /** True once the device closes: its progress thread ends. */
    boolean stopping() {
        return stopping;
    }

    /** One round of the progress thread's work, for a DeviceAgent (the worker, the lanes, every free QP). */
    @Override
    public int progressRound() {
        return progress.qps();
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

    /** True if the device runs a progress thread (started before any CQ exists). */
    boolean hasProgressThread() {
        return progressThread != null;
    }

    @Override
    public DeviceAttributes attributes() {
        return attributes;
    }

    @Override
    public ProviderMr registerMemory(MrContext mr) {
        return registrations.register(mr);
    }

    @Override
    public ChunkSource chunkSource() {
        return chunkSource;
    }

    /** The UCX context, for {@link UcxChunkSource} (worker lock held). */
    UcpContext context() {
        return context;
    }

    /** The context without shared-memory transports (made on first use; worker lock held). */
    UcpContext networkContext() {
        if (networkContext == null) {
            networkContext = new UcpContext(ucp, name + "-net", "^sm");
        }
        return networkContext;
    }

    /** True if this device's chunk source holds {@code [address, address + length)} (worker lock held). */
    boolean ownsAllocation(long address, long length) {
        return chunkSource.allocationOf(address, length) != null;
    }

    /** Whether the device is closed (worker lock held). */
    boolean isClosed() {
        return closed;
    }

    /** This device's worker address (not copied: callers do not change it). */
    byte[] address() {
        return address;
    }

    /** The AM handler's number on this device's workers. */
    int amNumber() {
        return amNumber;
    }

    /** The channel for a connection to the peer process {@code key} names ({@link UcxChannels#acquire}). */
    UcxChannel acquireChannel(Object key) {
        return channels.acquire(key);
    }

    /** No new connection joins {@code c} any more ({@link UcxChannels#retire}). */
    void retireChannel(UcxChannel c) {
        channels.retire(c);
    }

    /** A QP that took {@code c} is destroyed ({@link UcxChannels#release}). */
    void releaseChannel(UcxChannel c) {
        channels.release(c);
    }

    /** The channels to other processes (for diagnostics and tests). */
    UcxChannel[] channels() {
        return channels.all();
    }

    @Override
    public ProviderQp createQp(QpContext ctx) {
        if (ctx.qpType() == QpType.UD) {
            return datagrams.carrier().createQp(ctx, datagrams.oversizeError());
        }
        UcxQp qp;
        synchronized (this) {
            qp = new UcxQp(this, ctx, nextQpNumber++);
            qps = ArrayUtil.add(qps, qp);
        }
        return qp;
    }

    void removeQp(UcxQp qp) {
        synchronized (this) {
            qps = ArrayUtil.remove(qps, qp);
        }
    }

    /** The live QPs (a snapshot: the array is replaced, never mutated). */
    UcxQp[] qps() {
        return qps;
    }

    /** An active message arrived on the worker of channel {@code serial} ({@link UcxMessages#onMessage}). */
    boolean onMessage(MemorySegment h, int serial, long data, long length, boolean persistent, boolean rndv) {
        return messages.onMessage(h, serial, data, length, persistent, rndv);
    }

    @Override
    public ProviderCq createCq(CqContext cq) {
        return new UcxCq(this);
    }

    @Override
    public ProviderCm createCmId(CmContext id) {
        return new UcxCm(this, id);
    }

    /**
     * The secret that authenticates this device's connections to other processes: the configured
     * one, or the user's default ({@link Secret#defaultSecret}, read or made on first use).
     *
     * @throws RdmaException {@link Errno#EACCES} if the default file cannot be made or read
     */
    synchronized byte[] secret() {
        if (secret == null) {
            secret = Secret.defaultSecret("ucx");
        }
        return secret;
    }

    /** How long each half of a connection's handshake may take, in milliseconds. */
    int handshakeMillis() {
        return handshakeMillis;
    }

    /**
     * Takes the worker lock unless this thread holds it already (the AM callback runs inside the
     * worker's progress, under it): true if this call took it, and its caller unlocks it then. A
     * reentrant acquisition would cost a fence for nothing.
     *
     * @throws RdmaException {@link Errno#ENODEV} if the device was closed
     */
    boolean lockWorkerUnlessHeld() {
        if (workerLock.isHeldByCurrentThread()) {
            return false;
        }
        lockWorker();
        return true;
    }

    /**
     * Takes {@code l}, spinning a while before parking: its holders keep it for a moment (a worker
     * progress, a QP's delivery), and waking from a park costs tens of microseconds on these machines.
     */
    static void lockSpinning(ReentrantLock l) {
        for (int i = 0; i < 1024; i++) {
            if (l.tryLock()) {
                return;
            }
            Thread.onSpinWait();
        }
        l.lock();
    }

    /**
     * Takes the worker lock, for a worker that is still there.
     *
     * @throws RdmaException {@link Errno#ENODEV} if the device was closed (by another thread, racing this one)
     */
    void lockWorker() {
        lockSpinning(workerLock);
        if (closed) {
            workerLock.unlock();
            throw new RdmaException(Errno.ENODEV, "ucx: the device was closed");
        }
    }

    /**
     * Closes {@code a} once channel {@code c}'s worker is destroyed (nothing of UCX's uses it then):
     * with the channel, or when the device closes.
     */
    void closeLater(UcxChannel c, Arena a) {
        c.closeLater.add(a);
        if (c.worker.isClosed()) { // (destroyed meanwhile: the device closed)
            for (Arena x; (x = c.closeLater.poll()) != null; ) {
                x.close();
            }
        }
    }

    void abandon(long request) {
        if (request != 0 && !Ucp.isError(request)) {
            ucp.requestFree(request);
        }
    }

    /** Progresses the workers the QPs of {@code a} and {@code b} use ({@link UcxProgress#channels}). */
    void progressChannels(UcxQp[] a, UcxQp[] b) {
        progress.channels(a, b);
    }

    /** Progresses the worker if its lock is free ({@link UcxProgress#tryWorker}); never waits. */
    void tryProgress() {
        progress.tryWorker();
    }

    /** Progresses every worker of the device until it has nothing more to do now ({@link UcxProgress#all}). */
    void progress() {
        progress.all();
    }

    /** Progresses this JVM's other open devices' workers whose lock is free; true if any did something. */
    boolean progressOthers() {
        return progress.others();
    }

    /**
     * {@link #quiesce()}, and for a region being deregistered also waits for the answers that land in
     * it ({@link UcxProgress#quiesce}).
     */
    void quiesce(Guard region) {
        progress.quiesce(region);
    }

    /** This device's worker address, for a peer's endpoint. */
    byte[] workerAddress() {
        return address.clone();
    }

    /**
     * Waits until no access that began before this call is in progress: every data-path section
     * that may have checked a key before the caller invalidated it has ended (its UCX requests are
     * started), and no started request's UCX requests still read or write its local memory. A request
     * that only waits for its target's answer uses no local memory, so an invalidation never waits on
     * a peer; a deregistration waits for the answers that land in its region ({@link #quiesce(Guard)}).
     *
     * @throws RdmaException {@link Errno#EIO} if UCX has not finished a request after 10 s
     */
    @Override
    public void quiesce() {
        progress.quiesce(null);
    }

    @Override
    public void close() {
        workerLock.lock();
        try {
            if (closed) {
                return;
            }
        } finally {
            workerLock.unlock();
        }
        stopping = true;
        Thread t = progressThread;
        if (t != null && t != Thread.currentThread()) {
            try {
                t.join(10_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        endpoints.closePeersEndpoints();
        workerLock.lock();
        try {
            if (closed) {
                return;
            }
            closed = true; // under the lock: a racing caller finds the worker gone (lockWorker), never destroyed under it
            List<Long> closing = endpoints.startClosingAll();
            UcxChannel[] left = channels.all();
            List<List<Long>> channelClosing = new ArrayList<>();
            for (UcxChannel c : left) {
                channelClosing.add(c.endpoints.startClosingAll());
            }
            progress.settle(); // progresses the closes (and the peers of this JVM that answer them)
            for (int i = 0; i < left.length; i++) {
                channels.close(left[i], channelClosing.get(i));
            }
            for (long r : closing) {
                if (worker.poll(r) == UcpLayout.UCS_INPROGRESS) {
                    abandon(r); // a peer that never answered: released, freed by the destroy
                }
            }
            worker.close();
            chunkSource.freeAll(); // chunks never given back, and parked ones
        } finally {
            workerLock.unlock();
        }
        lanes.close();
        if (datagrams != null) {
            datagrams.close();
        }
        UcxAm.uninstall(amNumber);
        context.close();
        if (networkContext != null) {
            networkContext.close(); // (its workers, the channels', are gone)
        }
        for (Arena a; (a = main.closeLater.poll()) != null; ) {
            a.close();
        }
        arena.close();
    }
}
