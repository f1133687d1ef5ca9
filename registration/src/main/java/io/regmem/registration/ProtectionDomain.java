package io.regmem.registration;

import io.regmem.core.BufferPool;
import io.regmem.core.Errno;
import io.regmem.core.PooledBuffer;
import io.regmem.core.RdmaException;
import io.regmem.registration.internal.CacheStatsBridge;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Supplier;

/**
 * A protection domain ({@code ib_alloc_pd}): the scope in which memory regions and queue pairs may
 * be used together. It counts its children ({@link #useCount()}: live MRs, memory windows, SRQs,
 * address handles and QPs);
 * closing it while any is alive fails with {@link Errno#EBUSY} and leaves it usable.
 */
public final class ProtectionDomain extends CountedResource implements AutoCloseable {

    /** The live registration caches over this PD, and what closed ones counted. */
    private final CopyOnWriteArrayList<Supplier<CacheStats>> caches =
            new CopyOnWriteArrayList<>();
    private CacheStats retiredCacheStats = CacheStats.ZERO;

    ProtectionDomain(RdmaDevice device) {
        super(device, "ProtectionDomain", null);
    }

    /**
     * The registration caches' counters for this PD: the sum over every cache built over it
     * (gets, hits, misses, merges, evictions and invalidations since each was built, closed ones
     * included; regions and bytes indexed now, by the open ones). All zero when no cache was built.
     */
    public CacheStats cacheStats() {
        CacheStats sum;
        synchronized (caches) {
            sum = retiredCacheStats;
        }
        for (Supplier<CacheStats> c : caches) {
            sum = sum.plus(c.get());
        }
        return sum;
    }

    static {
        CacheStatsBridge.install((pd, stats) -> ((ProtectionDomain) pd).attachCacheStats(stats),
                pd -> ((ProtectionDomain) pd).device.name());
    }

    /**
     * Attaches a registration cache's counters to {@link #cacheStats()}: a {@code RegistrationCache}
     * does so through {@link CacheStatsBridge} when it is built. Running the returned action (the
     * cache does so when it closes) detaches it, keeping its counters in the totals.
     */
    private Runnable attachCacheStats(Supplier<CacheStats> stats) {
        caches.add(stats);
        return () -> {
            synchronized (caches) {
                if (caches.remove(stats)) {
                    retiredCacheStats = retiredCacheStats.plus(stats.get().retired());
                }
            }
        };
    }

    /**
     * The device-global local DMA key: SGEs over memory that is only DMA-mapped (not registered)
     * use it. Grants local read and write on any memory, never remote access.
     */
    public int localDmaLkey() {
        checkAlive("localDmaLkey");
        return device.keys.dmaKey();
    }

    /**
     * Registers native memory ({@code ib_reg_mr}). The device reaches the memory only through this
     * segment: once its scope ends (its arena or pool closed), accesses fail as protection errors
     * instead of touching freed memory. The device's data path runs on other threads than the
     * caller's, so the memory must be accessible from any thread: a confined arena's memory is refused.
     *
     * @param segment native memory of a shared, automatic or global scope
     * @param access  the rights to grant; REMOTE_WRITE and REMOTE_ATOMIC need LOCAL_WRITE
     * @return a region owned by the caller, who closes it
     * @throws RdmaException {@link Errno#EINVAL} for a heap or empty segment, memory of a confined
     *                       arena or of a closed one, bad access bits, a range over the device's
     *                       {@code maxMrSize}; {@link Errno#EOPNOTSUPP} for ON_DEMAND on a device
     *                       without on-demand paging (every provider today), as the kernel answers;
     *                       {@link Errno#EBADF} if this PD was closed
     */
    public MemoryRegion register(MemorySegment segment, Access... access) {
        return register(segment, Access.mask(access));
    }

    /**
     * Registers the whole capacity of a pooled buffer; the region lives no longer than the pool.
     *
     * @see #register(MemorySegment, Access...)
     */
    public MemoryRegion register(PooledBuffer buffer, Access... access) {
        return register(buffer.segment(), Access.mask(access));
    }

