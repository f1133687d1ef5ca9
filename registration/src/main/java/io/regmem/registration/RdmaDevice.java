package io.regmem.registration;

import io.regmem.core.ChunkSource;
import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.spi.ProviderDevice;
import io.regmem.registration.spi.RdmaProvider;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Map;
import java.util.ServiceLoader;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import org.agrona.ErrorHandler;

/**
 * An RDMA device opened through a provider: the root of the verbs object tree
 * (device, then PDs, CQs and CM IDs, then MRs and QPs).
 *
 * <p>Every object it creates is tracked ({@link #resources()}) with its type, owner and creation
 * site. {@link #close()} refuses to close while any is alive and lists them; {@link #forceClose()}
 * destroys them in the mandatory order (QPs, CM IDs, windows, SRQs, MRs, DMA mappings, CQs, PDs) and reports what
 * it destroyed.
 * Creating and destroying objects is serialized per device; it is not a hot path.
 */
public final class RdmaDevice implements AutoCloseable {
    final Object lock = new Object();
    final ResourceTracker tracker = new ResourceTracker();
    final KeyTable keys = new KeyTable();
    final DmaTable dma = new DmaTable();
    /** Completions polled from this device's CQs, by status (metrics). */
    final DeviceCounters counters = new DeviceCounters(this);
    /** Where asynchronous failures go besides events and logs. */
    final DeviceErrors errors = new DeviceErrors();
    private final ProviderDevice backend;
    private final String provider;
    private final String name;
    private volatile boolean closed;
    boolean rwForceMr;
    /** 0 off, 1 sampled, 2 all: see {@link #TRACK_SITES}. */
    int trackSites = 1;

    RdmaDevice(ProviderDevice backend, String provider, String name) {
        this.backend = backend;
        this.provider = provider;
        this.name = name;
    }

    /** Opens the named provider's device with default options. */
    public static RdmaDevice open(String provider) {
        return open(provider, Map.of());
    }

    /**
     * Opens the named provider's device, found through {@link ServiceLoader} ({@link RdmaProvider}).
     *
     * <p>The device is named by the {@link #NAME} option, or else by its provider and the lowest
     * number no open device of that provider uses ({@code soft0}, {@code soft1}, ...); every message
     * about the device or its objects carries that name.
     *
     * @param provider e.g. {@code "soft"}
     * @param options  provider options, e.g. {@code Map.of("maxSendSge", "2")}: every provider takes the
     *                 {@link DeviceAttributes} limits; each one's own are in its class Javadoc
     *                 ({@link io.regmem.registration.soft.SoftProvider}, {@code io.regmem.registration.shm.ShmProvider},
     *                 {@code io.regmem.registration.ucx.UcxProvider}) and in docs/providers.md
     * @throws RdmaException {@link Errno#ENOENT} naming the providers present if none has that name;
     *                       {@link Errno#EINVAL} for a bad option (a null name or value included) or a null
     *                       provider or map; {@link Errno#EEXIST} if an open device
     *                       already has the asked {@link #NAME}
     */
    public static RdmaDevice open(String provider, Map<String, String> options) {
        return DeviceOpening.open(provider, options);
    }

    /**
     * The device option that names the device: {@code "name" -> "nic0"}. Letters, digits, '-', '_'
     * and '.', at most 64 characters, unique among the open devices of this JVM. Default: the
     * provider's name and the lowest free number ({@code soft0}). Handled by every device.
     */
    public static final String NAME = "name";

    /** The devices open now, in the order they were opened (a snapshot; for leak checks and tools). */
    public static List<RdmaDevice> openDevices() {
        return OpenDevices.list();
    }

    /** The provider's half of this device. */
    ProviderDevice provider() {
        return backend;
    }

    /**
     * Where to get memory that this device's transport registers most cheaply: chunks the transport
     * allocates and registers itself (ucx: {@code UCP_MEM_MAP_ALLOCATE}; a region registered over
     * them reuses that registration, with no {@code ucp_mem_map} of its own), or anonymous
     * {@code mmap} memory ({@link io.regmem.core.ChunkSource#mmap()}) for a provider that has none (soft). Give it to
     * a pool and register the pool, or wrap it in a {@link RegisteredChunkSource}: the pool's buffers
     * are then registered at birth. Chunks must be released before the device closes.
     */
    public ChunkSource chunkSource() {
        ChunkSource own = backend.chunkSource();
        return own != null ? own : ChunkSource.mmap();
    }

