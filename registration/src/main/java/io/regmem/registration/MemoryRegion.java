package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.core.ScatterList;
import io.regmem.registration.spi.MrContext;
import io.regmem.registration.spi.ProviderMr;
import java.lang.foreign.MemorySegment;

/**
 * A memory region: memory the device may access with this region's keys and rights.
 *
 * <p>Two kinds. A <b>registered</b> region ({@link ProtectionDomain#register}) covers a fixed range
 * with fixed rights from birth to {@link #close()}. A <b>fast-reg</b> region
 * ({@link ProtectionDomain#allocMr}) is the kernel consumers' kind: it covers nothing until
 * {@link #mapSg} gives it pages and a REG_MR work request makes them valid; LOCAL_INV retires it
 * again; its key's low byte is the consumer's generation ({@link #updateFastRegKey}, {@link #incRkey}),
 * so an rkey from before a re-registration stops working.
 *
 * <p>Keys: {@link #lkey()} goes into local SGEs, {@link #rkey()} to the peer. A key resolves only
 * while it is the region's current key and the region is valid; after {@link #close()} it fails at once.
 */
public final class MemoryRegion extends RdmaResource implements AutoCloseable {
    private final ProtectionDomain pd;
    private final boolean fastReg;
    private final int slot;
    private final int maxNumSg;
    private final long pageSize;
    /** A fast-reg MR's pages and their memory (null for a registered region). */
    final PageList pageList;
    /** A registered region's memory: the device reaches it only through this segment. */
    private volatile MemorySegment segment;
    private volatile long address;
    private volatile long length;
    private volatile int access;
    private volatile int key;
    private volatile boolean valid;
    private volatile boolean revoked;
    /** From close()'s invalidation until the provider's deregister returned ({@link MrContext#isDeregistering()}). */
    volatile boolean deregistering;
    private int npages;
    private long resumeOffset;
    /** Memory windows bound to this region (under this region's monitor). */
    private int boundWindows;
    /** True for a memory window's internal view: its key is remote-only. */
    private boolean window;
    /** A type-2 window's persistent view: the window it belongs to (else null). */
    MemoryWindow windowOwner;
    /** An integrity MR's signature state (null otherwise). */
    final Integrity integrity;
    /** The provider's handle (set once the provider registered the region). */
    private ProviderMr provider;

    private MemoryRegion(ProtectionDomain pd, boolean fastReg, int maxNumSg, int maxMetaSg, long pageSize) {
        super(pd.device, maxMetaSg > 0 ? "MemoryRegion(integrity)" : fastReg ? "MemoryRegion(fast-reg)" : "MemoryRegion",
                pd.owner(), true);
        this.pd = pd;
        this.fastReg = fastReg;
        this.maxNumSg = maxNumSg;
        this.pageSize = pageSize;
        int capacity = maxNumSg + maxMetaSg;
        this.pageList = fastReg ? new PageList(capacity) : null;
        this.integrity = maxMetaSg > 0 ? new Integrity(this, maxNumSg, maxMetaSg) : null;
        KeyTable keys = pd.device.keys;
        this.slot = keys.allocate();
        this.key = keys.key(slot, keys.generation(slot));
    }

    static MemoryRegion registered(ProtectionDomain pd, MemorySegment segment, int access) {
        return over(pd, segment, access, false);
    }

    /** A registered-kind region over {@code segment}, registered with the provider, its key published. */
    private static MemoryRegion over(ProtectionDomain pd, MemorySegment segment, int access,
                                     boolean window) {
        MemoryRegion mr = new MemoryRegion(pd, false, 0, 0, 0);
        mr.window = window;
        mr.segment = segment;
        mr.address = segment.address();
        mr.length = segment.byteSize();
        mr.access = access;
        mr.valid = true;
        mr.attachProvider();
        pd.device.keys.publish(mr.slot, mr);
        return mr;
    }

    /**
     * Registers the region with the provider (before its key is published). On failure the key slot
     * is given back and the exception passes on: nothing was created.
     */
    private void attachProvider() {
        RegistrationEvents.Register event = new RegistrationEvents.Register();
        event.begin();
        try {
            provider = device.provider().registerMemory(registration);
        } catch (RuntimeException | Error e) {
            device.keys.release(slot, this);
            throw e;
        }
        RegistrationEvents.registered(event, this);
    }

    /** Ends the provider's registration (waiting for copies through it) and records how long that took. */
    private void detachProvider() {
        RegistrationEvents.Deregister event = new RegistrationEvents.Deregister();
        event.begin();
        provider.deregister();
        RegistrationEvents.deregistered(event, this);
    }

    /** What the provider is told about this region (one per region: providers compare it by identity). */
    private final RegionContext registration = new RegionContext(this);

