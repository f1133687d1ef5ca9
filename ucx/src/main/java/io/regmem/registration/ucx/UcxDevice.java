package io.regmem.registration.ucx;

import io.regmem.core.ChunkSource;
import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.Access;
import io.regmem.registration.DeviceAttributes;
import io.regmem.registration.Opcode;
import io.regmem.registration.spi.CmContext;
import io.regmem.registration.spi.CqContext;
import io.regmem.registration.spi.GracePeriod;
import io.regmem.registration.spi.Guard;
import io.regmem.registration.spi.MrContext;
import io.regmem.registration.spi.ProviderCm;
import io.regmem.registration.spi.ProviderCq;
import io.regmem.registration.spi.ProviderDevice;
import io.regmem.registration.spi.ProviderMr;
import io.regmem.registration.spi.ProviderQp;
import io.regmem.registration.spi.QpContext;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.HashMap;
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
    /** The main channel's worker. */
    final UcpWorker worker;
    /** The main channel: its worker serves the connections inside this JVM. */
    final UcxChannel main;
    /** The channels to other processes, retired ones included, until destroyed: replaced, never mutated, under the worker lock. */
    private volatile UcxChannel[] channels = new UcxChannel[0];
    /** The channels new connections to a peer may join, by the peer's identity (guarded by itself). */
    private final HashMap<Object, UcxChannel> channelTable = new HashMap<>();
    /** Serial numbers of channels (worker lock). */
    private int nextSerial = 1;
    /** Progress rounds of {@link #progressChannels} (worker lock). */
    private long round;
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
    private final UcxChunkSource chunkSource = new UcxChunkSource(this);

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

    /** The progress thread, or null. */
    private Thread progressThread;
    private volatile boolean stopping;

    UcxDevice(Ucp ucp, DeviceAttributes attributes, String name, byte[] secret, int handshakeMillis) {
        this.ucp = ucp;
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
    UcxDevice startProgressThread(IdleStrategy idle) {
        progressThread = Thread.ofPlatform().daemon().name("regmem-ucx-progress-" + amNumber).start(() -> {
            while (!stopping) {
                int work;
                try {
                    work = progressQps();
                } catch (RdmaException closing) {
                    return;
                }
                idle.idle(work);
            }
        });
        return this;
    }

    /** True if the device runs a progress thread (started before any CQ exists). */
    boolean hasProgressThread() {
        return progressThread != null;
    }

    /** One round of the progress thread: the worker, then every QP whose lock is free; the work done. */
    private int progressQps() {
        int work = 0;
        lockWorker();
        try {
            work += progressAll();
        } finally {
            workerLock.unlock();
        }
        for (UcxQp qp : qps) {
            ReentrantLock l = qp.ctx.lock();
            if (!qp.destroyed && (qp.receiveWork() || qp.sendWork()) && l.tryLock()) {
                try {
                    if (!qp.destroyed) {
                        work += qp.inbox().isEmpty() ? 0 : 1;
                        qp.deliver();
                        work += qp.busy() ? 1 : 0;
                        qp.reap();
                    }
                } finally {
                    l.unlock();
                }
            }
        }
        return work;
    }

    @Override
    public DeviceAttributes attributes() {
        return attributes;
    }

    @Override
    public ProviderMr registerMemory(MrContext mr) {
        if (mr.isIntegrity()) {
            throw new RdmaException(Errno.EOPNOTSUPP, mr.name() + ": ucx: integrity (signature) MRs are not supported "
                    + "(T10-PI offload is a soft provider feature)");
        }
        MemorySegment segment = mr.segment();
        if (segment == null || mr.isWindow()) {
            // Fast-reg MRs and windows: every access is checked by the target against the verbs key
            // tables, which REG_MR, LOCAL_INV and window binds update; UCX needs no registration.
            return new UcxMr(this, mr, MemorySegment.NULL, new byte[0], null);
        }
        lockWorker(); // context calls too: the worker uses the context's registrations
        try {
            UcxChunkSource.Allocation shared = chunkSource.allocationOf(segment.address(), segment.byteSize());
            if (shared != null) { // memory UCX allocated and registered: its registration serves the region
                shared.regions++;
                return new UcxMr(this, mr, shared.memh, shared.packed, shared);
            }
            int access = mr.access();
            int prot = UcpLayout.MEM_MAP_PROT_LOCAL_READ | UcpLayout.MEM_MAP_PROT_LOCAL_WRITE
                    | ((access & Access.REMOTE_READ.bit()) != 0 ? UcpLayout.MEM_MAP_PROT_REMOTE_READ : 0)
                    | ((access & (Access.REMOTE_WRITE.bit() | Access.REMOTE_ATOMIC.bit())) != 0
                            ? UcpLayout.MEM_MAP_PROT_REMOTE_WRITE : 0);
            MemorySegment memh = context.map(segment.address(), segment.byteSize(), prot); // (a NIC enforces these rights)
            try {
                return new UcxMr(this, mr, memh, context.packRemoteKey(memh), null);
            } catch (RuntimeException e) {
                context.unmap(memh);
                throw e;
            }
        } finally {
            workerLock.unlock();
        }
    }

    @Override
    public ChunkSource chunkSource() {
        return chunkSource;
    }

    /** Deregisters a region: its own registration unmapped, or its share of an allocation's given back. */
    void deregister(MemorySegment memh, UcxChunkSource.Allocation shared) {
        lockWorker();
        try {
            if (shared != null) {
                chunkSource.regionGone(shared);
            } else {
                context.unmap(memh);
            }
        } finally {
            workerLock.unlock();
        }
    }

    /** The UCX context, for {@link UcxChunkSource} (worker lock held). */
    UcpContext context() {
        return context;
    }

    /**
     * Progresses the workers of this JVM's other open devices whose lock is free (an in-process peer
     * answers only when its worker progresses); true if any did something. Takes no lock it waits for.
     */
    boolean progressOthers() {
        boolean busy = false;
        for (UcxDevice other : UcxAm.devices()) {
            if (other != null && other != this && other.workerLock.tryLock()) {
                try {
                    busy |= !other.closed && other.worker.progress();
                } finally {
                    other.workerLock.unlock();
                }
            }
        }
        return busy;
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

    /**
     * The channel for a connection to the peer process {@code key} names (the listener's address a
     * requester connects to, or the requester's worker address a listener is asked by): the one
     * earlier live connections to it use, or a new one with a worker of its own. The caller gives it
     * back with {@link #releaseChannel} (its QP's destruction). A new channel's worker is made under the
     * worker lock (a few milliseconds, once per peer process).
     *
     * @throws RdmaException {@link Errno#ENODEV} if the device was closed; {@link Errno#ENOMEM} if UCX
     *                       cannot make a worker
     */
    UcxChannel acquireChannel(Object key) {
        synchronized (channelTable) {
            UcxChannel c = channelTable.get(key);
            if (c == null) {
                c = newChannel(key);
                channelTable.put(key, c);
            }
            c.users++;
            return c;
        }
    }

    /** A channel with a worker of its own, its AM handler installed (channel table's monitor held). */
    private UcxChannel newChannel(Object key) {
        lockWorker();
        try {
            UcpWorker w = new UcpWorker(context);
            try {
                int serial = nextSerial++;
                byte[] a = w.address();
                UcxAm.installOn(this, amNumber, w, serial);
                UcxChannel c = new UcxChannel(this, serial, w, a, key);
                channels = ArrayUtil.add(channels, c);
                return c;
            } catch (RuntimeException e) {
                w.close();
                throw e;
            }
        } finally {
            workerLock.unlock();
        }
    }

    /** No new connection joins {@code c} any more (one of its connections ended); the main channel stays. */
    void retireChannel(UcxChannel c) {
        if (c == null || c.serial == 0) {
            return;
        }
        synchronized (channelTable) {
            if (!c.retired) {
                c.retired = true;
                channelTable.remove(c.key, c);
            }
        }
    }

    /**
     * A QP that took {@code c} is destroyed: the last one destroys the channel (its endpoints closed,
     * its worker settled and destroyed; requests a dead peer never finishes are released first).
     * The main channel stays.
     */
    void releaseChannel(UcxChannel c) {
        if (c == null || c.serial == 0) {
            return;
        }
        synchronized (channelTable) {
            if (--c.users > 0) {
                return;
            }
            c.retired = true;
            channelTable.remove(c.key, c);
        }
        destroyChannel(c);
    }

    /** Destroys a channel nobody uses (its QPs' requests are ended or released). */
    private void destroyChannel(UcxChannel c) {
        List<Long> closing;
        if (!lockWorkerIfOpen()) {
            return; // the device's close destroyed it
        }
        try {
            if (c.worker.isClosed()) {
                return;
            }
            closing = c.endpoints.startClosingAll();
        } finally {
            workerLock.unlock();
        }
        // Settled with the lock taken per round: the device's other channels go on meanwhile.
        long deadline = System.nanoTime() + 200_000_000L;
        int idle = 0;
        while (idle < 16 && System.nanoTime() < deadline) {
            if (!lockWorkerIfOpen()) {
                return;
            }
            try {
                idle = c.worker.progress() ? 0 : idle + 1;
            } finally {
                workerLock.unlock();
            }
        }
        if (!lockWorkerIfOpen()) {
            return;
        }
        try {
            closeChannel(c, closing);
        } finally {
            workerLock.unlock();
        }
    }

    /** Takes the worker lock unless the device is closed (then false, and its close destroyed every channel). */
    private boolean lockWorkerIfOpen() {
        try {
            lockWorker();
            return true;
        } catch (RdmaException closedAlready) {
            return false;
        }
    }

    /** Releases the closes still running and destroys the channel's worker (worker lock held). */
    private void closeChannel(UcxChannel c, List<Long> closing) {
        for (long r : closing) {
            if (c.worker.poll(r) == UcpLayout.UCS_INPROGRESS) {
                abandon(r); // a peer that never answered (gone): released, freed by the destroy
            }
        }
        c.worker.close();
        channels = ArrayUtil.remove(channels, c);
        for (Arena a; (a = c.closeLater.poll()) != null; ) {
            a.close(); // nothing of UCX's uses it any more
        }
    }

    /** The channels to other processes (for diagnostics and tests). */
    UcxChannel[] channels() {
        return channels;
    }

    /**
     * Progresses the workers the QPs of {@code a} and {@code b} use, each once (a channel is shared by
     * the QPs to one peer process), up to 64 rounds each while they report work; the main worker if
     * there are no QPs. A CQ's poll: workers none of its QPs use are left to their own CQs.
     */
    void progressChannels(UcxQp[] a, UcxQp[] b) {
        lockWorker();
        try {
            if (a.length == 0 && b.length == 0) {
                progressWorker(worker);
                return;
            }
            long r = ++round;
            for (UcxQp qp : a) {
                progressOnce(qp.channel, r);
            }
            for (UcxQp qp : b) {
                progressOnce(qp.channel, r);
            }
        } finally {
            workerLock.unlock();
        }
    }

    private static void progressOnce(UcxChannel c, long round) {
        if (c.round != round) {
            c.round = round;
            progressWorker(c.worker);
        }
    }

    /** Progresses {@code w} while it reports work, at most 64 rounds (worker lock held); the rounds that did something. */
    private static int progressWorker(UcpWorker w) {
        int i = 0;
        while (i < 64 && w.progress()) {
            i++;
        }
        return i;
    }

    /** Progresses every worker of the device (worker lock held); the rounds that did something. */
    private int progressAll() {
        int work = progressWorker(worker);
        for (UcxChannel c : channels) {
            work += progressWorker(c.worker);
        }
        return work;
    }

    void unmap(MemorySegment memh) {
        lockWorker();
        try {
            context.unmap(memh);
        } finally {
            workerLock.unlock();
        }
    }

    @Override
    public ProviderQp createQp(QpContext ctx) {
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

    /** Header fields arrive at any alignment (UCX places the header where the transport put it). */
    private static final ValueLayout.OfInt U_INT = ValueLayout.JAVA_INT_UNALIGNED;
    private static final ValueLayout.OfLong U_LONG = ValueLayout.JAVA_LONG_UNALIGNED;

    /**
     * Messages the AM callback dropped: for no live QP of this device, with a wrong token, or not of
     * this provider's kinds (worker lock held to write; read racily by diagnostics).
     */
    long dropped;
    /** AM callbacks that failed with an exception (their message dropped), and the last such failure. */
    volatile long callbackFailures;
    volatile Throwable lastCallbackFailure;

    /** What the device's AM callback dropped, for a QP's {@link UcxQp#diagnostics()}. */
    String droppedDescription() {
        Throwable t = lastCallbackFailure;
        return "device: messages dropped " + dropped + ", callbacks failed " + callbackFailures
                + (t == null ? "" : " (last: " + t + ")");
    }

    /** The live QP with this number, or null. */
    private UcxQp qp(int number) {
        for (UcxQp qp : qps) {
            if (qp.number == number) {
                return qp;
            }
        }
        return null;
    }

    /**
     * An active message arrived on the worker of channel {@code serial} (the AM callback, inside the
     * worker's progress, worker lock held):
     * an acknowledgement goes to its sender QP; a message is executed at once if nothing stands in
     * its way, else into its QP's inbox. True if the data (or a rendezvous descriptor) is kept, to
     * be released or received later.
     */
    boolean onMessage(MemorySegment h, int serial, long data, long length, boolean persistent, boolean rndv) {
        UcxQp qp = qp(h.get(U_INT, UcxAm.H_DST));
        if (qp == null || h.get(U_LONG, UcxAm.H_TOKEN) != qp.localToken || qp.channel.serial != serial) {
            dropped++;
            return false; // the QP is gone, or the message is not from its connection (nor on its worker): dropped
        }
        int type = h.get(U_INT, UcxAm.H_TYPE);
        if (type == UcxAm.TYPE_ACK) {
            qp.answersIn++;
            qp.acked(h.get(U_LONG, UcxAm.H_SEQ), h.get(U_INT, UcxAm.H_STATUS));
            return false;
        }
        if (type == UcxAm.TYPE_READ_RESPONSE) {
            qp.answersIn++;
            return (length == 0 || persistent || rndv)
                    && qp.readResponse(h.get(U_LONG, UcxAm.H_SEQ), h.get(U_INT, UcxAm.H_STATUS), length > 0 ? data : 0, length, rndv);
        }
        int opcode = h.get(U_INT, UcxAm.H_OPCODE);
        if (type != UcxAm.TYPE_MSG || opcode < 0 || opcode >= UcxAm.OPCODES.length
                || (length > 0 && !persistent && !(rndv && opcode == Opcode.RDMA_WRITE.ordinal()))) {
            dropped++;
            return false; // not a message this provider sends (eager data persists; only WRITEs go by rendezvous)
        }
        qp.messagesIn++;
        // A READ carries no bytes: its length travels in the header, in the length slot of the inbox.
        boolean read = opcode == Opcode.RDMA_READ.ordinal();
        long len = read ? h.get(U_LONG, UcxAm.H_LENGTH) : length;
        long seq = h.get(U_LONG, UcxAm.H_SEQ);
        int imm = h.get(U_INT, UcxAm.H_IMM);
        int inv = h.get(U_INT, UcxAm.H_INV);
        long raddr = h.get(U_LONG, UcxAm.H_RADDR);
        int rkey = h.get(U_INT, UcxAm.H_RKEY);
        int flags = h.get(U_INT, UcxAm.H_STATUS) & (UcxAm.FLAG_RNR_MASK | UcxAm.FLAG_SOLICITED);
        long d = length > 0 ? data : 0;
        if (qp.violated != null) {
            dropped++;
            return false; // the connection broke the protocol: it ends, nothing of it is kept
        }
        if (qp.executeNow(d, len, seq, opcode, imm, inv, raddr, rkey, flags, rndv)) {
            return false; // executed (or, by rendezvous, its receive started) in this callback: nothing kept
        }
        UcxInbox inbox = qp.inbox();
        if (!inbox.fits(d != 0 && !rndv ? len : 0)) {
            qp.violate("it sent beyond its window (" + inbox.size() + " messages waiting, at most "
                    + UcxAm.WINDOW_MESSAGES + " and " + UcxAm.WINDOW_BYTES + " bytes)");
            dropped++;
            return false;
        }
        inbox.add(d, len, seq, opcode, imm, inv, raddr, rkey, flags, rndv);
        return length > 0;
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
     * one, or the user's default ({@link UcxSecret#defaultSecret()}, read or made on first use).
     *
     * @throws RdmaException {@link Errno#EACCES} if the default file cannot be made or read
     */
    synchronized byte[] secret() {
        if (secret == null) {
            secret = UcxSecret.defaultSecret();
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
     * Before the worker is destroyed: progresses it until it has been idle for 16 calls in a row (at
     * most 200 ms), so that the connection-level messages UCX still exchanges for closed endpoints
     * are done. UCX 1.13 aborts the process in {@code ucp_worker_destroy} when such a message is
     * still pending on a TCP endpoint ({@code ucp_request.c:684: got REP message}). Worker lock held.
     */
    private void settle() {
        long deadline = System.nanoTime() + 200_000_000L;
        int idle = 0;
        while (idle < 16 && System.nanoTime() < deadline) {
            boolean busy = progressAll() > 0;
            busy |= progressOthers(); // a peer in this JVM must answer too
            idle = busy ? 0 : idle + 1;
        }
    }

    /**
     * Gives up a request nobody waits for any more (its peer never answered; worker lock held): it is
     * released at once ({@code ucp_request_free} of a running request frees it when it ends), so that
     * the worker frees it then or at its destruction. UCX 1.13 asserts, killing the process, if a
     * worker is destroyed with a request that was never released.
     */
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

    /**
     * Progresses the worker if its lock is free (another thread holds it: that one is progressing
     * it); never waits. For a peer's progress driven from this JVM's other threads.
     */
    void tryProgress() {
        if (!workerLock.tryLock()) {
            return;
        }
        try {
            if (!closed) {
                progressWorker(worker);
            }
        } finally {
            workerLock.unlock();
        }
    }

    /** Progresses every worker of the device until it has nothing more to do now (at most 64 rounds each). */
    void progress() {
        lockWorker();
        try {
            progressAll();
        } finally {
            workerLock.unlock();
        }
    }

    /** This device's worker address, for a peer's endpoint. */
    byte[] workerAddress() {
        return address.clone();
    }


    /**
     * Waits until no access that began before this call is in progress: every data-path section
     * that may have checked a key before the caller invalidated it has ended (its UCX requests are
     * started), and no started request's UCX requests still read or write its local memory. A request
     * that only waits for its target's answer uses no local memory (a READ's bytes are placed at its
     * completion, through keys resolved again then), so a deregistration never waits on a peer.
     *
     * @throws RdmaException {@link Errno#EIO} if UCX has not finished a request after 10 s
     */
    @Override
    public void quiesce() {
        quiesce(null);
    }

    /**
     * {@link #quiesce()}, and for a region being deregistered ({@code region} non-null) also waits for
     * the answers of READs and atomics started before that will be placed into it: the target has
     * executed them, so they complete, placed, rather than fail. The wait ends when each is answered,
     * or fails as unanswered after the device's answer timeout (RETRY_EXC_ERR: it may have executed).
     */
    void quiesce(Guard region) {
        grace.synchronize(); // every request that resolved its entries before the keys went invalid is started now
        long deadline = System.nanoTime() + 10_000_000_000L + answerTimeoutNanos;
        for (UcxQp qp : qps) {
            while (true) {
                ReentrantLock l = qp.ctx.lock();
                if (l.tryLock()) {
                    try {
                        qp.reap();
                        if (!qp.usesLocalMemory() && (region == null || !qp.answersInto(region))) {
                            break;
                        }
                    } finally {
                        l.unlock();
                    }
                } else if (!qp.busy()) {
                    break; // (another thread runs the QP: nothing started is left to look at)
                }
                progress();
                UcxCq.progressPeer(qp); // an in-process peer answers only when its worker progresses
                if (System.nanoTime() > deadline) {
                    throw new RdmaException(Errno.EIO, qp.ctx.name() + ": ucx requests still running after 10 s");
                }
            }
        }
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
            UcxChannel[] left = channels;
            List<List<Long>> channelClosing = new ArrayList<>();
            for (UcxChannel c : left) {
                channelClosing.add(c.endpoints.startClosingAll());
            }
            settle(); // progresses the closes (and the peers of this JVM that answer them)
            for (int i = 0; i < left.length; i++) {
                closeChannel(left[i], channelClosing.get(i));
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
        UcxAm.uninstall(amNumber);
        context.close();
        for (Arena a; (a = main.closeLater.poll()) != null; ) {
            a.close();
        }
        arena.close();
    }
}