    /**
     * The device option that makes RDMA read/write contexts always register memory (fast-reg MRs),
     * the kernel's {@code rdma_rw.force_mr} module parameter: {@code "rwForceMr" -> "true"}.
     * Handled by every device, whatever its provider.
     */
    public static final String RW_FORCE_MR = "rwForceMr";

    /**
     * The device option that says which objects record where they were created, for leak reports
     * ({@link RdmaResource#creationSite()}): {@code "all"}; {@code "sampled"} (the default: memory
     * regions, memory windows and DMA mappings, which programs make at a high rate, record it one
     * time in 64, as Netty's leak detector samples; every other object always does); or
     * {@code "off"}. Finding the site walks the stack, which costs 1-4 microseconds, several times
     * a soft provider's whole registration. Handled by every device, whatever its provider.
     */
    public static final String TRACK_SITES = "trackSites";

    /** Whether a new object records its creation site: always, one time in 64 for high-rate types, or never. */
    boolean tracksSite(boolean highRate) {
        int mode = trackSites;
        return mode == 2 || (mode == 1 && (!highRate || ThreadLocalRandom.current().nextInt(64) == 0));
    }

    /** Whether rw contexts always use MRs on this device ({@link #RW_FORCE_MR}). */
    public boolean rwForceMr() {
        return rwForceMr;
    }

    /**
     * True if all of {@code [address, address + length)} lies in one live DMA mapping of this
     * device ({@link #dmaMap}): the device may reach it with the local DMA key. Lock-free.
     */
    public boolean isDmaMapped(long address, long length) {
        return dma.find(address, length) != null;
    }

    /**
     * The live DMA mapping holding all of {@code [address, address + length)}, or null. Lock-free;
     * a caller checking many ranges can test the next one against the mapping it got first.
     */
    public DmaMapping dmaMappingOf(long address, long length) {
        return dma.find(address, length);
    }

    /** The device's name: the {@link #NAME} option, or the provider's name and a number ({@code soft0}). */
    public String name() {
        return name;
    }

    /**
     * The completions polled from this device's CQs and the failed ones by status, since the device
     * opened (destroyed CQs included): what regmem's JMX beans and Micrometer binder report.
     */
    public DeviceCounters counters() {
        return counters;
    }

    /**
     * Sets the handler of this device's asynchronous failures (Agrona's {@link ErrorHandler}, as an
     * {@code AgentRunner} takes): a CQ overrun or a QP's fatal error (as the asynchronous event, an
     * {@link RdmaException} {@code EIO}), a connection whose peer disconnected or went away (the
     * {@code DISCONNECTED} event; {@code ECONNRESET}), and a connection event handler that threw (the
     * exception itself: it then no longer propagates to the thread that delivered the event). Each is
     * also what it was before: an event, a log line. With no handler set, a CQ overrun and a QP's fatal
     * error are logged (WARNING, once per object). Called on the thread that saw the failure (a
     * provider's or a caller's); it must not block. Null removes it.
     */
    public void errorHandler(ErrorHandler handler) {
        errors.handler(handler);
    }

    /** The handler set by {@link #errorHandler(ErrorHandler)}, or null. */
    public ErrorHandler errorHandler() {
        return errors.handler();
    }

    /** The name of the provider that opened the device ({@code soft}). */
    public String providerName() {
        return provider;
    }

    /** The device's limits. */
    public DeviceAttributes attributes() {
        return backend.attributes();
    }

    /** The registry of live objects. */
    public ResourceTracker resources() {
        return tracker;
    }

    /** Allocates a protection domain ({@code ib_alloc_pd}). */
    public ProtectionDomain allocPd() {
        synchronized (lock) {
            checkOpen("allocPd");
            ProtectionDomain pd = new ProtectionDomain(this);
            tracker.add(pd);
            return pd;
        }
    }

    /**
     * Creates a completion queue ({@code ib_create_cq}).
     *
     * @param depth entries, in [1, maxCqe]
     * @throws RdmaException {@link Errno#EINVAL} for a depth out of range
     */
    public CompletionQueue createCq(int depth) {
        return createCq(depth, null);
    }