    /** The region as its provider sees it. */
    MrContext context() {
        return registration;
    }

    /** The region behind one of its contexts (a context the verbs layer made: {@link #context()}). */
    static MemoryRegion of(MrContext context) {
        return ((RegionContext) context).region;
    }

    /** A memory window's view: a registered-kind region over a slice, not tracked and not counted. */
    static MemoryRegion window(ProtectionDomain pd, MemorySegment slice, int access) {
        return over(pd, slice, access, true);
    }

    /**
     * Retires a window view's key (no PD count or tracker entry to drop) and deregisters it with the
     * provider, which waits until no access through it is in progress.
     */
    void retireWindow() {
        valid = false;
        detachProvider();
        device.keys.release(slot, this);
    }

    boolean isWindow() {
        return window;
    }

    synchronized void windowBound(int delta) {
        boundWindows += delta;
    }

    /**
     * A window is bound to this region by a work request (an executor's thread, no device lock): true,
     * counted, unless the region is gone. Under this region's monitor, as {@link #close()}'s check.
     */
    synchronized boolean windowBoundIfAlive() {
        if (isDestroyed() || !valid) {
            return false;
        }
        boundWindows++;
        return true;
    }

    /**
     * A type-2 window's view, made once per window: unbound (its key resolves to nothing) until a
     * BIND_MW points it at a range ({@link #rebindView}); its slot and key index stay for the window's life.
     */
    static MemoryRegion windowView(ProtectionDomain pd, MemoryWindow owner) {
        MemoryRegion mr = new MemoryRegion(pd, false, 0, 0, 0);
        mr.window = true;
        mr.windowOwner = owner;
        mr.segment = MemorySegment.NULL;
        mr.valid = false;
        mr.attachProvider();
        pd.device.keys.publish(mr.slot, mr);
        return mr;
    }

    /** Points an unbound type-2 window view at {@code slice} with {@code accessMask} under {@code newKey}; valid last. */
    void rebindView(MemorySegment slice, int accessMask, int newKey) {
        this.segment = slice;
        this.address = slice.address();
        this.length = slice.byteSize();
        this.access = accessMask;
        this.key = newKey;
        this.valid = true; // (a volatile store after the fields: a lookup that sees it valid sees them)
    }

    static MemoryRegion fastReg(ProtectionDomain pd, int maxNumSg, long pageSize) {
        return integrity(pd, maxNumSg, 0, pageSize);
    }

    /** A fast-reg MR with {@code maxMetaSg} protection pages: an integrity MR if that is positive. */
    static MemoryRegion integrity(ProtectionDomain pd, int maxDataSg, int maxMetaSg, long pageSize) {
        MemoryRegion mr = new MemoryRegion(pd, true, maxDataSg, maxMetaSg, pageSize);
        mr.attachProvider();
        pd.device.keys.publish(mr.slot, mr);
        return mr;
    }

    /** True for an integrity (signature) MR ({@link ProtectionDomain#allocMrIntegrity}). */
    public boolean isIntegrity() {
        return integrity != null;
    }

    /**
     * Maps data and protection-information lists into an integrity MR ({@code ib_map_mr_sg_pi}):
     * the data pages first, then the protection pages; every element of both lists must map.
     * Afterwards {@link #address()} and {@link #length()} describe the data, and the signature
     * attributes decide what a transfer through this MR puts on the wire.
     *
     * @param prot      the separate protection-information list (memory domain T10-DIF), or null
     * @param protCount its elements (0 without one)
     * @throws RdmaException {@link Errno#EINVAL} for a non-integrity MR, counts out of range, or a list
     *                       that does not map completely (unaligned interior elements, too many pages)
     */
    public void mapSgPi(ScatterList data, int dataCount, ScatterList prot, int protCount, SignatureAttrs attrs,
                        long pageSz) {
        checkAlive("mapSgPi");
        if (integrity == null) {
            throw new RdmaException(Errno.EINVAL, this + ": mapSgPi needs an integrity MR (ProtectionDomain.allocMrIntegrity)");
        }
        integrity.map(data, dataCount, prot, protCount, attrs, pageSz);
    }

    /** Sets the mapping after {@link Integrity#map}: the data's iova and length, all pages used. */
    void commitIntegrityMapping(long iova, long dataBytes, int pagesUsed) {
        commitMapping(iova, dataBytes, pagesUsed, 0);
    }

    /**
     * The first signature error found by transfers through this integrity MR since its last
     * registration or the last call ({@code ib_check_mr_status} with {@code IB_MR_CHECK_SIG_STATUS}),
     * or null if every checked block was intact. Reading it clears it.
     *
     * @throws RdmaException {@link Errno#EINVAL} for a non-integrity MR
     */
    public SignatureError checkSignatureStatus() {
        if (integrity == null) {
            throw new RdmaException(Errno.EINVAL, this + ": only an integrity MR has a signature status");
        }
        return integrity.takeError();
    }