    /**
     * Registers a whole pool: each of its chunks, present and future, once, at birth; see
     * {@link PoolRegistration}. Buffers of the pool then know their keys without a lookup.
     *
     * @throws RdmaException {@link Errno#EINVAL} for bad access bits; {@link Errno#EBUSY} if the pool is
     *                       registered already; {@link Errno#EBADF} if the pool or this PD is closed
     */
    public PoolRegistration register(BufferPool pool, Access... access) {
        checkAlive("register");
        return PoolRegistration.register(this, pool, Access.mask(access));
    }

    /**
     * Registers native memory with rights given as {@link Access} bits.
     *
     * @see #register(MemorySegment, Access...)
     */
    public MemoryRegion register(MemorySegment segment, int accessMask) {
        synchronized (device.lock) {
            checkAlive("register");
            if (!segment.isNative() || segment.byteSize() == 0) {
                throw new RdmaException(Errno.EINVAL, this + ": cannot register " + segment
                        + ": only non-empty native memory has a stable address");
            }
            Reach.check(segment, toString(), "register");
            Access.validate(accessMask, this + ".register");
            if (Access.has(accessMask, Access.ON_DEMAND)) {
                throw new RdmaException(Errno.EOPNOTSUPP, this + ": ON_DEMAND registration needs device ODP support, "
                        + device.name() + " has none");
            }
            if (segment.byteSize() > device.attributes().maxMrSize()) {
                throw new RdmaException(Errno.EINVAL, this + ": " + segment.byteSize() + " bytes exceed maxMrSize "
                        + device.attributes().maxMrSize());
            }
            MemoryRegion mr = MemoryRegion.registered(this, segment, accessMask);
            retain();
            device.tracker.add(mr);
            return mr;
        }
    }

    /**
     * Allocates a fast-registration MR ({@code ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, maxNumSg)}): it maps
     * nothing until {@link MemoryRegion#mapSg} and a REG_MR work request give it pages.
     *
     * @param maxNumSg pages it can map, in [1, maxFastRegPageListLen]
     * @throws RdmaException {@link Errno#EINVAL} for a count out of range
     */
    public MemoryRegion allocMr(int maxNumSg) {
        synchronized (device.lock) {
            checkAlive("allocMr");
            int limit = device.attributes().maxFastRegPageListLen();
            if (maxNumSg < 1 || maxNumSg > limit) {
                throw new RdmaException(Errno.EINVAL, this + ": allocMr(" + maxNumSg + ") is not in [1, "
                        + "maxFastRegPageListLen=" + limit + "]");
            }
            MemoryRegion mr = MemoryRegion.fastReg(this, maxNumSg, device.attributes().pageSize());
            retain();
            device.tracker.add(mr);
            return mr;
        }
    }

    /**
     * Allocates an integrity MR ({@code ib_alloc_mr_integrity}): a fast-reg MR for T10-PI signature
     * offload, mapping up to {@code maxDataSg} data pages and {@code maxMetaSg} protection pages
     * ({@link MemoryRegion#mapSgPi}), registered with REG_MR_INTEGRITY.
     *
     * @throws RdmaException {@link Errno#EINVAL} for page counts outside [1, maxFastRegPageListLen];
     *                       {@link Errno#EOPNOTSUPP} on a device without
     *                       {@link DeviceAttributes#integrityHandover()}
     */
    public MemoryRegion allocMrIntegrity(int maxDataSg, int maxMetaSg) {
        synchronized (device.lock) {
            checkAlive("allocMrIntegrity");
            if (!device.attributes().integrityHandover()) {
                throw new RdmaException(Errno.EOPNOTSUPP, this + ": allocMrIntegrity on device " + device.name()
                        + ", which has no signature offload (DeviceAttributes.integrityHandover is false)");
            }
            int limit = device.attributes().maxFastRegPageListLen();
            if (maxDataSg < 1 || maxDataSg > limit || maxMetaSg < 1 || maxMetaSg > limit) {
                throw new RdmaException(Errno.EINVAL, this + ": allocMrIntegrity(" + maxDataSg + ", " + maxMetaSg
                        + ") is not in [1, maxFastRegPageListLen=" + limit + "]");
            }
            MemoryRegion mr = MemoryRegion.integrity(this, maxDataSg, maxMetaSg, device.attributes().pageSize());
            retain();
            device.tracker.add(mr);
            return mr;
        }
    }

    /**
     * Allocates a memory window ({@code ibv_alloc_mw}); bind it to a region that grants
     * {@link Access#MW_BIND}. Counted as a child of this PD.
     */
    public MemoryWindow allocMw() {
        return allocMw(MemoryWindow.Type.TYPE_1);
    }