    /**
     * Creates a completion queue whose events go to {@code channel} ({@code ibv_create_cq} with a
     * completion channel; null: none): armed with {@link CompletionQueue#requestNotify(boolean)}, it
     * raises an event there for its next completion.
     *
     * @param depth entries, in [1, maxCqe]
     * @throws RdmaException {@link Errno#EINVAL} for a depth out of range or a channel of another
     *                       device; {@link Errno#EBADF} if the channel was destroyed
     */
    public CompletionQueue createCq(int depth, CompletionChannel channel) {
        synchronized (lock) {
            checkOpen("createCq");
            if (depth < 1 || depth > attributes().maxCqe()) {
                throw new RdmaException(Errno.EINVAL, "RdmaDevice[" + name + "]: createCq(" + depth
                        + ") is not in [1, maxCqe=" + attributes().maxCqe() + "]");
            }
            if (channel != null) {
                if (channel.device != this) {
                    throw new RdmaException(Errno.EINVAL, "RdmaDevice[" + name + "]: createCq with " + channel + " of device "
                            + channel.device.name() + "; a CQ's channel is of its own device");
                }
                channel.checkAlive("createCq");
            }
            CompletionQueue cq = new CompletionQueue(this, depth, channel);
            cq.provider = backend.createCq(cq.context); // throws: nothing created
            if (channel != null) {
                channel.attach(cq);
            }
            tracker.add(cq);
            return cq;
        }
    }

    /**
     * Creates a completion channel ({@code ibv_create_comp_channel}): CQs created on it
     * ({@link #createCq(int, CompletionChannel)}) raise their completion events there.
     */
    public CompletionChannel createCompletionChannel() {
        synchronized (lock) {
            checkOpen("createCompletionChannel");
            CompletionChannel ch = new CompletionChannel(this);
            tracker.add(ch);
            return ch;
        }
    }

    /**
     * Maps native memory for the device ({@code ib_dma_map_sg}): SGEs over it may use the PD's local
     * DMA key, and fast-reg MRs may map its pages. Mappings of one device must not overlap.
     *
     * @throws RdmaException {@link Errno#EINVAL} for heap or empty memory or an overlap
     */
    public DmaMapping dmaMap(MemorySegment segment) {
        synchronized (lock) {
            checkOpen("dmaMap");
            DmaMapping.checkMappable(segment, "RdmaDevice[" + name + "]");
            DmaMapping m = new DmaMapping(this, segment);
            dma.add(m);
            tracker.add(m);
            return m;
        }
    }

    /** Creates a CM ID bound to this device ({@code rdma_create_id} plus address binding), in {@link PortSpace#TCP}. */
    public CmId createCmId() {
        return createCmId(PortSpace.TCP);
    }

    /**
     * Creates a CM ID bound to this device in {@code space} ({@code rdma_create_id(..., ps)}): a QP
     * created on a {@link PortSpace#UDP} ID is an unreliable-datagram QP.
     *
     * @throws RdmaException {@link Errno#EOPNOTSUPP} for {@code UDP} on a device whose provider carries
     *                       no datagrams ({@link #supportsDatagrams()}); {@link Errno#EINVAL} for null;
     *                       {@link Errno#EBADF} if the device is closed
     */
    public CmId createCmId(PortSpace space) {
        if (space == null) {
            throw new RdmaException(Errno.EINVAL, "RdmaDevice[" + name + "]: createCmId needs a port space (TCP or UDP)");
        }
        synchronized (lock) {
            checkOpen("createCmId");
            if (space == PortSpace.UDP && !supportsDatagrams()) {
                throw new RdmaException(Errno.EOPNOTSUPP, "RdmaDevice[" + name + "]: provider " + providerName()
                        + " carries no datagrams: a UDP port space ID (UD QPs, multicast) needs a provider that does "
                        + "(soft, shm, ucx)");
            }
            CmId id = new CmId(this, space);
            id.attachProvider();
            tracker.add(id);
            return id;
        }
    }

    /**
     * True if this device carries datagrams: {@link PortSpace#UDP} IDs, unreliable-datagram QPs,
     * address handles and, when {@link DeviceAttributes#maxMcastGroups()} is above 0, multicast.
     */
    public boolean supportsDatagrams() {
        return backend.datagrams();
    }

    /**
     * This device's datagram port as a peer addresses it ({@code ibv_query_gid} and, where the
     * provider reaches processes through ports, the port): give it to a peer, which makes an
     * {@link AddressHandle} of it and sends to this device's UD QPs by their {@link QueuePair#qpNum()}.
     *
     * @throws RdmaException {@link Errno#EOPNOTSUPP} if the device carries no datagrams; {@link Errno#EBADF}
     *                       if it is closed; on a provider that carries them over UDP (ucx, shm), whose
     *                       socket opens at the first use, {@link Errno#EADDRINUSE} if the option
     *                       {@code datagramBind}'s port is taken, {@link Errno#EADDRNOTAVAIL} if its
     *                       address is not this host's
     */
    public AhAttributes datagramAddress() {
        checkOpen("datagramAddress");
        if (!supportsDatagrams()) {
            throw new RdmaException(Errno.EOPNOTSUPP, "RdmaDevice[" + name + "]: provider " + provider
                    + " carries no datagrams");
        }
        return AhAttributes.of(backend.datagramEndpoint());
    }