    /** The key for local SGEs. */
    public int lkey() {
        return key;
    }

    /** The key a peer uses for RDMA READ/WRITE into this region (on soft; see {@link #exportRemoteKey()}). */
    public int rkey() {
        return key;
    }

    /**
     * The remote key in the form any provider can carry to a peer (libfabric's raw key): the peer
     * passes these bytes to {@link QueuePair#importRemoteKey(byte[])} on its QP and uses the result
     * as the rkey of its work requests. On soft the bytes are the 32-bit {@link #rkey()}, big-endian,
     * and importing gives the rkey back; on a transport with packed keys (UCX) they are the packed
     * key, tens to hundreds of bytes. Send them once per registration (a fast-reg MR: once per
     * REG_MR, since its key changes), not with every request.
     *
     * @throws RdmaException {@link Errno#EBADF} if the region was deregistered
     */
    public byte[] exportRemoteKey() {
        checkAlive("exportRemoteKey");
        return RemoteKeys.export(provider, key);
    }

    /** Bytes {@link #exportRemoteKey()} gives now (soft: 4). */
    public int exportedKeySize() {
        checkAlive("exportedKeySize");
        return provider.exportedKeySize(key);
    }

    /**
     * Writes the exported remote key into the start of {@code to} without allocating, for a key
     * that travels inside a message (a per-call fast-reg key).
     *
     * @return the bytes written ({@link #exportedKeySize()})
     * @throws RdmaException {@link Errno#EINVAL} if {@code to} is too small (nothing is written);
     *                       {@link Errno#EBADF} if the region was deregistered
     */
    public int exportRemoteKey(MemorySegment to) {
        return exportRemoteKey(key, to);
    }

    /**
     * Writes the exported form of {@code rkey}, a key of this region, into the start of {@code to}:
     * its current key, or, for a fast-reg MR, the key a REG_MR posted with it will give the region
     * ({@link #incRkey}), so the key can travel in the same message chain as the registration.
     *
     * @return the bytes written
     * @throws RdmaException {@link Errno#EINVAL} for a key of another region or a target too small
     *                       (nothing is written); {@link Errno#EBADF} if the region was deregistered
     */
    public int exportRemoteKey(int rkey, MemorySegment to) {
        checkAlive("exportRemoteKey");
        return RemoteKeys.export(this, provider, key, fastReg, rkey, to);
    }

    /** The first address covered (a fast-reg MR's iova after {@link #mapSg}). */
    public long address() {
        return address;
    }

    /** Bytes covered. */
    public long length() {
        return length;
    }

    /** The granted rights, as {@link Access} bits. */
    public int access() {
        return access;
    }

    /** The protection domain this region belongs to. */
    public ProtectionDomain pd() {
        return pd;
    }

    /** True for a fast-registration MR. */
    public boolean isFastReg() {
        return fastReg;
    }

    /** True while the keys resolve: registered and not closed, or fast-reg and registered by REG_MR. */
    public boolean isValid() {
        return valid && !revoked && !isDestroyed();
    }

    /** Pages a fast-reg MR can map (0 for a registered region). */
    public int maxNumSg() {
        return maxNumSg;
    }

    /** Pages mapped by the last {@link #mapSg}. */
    public int pageCount() {
        return npages;
    }

    /** The address of mapped page {@code i}. */
    public long page(int i) {
        if (i < 0 || i >= npages) {
            throw new RdmaException(Errno.EINVAL, this + ": page " + i + " is not in [0, " + npages + ")");
        }
        return pageList.pages[i];
    }

    /**
     * The offset into the first unmapped element where mapping stopped for lack of pages, as the
     * kernel writes back through {@code sg_offset_p}; 0 when the last call mapped everything it took.
     */
    public long resumeOffset() {
        return resumeOffset;
    }

    /**
     * Maps the longest acceptable prefix of a scatter list into this fast-reg MR's page list
     * ({@code ib_map_mr_sg}). Only element 0 may start at an offset; a later element must start on a
     * page boundary and its predecessor end on one, unless the two are contiguous (then they merge);
     * a gap stops mapping; the last element may end short. When the page list is full, mapping stops
     * and {@link #resumeOffset()} says where to go on. Sets {@link #address()} (iova = first address
     * + offset) and {@link #length()} (bytes covered).
     *
     * @param sg     the list
     * @param count  elements to consider, from the start
     * @param offset bytes to skip in element 0
     * @param pageSz the page size, a power of two (usually the device's)
     * @return the number of elements mapped completely
     * @throws RdmaException {@link Errno#EINVAL} for a registered region, count out of range, an
     *                       offset past element 0, or a bad page size
     */
    public int mapSg(ScatterList sg, int count, long offset, long pageSz) {
        return mapSg(sg, 0, count, offset, pageSz);
    }