    /**
     * Allocates a memory window of {@code type} ({@code ibv_alloc_mw}): type 1 is bound by
     * {@link MemoryWindow#bind}, type 2 by a BIND_MW work request ({@link WorkRequest#bindMw}).
     *
     * @throws RdmaException {@link Errno#EINVAL} for a null type
     */
    public MemoryWindow allocMw(MemoryWindow.Type type) {
        if (type == null) {
            throw new RdmaException(Errno.EINVAL, this + ": allocMw needs a window type (TYPE_1 or TYPE_2)");
        }
        synchronized (device.lock) {
            checkAlive("allocMw");
            MemoryWindow mw = new MemoryWindow(this, type);
            retain();
            device.tracker.add(mw);
            return mw;
        }
    }

    /**
     * Creates a shared receive queue ({@code ibv_create_srq}) for QPs of this PD
     * ({@link QpInitAttributes#srq}).
     *
     * @param maxWr  receive slots, in [1, device maxQpWr]
     * @param maxSge SGEs per receive, in [1, device maxRecvSge]
     * @throws RdmaException {@link Errno#EINVAL} for a size out of range; {@link Errno#EBADF} if the PD
     *                       was deallocated
     */
    public SharedReceiveQueue createSrq(int maxWr, int maxSge) {
        synchronized (device.lock) {
            checkAlive("createSrq");
            DeviceAttributes a = device.attributes();
            if (maxWr < 1 || maxWr > a.maxQpWr() || maxSge < 1 || maxSge > a.maxRecvSge()) {
                throw new RdmaException(Errno.EINVAL, this + ": createSrq(maxWr " + maxWr + ", maxSge " + maxSge
                        + ") is outside [1, maxQpWr=" + a.maxQpWr() + "] x [1, maxRecvSge=" + a.maxRecvSge() + "]");
            }
            SharedReceiveQueue srq = new SharedReceiveQueue(this, maxWr, maxSge);
            retain();
            device.tracker.add(srq);
            return srq;
        }
    }

    /**
     * Creates an address handle ({@code ibv_create_ah}) for unreliable-datagram sends of this PD's
     * QPs. Counted as a child of this PD.
     *
     * @throws RdmaException {@link Errno#EINVAL} for null attributes; {@link Errno#EOPNOTSUPP} on a
     *                       device that carries no datagrams; {@link Errno#EBADF} if the PD was deallocated
     */
    public AddressHandle createAh(AhAttributes attributes) {
        if (attributes == null) {
            throw new RdmaException(Errno.EINVAL, this + ": createAh needs attributes, got null");
        }
        synchronized (device.lock) {
            checkAlive("createAh");
            if (!device.supportsDatagrams()) {
                throw new RdmaException(Errno.EOPNOTSUPP, this + ": createAh on device " + device.name() + ", whose provider "
                        + device.providerName() + " carries no datagrams");
            }
            AddressHandle ah = new AddressHandle(this, attributes);
            retain();
            device.tracker.add(ah);
            return ah;
        }
    }

    /**
     * Creates an address handle that answers the sender of a received datagram
     * ({@code ibv_create_ah_from_wc}): from its completion's {@link WorkCompletion#source()}.
     *
     * @throws RdmaException {@link Errno#EINVAL} for a completion that is not a successful receive of an
     *                       unreliable-datagram QP (it carries no GRH); else as {@link #createAh}
     */
    public AddressHandle createAhFromWc(WorkCompletion wc) {
        if (wc == null || !wc.withGrh() || wc.source() == null) {
            throw new RdmaException(Errno.EINVAL, this + ": createAhFromWc needs the completion of a datagram received "
                    + "by a UD QP (one with a GRH), got " + wc);
        }
        return createAh(wc.source());
    }

    /**
     * Deallocates the PD ({@code ib_dealloc_pd}).
     *
     * @throws RdmaException {@link Errno#EBUSY} naming the count while MRs or QPs are alive (the PD stays
     *                       usable); {@link Errno#EBADF} if already closed
     */
    @Override
    public void close() {
        synchronized (device.lock) {
            destroyUnlessCounted("deallocate", "live memory region(s), window(s), shared receive queue(s), address handle(s) and queue pair(s)", "destroy them first");
        }
    }
}