    /** Asynchronous events not yet taken. */
    private final AsyncEventQueue asyncEvents = new AsyncEventQueue();

    /** How many asynchronous events the device keeps for its reader; older ones are dropped beyond it. */
    public static final int ASYNC_EVENTS_KEPT = AsyncEventQueue.KEPT;

    /** Raises an asynchronous event (from whichever thread found it; takes only the queue's monitor). */
    void raiseAsync(AsyncEvent.Type type, RdmaResource resource, String description) {
        AsyncEvent e = new AsyncEvent(type, resource, description);
        if ((type == AsyncEvent.Type.CQ_ERR || type == AsyncEvent.Type.QP_FATAL)
                && !errors.report(new RdmaException(Errno.EIO, type + ": " + description))) {
            // No handler: said once in the log (each is raised once per object), so that a CQ that
            // overran or a QP that failed is not silent for an application that reads no events.
            System.getLogger(RdmaDevice.class.getName()).log(System.Logger.Level.WARNING,
                    "regmem: RdmaDevice[" + name + "]: " + type + ": " + description);
        }
        asyncEvents.add(e);
    }

    /**
     * Takes the oldest asynchronous event without waiting ({@code ibv_get_async_event} on a
     * non-blocking async fd), or null if there is none.
     *
     * @throws RdmaException {@link Errno#EBADF} if the device is closed
     */
    public AsyncEvent pollAsyncEvent() {
        checkOpen("pollAsyncEvent");
        return asyncEvents.poll();
    }

    /**
     * Waits up to {@code timeout} for an asynchronous event ({@code ibv_get_async_event}) and takes it;
     * null if none came. Events need no acknowledgement: they hold no reference the device waits for.
     *
     * @throws RdmaException {@link Errno#EBADF} if the device is closed (also while waiting);
     *                       {@link Errno#EINTR} if the thread was interrupted (its status kept);
     *                       {@link Errno#EINVAL} for a negative timeout or a null unit
     */
    public AsyncEvent getAsyncEvent(long timeout, TimeUnit unit) {
        checkOpen("getAsyncEvent");
        if (timeout < 0 || unit == null) {
            throw new RdmaException(Errno.EINVAL, "RdmaDevice[" + name + "]: getAsyncEvent needs a timeout of at least 0 and "
                    + "a unit, got " + timeout + " " + unit);
        }
        return asyncEvents.await(System.nanoTime() + unit.toNanos(timeout), () -> checkOpen("getAsyncEvent"),
                "RdmaDevice[" + name + "]");
    }

    /** Asynchronous events dropped because {@link #ASYNC_EVENTS_KEPT} were waiting unread. */
    public long asyncEventsDropped() {
        return asyncEvents.dropped();
    }

    /** Wakes the asynchronous events' waiters (the device closes: they get EBADF). */
    private void wakeAsyncWaiters() {
        asyncEvents.wakeAll();
    }

    private void checkOpen(String op) {
        if (closed) {
            throw new RdmaException(Errno.EBADF, "RdmaDevice[" + name + "]: " + op + " after close");
        }
    }

    /**
     * Closes the device.
     *
     * @throws RdmaException {@link Errno#EBUSY} listing every live object (type, id, owner, creation
     *                       site) if any is alive; the device then stays open and usable
     */
    @Override
    public void close() {
        synchronized (lock) {
            if (closed) {
                return;
            }
            if (tracker.count() > 0) {
                throw new RdmaException(Errno.EBUSY, "RdmaDevice[" + name + "]: cannot close with " + tracker.report());
            }
            closed = true;
            OpenDevices.remove(this);
            backend.close();
        }
        wakeAsyncWaiters();
    }

    /**
     * Destroys every live object in the mandatory order (QPs, CM IDs, windows, SRQs, MRs, DMA mappings,
     * CQs, PDs), closes the
     * device and returns the report of what was destroyed ("no live objects" when nothing was).
     */
    public String forceClose() {
        synchronized (lock) {
            if (closed) {
                return "no live objects";
            }
            String report = tracker.report();
            tracker.destroyAll();
            closed = true;
            OpenDevices.remove(this);
            backend.close();
            wakeAsyncWaiters();
            return report;
        }
    }

    /** True once closed. */
    public boolean isClosed() {
        synchronized (lock) {
            return closed;
        }
    }

    @Override
    public String toString() {
        return "RdmaDevice[" + name + "]";
    }
}