    /**
     * {@link #mapSg(ScatterList, int, long, long)} over the elements {@code [first, first + count)}
     * of {@code sg}: element {@code first} plays the part of element 0.
     */
    public int mapSg(ScatterList sg, int first, int count, long offset, long pageSz) {
        checkAlive("mapSg");
        PageList.checkMapSg(this, fastReg, sg, first, count, offset, pageSz);
        int i = pageList.map(sg, first, count, offset, pageSz, 0, maxNumSg);
        commitMapping(pageList.iova, pageList.bytes, pageList.end, pageList.resume);
        return i;
    }

    private void commitMapping(long iova, long mapped, int n, long resume) {
        this.npages = n;
        this.address = iova;
        this.length = mapped;
        this.resumeOffset = resume;
    }

    /**
     * Replaces the low byte of both keys of a fast-reg MR ({@code ib_update_fast_reg_key}): the
     * previous key stops resolving at once.
     *
     * @param keyByte the new generation, 0..255
     * @throws RdmaException {@link Errno#EINVAL} for a registered region or a byte out of range
     */
    public void updateFastRegKey(int keyByte) {
        checkAlive("updateFastRegKey");
        if (!fastReg || keyByte < 0 || keyByte > 0xFF) {
            throw new RdmaException(Errno.EINVAL, this + ": updateFastRegKey(" + keyByte
                    + ") needs a fast-reg MR and a byte in [0, 255]");
        }
        key = (key & 0xFFFFFF00) | keyByte;
    }

    /** {@code ib_inc_rkey}: the next generation of a key, the upper 24 bits unchanged. */
    public static int incRkey(int rkey) {
        return (rkey & 0xFFFFFF00) | ((rkey + 1) & 0xFF);
    }

    /** Makes a fast-reg MR's mapping valid with the given rights (the effect of a REG_MR WR). */
    void activate(int accessMask) {
        this.access = accessMask;
        this.valid = true;
    }

    /** Sets the current key (REG_MR carries the whole key; only its low byte may differ). */
    void key(int newKey) {
        this.key = newKey;
    }

    /** The registered region's segment (null for fast-reg). */
    MemorySegment segment() {
        return segment;
    }

    long pageSize() {
        return pageSize;
    }

    /**
     * Retires a fast-reg MR's mapping (the effect of LOCAL_INV or a remote invalidate); the provider
     * then waits until no copy through it is in progress ({@link io.regmem.registration.spi.ProviderDevice#quiesce()}).
     */
    void invalidate() {
        this.valid = false;
    }

    /**
     * Stops every key of this region at once, for every peer, without deregistering it: what a
     * registration cache does when the memory under a region goes away while users still hold the
     * region. The region stays allocated (and counted) until {@link #close()}; it never works again.
     * When this returns, no copy through the region is in progress and none will start: the memory
     * may be freed or handed to a new owner at once. Waits at most for the copy pieces in progress
     * (at most 1 MiB each on the soft provider).
     *
     * @throws RdmaException {@link Errno#EBADF} if the region was deregistered
     */
    public void revoke() {
        synchronized (device.lock) {
            checkAlive("revoke");
            revoked = true;
        }
        device.provider().quiesce();
    }

    /** True once {@link #revoke()} was called. */
    public boolean isRevoked() {
        return revoked;
    }

    /**
     * Deregisters the region ({@code ib_dereg_mr}): its keys stop resolving, and when this returns
     * no copy through the region is in progress and none will start, so the memory may be freed or
     * handed to a new owner at once (the wait is at most the copy pieces in progress: at most 1 MiB
     * each on the soft provider). The PD's count drops.
     *
     * @throws RdmaException {@link Errno#EBUSY} while memory windows are bound to it (nothing
     *                       changes); {@link Errno#EBADF} if already closed
     */
    @Override
    public void close() {
        synchronized (device.lock) {
            checkAlive("close");
            synchronized (this) { // (a BIND_MW's windowBoundIfAlive runs under it, without the device lock)
                if (boundWindows > 0) {
                    throw new RdmaException(Errno.EBUSY, this + ": cannot deregister with " + boundWindows
                            + " memory window(s) bound; unbind or invalidate them first");
                }
                deregistering = !revoked;
                valid = false;
                markDestroyed();
            }
            pd.release();
        }
        // The provider waits out the copies that checked the region before it went invalid, and the
        // answers of requests started before that it places here; then its key slot is freed for
        // reuse (a reader that resolved the key holds this object, whose check fails).
        try {
            detachProvider();
        } finally {
            deregistering = false;
        }
        device.keys.release(slot, this);
    }
}
