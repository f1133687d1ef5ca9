package io.regmem.registration.fuzz;

import io.regmem.core.BufferPool;
import io.regmem.core.Errno;
import io.regmem.core.PooledBuffer;
import io.regmem.core.RdmaException;
import io.regmem.registration.Access;
import io.regmem.registration.CmId;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.MemoryWindow;
import io.regmem.registration.Opcode;
import io.regmem.registration.PoolRegistration;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.SharedReceiveQueue;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import io.regmem.registration.cache.CachedRegion;
import io.regmem.registration.cache.RegistrationCache;
import io.regmem.registration.testkit.Providers;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.function.Supplier;

/**
 * The single-threaded API fuzz: random sequences of public-API operations with good and bad input
 * (registrations and deregistrations, cache gets, puts and invalidations, pool allocations and
 * frees, RDMA WRITE, WRITE_WITH_IMM, READ and SEND with valid, stale, foreign and forged keys,
 * offsets and lengths, receives, polls, memory freed under its registrations, closes in the wrong
 * order and twice, reconnections; memory windows of both types at B, bound by call or by BIND_MW,
 * invalidated by call, LOCAL_INV or A's SEND_WITH_INV, their keys live and stale in A's requests;
 * a shared receive queue at B that one connection in three takes its receives from, whose receives
 * outlive the connections),
 * each checked against a model of every byte of every buffer and
 * of every object's state: completion statuses and ids, exception types and {@link Errno}s, and
 * bytes must all equal the model's. Written against the public API only and provider-neutral (the
 * provider comes from {@code -Dregmem.provider}; completions are awaited by polling, so an
 * asynchronous provider fits too).
 *
 * <p>Side A posts, side B receives and is the RDMA target. The model follows what a NIC checks, in
 * its order: the QP's state; each local SGE (a key that names a live, valid region of the QP's PD
 * on this device, the range inside it, LOCAL_WRITE where written, memory alive); the peer; the
 * remote key (the same, with the remote right); a receive at the peer and its SGEs and size.
 */
final class ModelFuzz implements AutoCloseable {
    private static final int MEM = 64 << 10;
    private static final int MEMS = 4;
    private static final int QUEUE = 8;
    private static final int SGES = 3;

    final long seed;
    private final SplittableRandom rnd;
    private final String provider;
    private final List<String> history = new ArrayList<>();
    private int op;

    // ---- the world -------------------------------------------------------------------------------
    private final RdmaDevice devA;
    private final RdmaDevice devB;
    private final ProtectionDomain pdA;
    private final ProtectionDomain pdB;
    /** A second PD per side, for foreign keys; closed and made again now and then. */
    private ProtectionDomain pdA2;
    private ProtectionDomain pdB2;
    private final CompletionQueue cqA;
    private final CompletionQueue cqB;
    private final CmId listener;
    private CmId idA;
    private CmId idB;
    private QueuePair qpA;
    private QueuePair qpB;
    private int connections;
    private final RegistrationCache cache;
    private final BufferPool pool;
    private final PoolRegistration poolReg;
    private final Arena confined = Arena.ofConfined();
    private final WorkCompletion[] wcs = new WorkCompletion[32];
    private long nextWrId = 1;

    // ---- the model -------------------------------------------------------------------------------
    /** A buffer of native memory with its shadow: every byte the model says it holds. */
    static final class Mem {
        final String name;
        final boolean sideA;
        final Arena arena;
        final MemorySegment seg;
        final byte[] shadow;
        boolean alive = true;

        Mem(String name, boolean sideA, Arena arena, MemorySegment seg) {
            this.name = name;
            this.sideA = sideA;
            this.arena = arena;
            this.seg = seg;
            this.shadow = seg.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
        }

        long address() {
            return seg.address();
        }
    }

    /** A registration the model knows: explicit, a cache region, or a pool chunk's. */
    static final class Reg {
        final MemoryRegion mr;
        final boolean sideA;
        final ProtectionDomain pd;
        final Mem mem;
        final long address;
        final long length;
        final int access;
        boolean closed;

        /** The bound window this stands for (its view of the parent's memory), or null for a region. */
        final Win win;

        Reg(MemoryRegion mr, boolean sideA, ProtectionDomain pd, Mem mem, long address, long length, int access) {
            this(mr, sideA, pd, mem, address, length, access, null);
        }

        Reg(MemoryRegion mr, boolean sideA, ProtectionDomain pd, Mem mem, long address, long length, int access, Win win) {
            this.mr = mr;
            this.sideA = sideA;
            this.pd = pd;
            this.mem = mem;
            this.address = address;
            this.length = length;
            this.access = access;
            this.win = win;
        }

        int key() {
            return win != null ? win.key : mr.lkey();
        }
    }

    /** A memory window at B the model knows: its type, and while bound, its parent region, range, rights and key. */
    static final class Win {
        final MemoryWindow mw;
        final MemoryWindow.Type type;
        boolean bound;
        Reg parent;
        long address;
        long length;
        int access;
        int key;
        /** Identity of the current binding (a key's import is per binding). */
        Object binding;
        boolean closed;

        Win(MemoryWindow mw) {
            this.mw = mw;
            this.type = mw.windowType();
        }

        Reg asReg(ProtectionDomain pd) {
            return new Reg(null, false, pd, parent.mem, address, length, access, this);
        }
    }

    /** A held cache acquisition. */
    record Held(CachedRegion handle, Mem mem) {
    }

    /** A pool buffer, its memory and whether it is still allocated. */
    static final class PBuf {
        final PooledBuffer buffer;
        final int generation;
        final Mem mem;
        boolean live = true;

        PBuf(PooledBuffer buffer, Mem mem) {
            this.buffer = buffer;
            this.generation = buffer.generation();
            this.mem = mem;
        }
    }

    /** One SGE as posted: address, length, key. */
    record Sge(long address, long length, int key) {
    }

    /** A receive posted at B. */
    record Recv(long wrId, List<Sge> sges) {
    }

    private final List<Mem> memA = new ArrayList<>();
    private final List<Mem> memB = new ArrayList<>();
    private final List<Reg> regs = new ArrayList<>();
    private final List<Reg> closedRegs = new ArrayList<>();
    private final List<Win> wins = new ArrayList<>();
    /** {address, key} of window bindings that ended: stale keys to try. */
    private final List<long[]> staleWindowKeys = new ArrayList<>();
    private final List<Held> held = new ArrayList<>();
    /** Acquisitions given back: their regions may still be cached (valid) or evicted; the region says which. */
    private final List<Held> released = new ArrayList<>();
    /** Cache regions whose keys were revoked by an invalidation (by identity). */
    private final Set<MemoryRegion> revoked = Collections.newSetFromMap(new IdentityHashMap<>());
    private final List<PBuf> pbufs = new ArrayList<>();
    /** Receives posted to B's QP (flushed when it breaks). */
    private final ArrayDeque<Recv> recvsAtQp = new ArrayDeque<>();
    /** Receives posted to B's shared receive queue: they outlive B's QPs (a broken QP flushes none of them). */
    private final ArrayDeque<Recv> recvsInSrq = new ArrayDeque<>();
    /** B's shared receive queue, used by the connections made with {@link #useSrq}. */
    private final SharedReceiveQueue srqB;
    /** B's QP of this connection takes its receives from {@link #srqB}. */
    private boolean useSrq;
    private boolean aError;
    /** Requests are being posted back to back ({@link #postPipeline}): the completions are awaited after the last. */
    private boolean pipelining;
    private boolean bError;
    /** Completions the model expects on each CQ, in order: {wrId, status, opcode, byteLen or -1}. */
    private final List<long[]> expectA = new ArrayList<>();
    private final List<long[]> expectB = new ArrayList<>();
    /** An expected receive completion's fifth element when it carries no immediate. */
    private static final long NO_IMM = Long.MIN_VALUE;
    private final Map<String, Integer> counts = new java.util.TreeMap<>();
    /** Completion statuses the model predicted, by opcode. */
    private final Map<String, Integer> outcomes = new java.util.TreeMap<>();

    ModelFuzz(long seed, String provider) {
        this.seed = seed;
        this.rnd = new SplittableRandom(seed);
        this.provider = provider;
        for (int i = 0; i < wcs.length; i++) {
            wcs[i] = new WorkCompletion();
        }
        devA = RdmaDevice.open(provider, Providers.defaults(provider));
        devB = RdmaDevice.open(provider, Providers.defaults(provider));
        pdA = devA.allocPd();
        pdB = devB.allocPd();
        pdA2 = devA.allocPd();
        pdB2 = devB.allocPd();
        cqA = devA.createCq(64);
        cqB = devB.createCq(64);
        srqB = pdB.createSrq(QUEUE, SGES);
        listener = devB.createCmId();
        listenName = Providers.address(provider, "fuzz-" + seed + "-" + System.nanoTime());
        listener.listen(listenName);
        connect();
        cache = RegistrationCache.builder(pdB).maxRegions(16).build();
        pool = BufferPool.builder().name("fuzz-" + seed).build();
        poolReg = pdA.register(pool, Access.LOCAL_WRITE, Access.REMOTE_READ, Access.REMOTE_WRITE);
        for (int i = 0; i < MEMS; i++) {
            memA.add(newMem("A" + i, true));
            memB.add(newMem("B" + i, false));
        }
    }

    private Mem newMem(String name, boolean sideA) {
        Arena arena = Arena.ofShared();
        MemorySegment seg = arena.allocate(MEM, 4096);
        for (int i = 0; i < MEM; i += 8) {
            seg.set(java.lang.foreign.ValueLayout.JAVA_LONG, i, rnd.nextLong());
        }
        return new Mem(name, sideA, arena, seg);
    }

    private void connect() {
        String name = listenName;
        idA = devA.createCmId();
        qpA = idA.createQp(pdA, attrs(cqA));
        imported.clear(); // keys are imported per QP: the new one imports them again
        idA.connect(name);
        idB = listener.getRequest();
        useSrq = rnd.nextInt(3) == 0;
        qpB = idB.createQp(pdB, useSrq ? attrs(cqB).srq(srqB) : attrs(cqB));
        idB.accept();
        aError = false;
        bError = false;
        connections++;
    }

    private final String listenName;

    private static QpInitAttributes attrs(CompletionQueue cq) {
        return new QpInitAttributes().sendCq(cq).recvCq(cq).maxSendWr(QUEUE).maxRecvWr(QUEUE).maxSendSge(SGES)
                .maxRecvSge(SGES).signalAll(true);
    }

    // ---- the run ---------------------------------------------------------------------------------

    /** Runs {@code n} random operations, checking each against the model. */
    void run(int n) {
        for (op = 0; op < n; op++) {
            if ((aError || bError) && rnd.nextInt(4) != 0) {
                reconnect(); // most of the time, a broken connection is made again at once
                continue;
            }
            int k = rnd.nextInt(100);
            // Bounded populations: a long run stays as fast per operation as a short one.
            if (k < 10 && regs.size() >= 40) {
                k = 10; // deregister instead
            } else if (k >= 16 && k < 22 && held.size() >= 24) {
                k = 22; // put instead
            } else if (k >= 30 && k < 34 && livePoolBuffers() >= 24) {
                k = 34; // free instead
            }
            if (k < 10) {
                register();
            } else if (k < 16) {
                deregister();
            } else if (k < 22) {
                cacheGet();
            } else if (k < 27) {
                cachePut();
            } else if (k < 30) {
                cacheInvalidate();
            } else if (k < 34) {
                poolAlloc();
            } else if (k < 37) {
                poolFree();
            } else if (k < 52) {
                if (rnd.nextInt(5) == 0) {
                    postAtomic();
                } else {
                    postOneSided(rnd.nextInt(3) == 0 ? Opcode.RDMA_READ : rnd.nextInt(4) == 0 ? Opcode.RDMA_WRITE_WITH_IMM
                            : Opcode.RDMA_WRITE);
                }
            } else if (k < 57) {
                postPipeline();
            } else if (k < 62) {
                postRecv();
            } else if (k < 72) {
                postSend();
            } else if (k < 76) {
                badPost();
            } else if (k < 80) {
                wrongOrderCloses();
            } else if (k < 82) {
                killMemory();
            } else if (k < 84) {
                reconnect();
            } else if (k < 90) {
                windowOp();
            } else {
                checkBytes();
            }
        }
        checkBytes();
    }

    private void note(String what) {
        counts.merge(what.split("[ (]")[0], 1, Integer::sum);
        history.add(op + ": " + what);
        if (history.size() > 40) {
            history.removeFirst();
        }
    }

    private AssertionError mismatch(String what) {
        return new AssertionError("fuzz (seed " + seed + ", replay with -Dregmem.fuzz.seed=" + seed + ", op " + op
                + "): " + what + "\nlast operations:\n  " + String.join("\n  ", history));
    }

    /** Runs {@code call}, which the model says must fail with {@code errno}. */
    private void expectFailure(Errno errno, String what, Runnable call) {
        try {
            call.run();
        } catch (RdmaException e) {
            if (e.errno() != errno) {
                throw mismatch(what + ": expected " + errno + ", got " + e.errno() + " (" + e.getMessage() + ")");
            }
            return;
        } catch (RuntimeException e) {
            throw mismatch(what + ": expected RdmaException " + errno + ", got " + e);
        }
        throw mismatch(what + ": expected " + errno + ", but it succeeded");
    }

    private <T> T expectSuccess(String what, Supplier<T> call) {
        try {
            return call.get();
        } catch (RuntimeException e) {
            throw mismatch(what + ": expected success, got " + e);
        }
    }

    // ---- registration ----------------------------------------------------------------------------

    private static final int[] RIGHTS = {
        Access.mask(Access.LOCAL_WRITE),
        Access.mask(Access.LOCAL_WRITE, Access.REMOTE_WRITE),
        Access.mask(Access.LOCAL_WRITE, Access.REMOTE_READ),
        Access.mask(Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ),
        Access.mask(Access.REMOTE_READ),
        Access.mask(Access.LOCAL_WRITE, Access.REMOTE_ATOMIC),
        Access.mask(Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ, Access.REMOTE_ATOMIC),
        0,
        Access.mask(Access.LOCAL_WRITE, Access.MW_BIND),
        Access.mask(Access.LOCAL_WRITE, Access.REMOTE_READ, Access.MW_BIND),
        Access.mask(Access.MW_BIND),
    };

    private void register() {
        boolean sideA = rnd.nextBoolean();
        List<Mem> mems = sideA ? memA : memB;
        Mem mem = mems.get(rnd.nextInt(mems.size()));
        long off = rnd.nextInt(MEM / 2);
        long len = 1 + rnd.nextInt(MEM / 2);
        int access = RIGHTS[rnd.nextInt(RIGHTS.length)];
        boolean foreign = rnd.nextInt(5) == 0;
        ProtectionDomain pd = sideA ? foreign ? pdA2 : pdA : foreign ? pdB2 : pdB;
        int bad = rnd.nextInt(12);
        String what = "register(" + mem.name + "+" + off + ", " + len + ", " + Access.describe(access) + (foreign ? ", foreign PD" : "")
                + (bad < 4 ? ", bad " + bad : "") + ")";
        note(what);
        if (pd.isDestroyed()) { // a closed PD refuses before it looks at anything else
            expectFailure(Errno.EBADF, what + " on a closed PD", () -> pd.register(mem.seg.asSlice(off, len), access));
            return;
        }
        switch (bad) {
            case 0 -> expectFailure(Errno.EINVAL, what + " of heap memory",
                    () -> pd.register(MemorySegment.ofArray(new byte[64]), Access.LOCAL_WRITE));
            case 1 -> expectFailure(Errno.EINVAL, what + " of 0 bytes", () -> pd.register(mem.seg.asSlice(off, 0), access));
            case 2 -> expectFailure(Errno.EINVAL, what + " REMOTE_WRITE without LOCAL_WRITE",
                    () -> pd.register(mem.seg.asSlice(off, len), Access.mask(Access.REMOTE_WRITE)));
            case 3 -> expectFailure(Errno.EINVAL, what + " of a confined arena",
                    () -> pd.register(confined.allocate(64), Access.LOCAL_WRITE));
            default -> {
                if (!mem.alive) {
                    expectFailure(Errno.EINVAL, what + " of freed memory", () -> pd.register(mem.seg.asSlice(off, len), access));
                } else if (pd.isDestroyed()) {
                    expectFailure(Errno.EBADF, what + " on a closed PD", () -> pd.register(mem.seg.asSlice(off, len), access));
                } else {
                    MemoryRegion mr = expectSuccess(what, () -> pd.register(mem.seg.asSlice(off, len), access));
                    regs.add(new Reg(mr, sideA, pd, mem, mem.address() + off, len, access));
                    exchangeKey(mr);
                }
            }
        }
    }

    private void deregister() {
        if (!closedRegs.isEmpty() && rnd.nextInt(4) == 0) {
            Reg r = closedRegs.get(rnd.nextInt(closedRegs.size()));
            note("deregister again " + r.mr);
            expectFailure(Errno.EBADF, "second close of " + r.mr, r.mr::close);
            return;
        }
        if (regs.isEmpty()) {
            return;
        }
        Reg r = regs.get(rnd.nextInt(regs.size()));
        if (wins.stream().anyMatch(w -> w.bound && w.parent == r)) {
            note("deregister " + r.mr + " with a window bound");
            expectFailure(Errno.EBUSY, "close of " + r.mr + " with a window bound", r.mr::close);
            return;
        }
        regs.remove(r);
        note("deregister " + r.mr);
        expectSuccess("close " + r.mr, () -> {
            r.mr.close();
            return null;
        });
        r.closed = true;
        closedRegs.add(r);
        if (closedRegs.size() > 50) {
            closedRegs.removeFirst();
        }
    }

    // ---- the cache (B side) ----------------------------------------------------------------------

    private void cacheGet() {
        Mem mem = memB.get(rnd.nextInt(memB.size()));
        long off = rnd.nextInt(MEM / 2);
        long len = 1 + rnd.nextInt(MEM / 4);
        int access = RIGHTS[rnd.nextInt(4)];
        String what = "cache.get(" + mem.name + "+" + off + ", " + len + ", " + Access.describe(access) + ")";
        note(what);
        if (!mem.alive) {
            expectFailure(Errno.EINVAL, what + " of freed memory", () -> cache.get(mem.seg.asSlice(off, len), access));
            return;
        }
        CachedRegion h = expectSuccess(what, () -> cache.get(mem.seg.asSlice(off, len), access));
        if (h.address() > mem.address() + off || h.address() + h.length() < mem.address() + off + len
                || (h.access() & access) != access || revoked.contains(h.region())) {
            throw mismatch(what + " answered " + h + ", which does not cover the request or is revoked");
        }
        held.add(new Held(h, mem));
        exchangeKey(h.region());
    }

    /**
     * The model reasons in the regions' own keys; work requests carry what A's QP imported for them
     * (the provider-neutral key exchange, once per registration while it is alive). A forged key has
     * no import and goes in as it is.
     */
    private final java.util.Map<Integer, Imported> imported = new java.util.HashMap<>();

    /** What A imported for a region's key (a later region may get the same key number: it is imported anew). */
    private record Imported(Object owner, int handle) {
    }

    private void exchangeKey(MemoryRegion mr) {
        Imported i = imported.get(mr.rkey());
        if (i == null || i.owner() != mr) {
            imported.put(mr.rkey(), new Imported(mr, qpA.importRemoteKey(mr.exportRemoteKey())));
        }
    }

    /** A bound window's key, imported once per binding. */
    private void exchangeKey(Win w) {
        Imported i = imported.get(w.key);
        if (i == null || i.owner() != w.binding) {
            imported.put(w.key, new Imported(w.binding, qpA.importRemoteKey(w.mw.exportRemoteKey())));
        }
    }

    private int onTheWire(int rkey) {
        Reg now = resolve(rkey, false);
        if (now != null) {
            if (now.win != null) {
                exchangeKey(now.win);
            } else {
                exchangeKey(now.mr); // the live region with this key number, imported once
            }
        }
        Imported i = imported.get(rkey);
        return i == null ? rkey : i.handle(); // a stale import stays stale: the target refuses it
    }

    private void cachePut() {
        if (!released.isEmpty() && rnd.nextInt(3) == 0) {
            CachedRegion h = released.get(rnd.nextInt(released.size())).handle();
            if (!h.isHeld()) { // not handed out again meanwhile
                note("cache put again " + h);
                expectFailure(Errno.EINVAL, "second release of " + h, h::close);
            }
            return;
        }
        if (held.isEmpty()) {
            return;
        }
        Held h = held.remove(rnd.nextInt(held.size()));
        note("cache put " + h.handle());
        expectSuccess("release of " + h.handle(), () -> {
            h.handle().close();
            return null;
        });
        released.add(h);
        if (released.size() > 30) {
            released.removeFirst();
        }
    }

    private void cacheInvalidate() {
        Mem mem = memB.get(rnd.nextInt(memB.size()));
        long off = rnd.nextInt(MEM);
        long len = 1 + rnd.nextInt(MEM / 4);
        long lo = mem.address() + off;
        long hi = lo + len;
        note("cache.invalidate(" + mem.name + "+" + off + ", " + len + ")");
        cache.invalidate(lo, len);
        for (Held h : held) {
            if (h.handle().address() < hi && h.handle().address() + h.handle().length() > lo) {
                revoked.add(h.handle().region());
            }
        }
    }

    // ---- the pool (A side) -----------------------------------------------------------------------

    private void poolAlloc() {
        long size = 1 + rnd.nextInt(8192);
        note("pool.allocate(" + size + ")");
        PooledBuffer b = expectSuccess("allocate", () -> pool.allocate(size));
        MemorySegment seg = b.segment().asSlice(0, size);
        for (long i = 0; i < size; i++) {
            seg.set(java.lang.foreign.ValueLayout.JAVA_BYTE, i, (byte) rnd.nextInt());
        }
        pbufs.add(new PBuf(b, new Mem("pool" + b.address(), true, null, seg)));
    }

    private int livePoolBuffers() {
        int n = 0;
        for (PBuf p : pbufs) {
            if (p.live) {
                n++;
            }
        }
        return n;
    }

    private void poolFree() {
        if (pbufs.isEmpty()) {
            return;
        }
        if (pbufs.size() > 64) { // forget the oldest freed ones (kept a while for double frees)
            for (int i = 0; i < pbufs.size() && pbufs.size() > 48; i++) {
                if (!pbufs.get(i).live) {
                    pbufs.remove(i--);
                }
            }
        }
        PBuf p = pbufs.get(rnd.nextInt(pbufs.size()));
        if (!p.live) {
            boolean reused = pbufs.stream().anyMatch(q -> q.live && q.buffer == p.buffer);
            note("pool free again" + (reused ? " (handle reused)" : ""));
            if (reused || rnd.nextBoolean()) {
                // With the generation: a stale handle, refused even if handed out again meanwhile.
                expectFailure(Errno.EBADF, "stale free of " + p.buffer, () -> p.buffer.close(p.generation));
            } else {
                expectFailure(Errno.EINVAL, "double free of " + p.buffer, p.buffer::close);
            }
            pbufs.remove(p);
            return;
        }
        note("pool free " + p.buffer.address());
        p.buffer.close();
        p.live = false;
    }

    // ---- keys: what the model says a key names ---------------------------------------------------

    /** What the model knew of the keys of the last request posted (for failure messages). */
    private String lastKeys = "";

    private String explain(int key, boolean sideA) {
        Reg r = resolve(key, sideA);
        String held = "";
        for (Held h : this.held) {
            if (h.handle().lkey() == key) {
                held = " (a held cache region" + (revoked.contains(h.handle().region()) ? ", revoked" : "") + ")";
            }
        }
        return "0x" + Integer.toHexString(key) + (sideA ? "@A" : "@B") + " -> " + (r == null ? "nothing" + held
                : r.mr + " [0x" + Long.toHexString(r.address) + "+" + r.length + ", " + Access.describe(r.access) + ", "
                + r.pd + ", memory " + (r.mem.alive ? "alive" : "freed") + "]" + held);
    }

    /** The live registration of side A or B whose key this is, or null. */
    private Reg resolve(int key, boolean sideA) {
        for (Reg r : regs) {
            if (r.sideA == sideA && r.key() == key) {
                return r;
            }
        }
        if (sideA) {
            for (PBuf p : pbufs) {
                if (p.live && poolReg.lkey(p.buffer) == key) {
                    MemoryRegion mr = poolReg.region(p.buffer);
                    return new Reg(mr, true, pdA, p.mem, mr.address(), mr.length(),
                            Access.mask(Access.LOCAL_WRITE, Access.REMOTE_READ, Access.REMOTE_WRITE));
                }
            }
        } else {
            for (Win w : wins) {
                if (w.bound && w.key == key) {
                    return w.asReg(pdB);
                }
            }
            for (Held h : held) {
                if (h.handle().lkey() == key) {
                    if (revoked.contains(h.handle().region())) {
                        return null; // revoked: its keys resolve to nothing
                    }
                    return new Reg(h.handle().region(), false, pdB, h.mem(), h.handle().address(), h.handle().length(),
                            h.handle().access());
                }
            }
            // A region nobody holds any more: the cache keeps it or evicts it as it likes, and the
            // region itself says which (isValid); the data path must agree with it.
            for (Held h : released) {
                if (h.handle().lkey() == key && !revoked.contains(h.handle().region()) && h.handle().region().isValid()) {
                    return new Reg(h.handle().region(), false, pdB, h.mem(), h.handle().address(), h.handle().length(),
                            h.handle().access());
                }
            }
        }
        return null;
    }

    /** The memory (and the offset in it) holding {@code [address, address + length)}, or null. */
    private Object[] memAt(long address, long length, boolean sideA) {
        for (Mem m : sideA ? memA : memB) {
            if (address >= m.address() && address + length <= m.address() + m.seg.byteSize()) {
                return new Object[] {m, address - m.address()};
            }
        }
        if (sideA) {
            for (PBuf p : pbufs) {
                if (p.live && address >= p.mem.address() && address + length <= p.mem.address() + p.mem.seg.byteSize()) {
                    return new Object[] {p.mem, address - p.mem.address()};
                }
            }
        }
        return null;
    }

    /** True if the SGE passes a NIC's local checks on a QP of {@code pd}. */
    private boolean localOk(Sge s, boolean sideA, ProtectionDomain pd, boolean written) {
        Reg r = resolve(s.key(), sideA);
        if (r == null || r.pd != pd || (written && !Access.has(r.access, Access.LOCAL_WRITE))) {
            return false;
        }
        if (s.address() < r.address || s.address() + s.length() > r.address + r.length) {
            return false;
        }
        Object[] at = memAt(s.address(), s.length(), sideA);
        return at != null && ((Mem) at[0]).alive && r.mem.alive;
    }

    private boolean remoteOk(long address, long length, int rkey, Access right) {
        Reg r = resolve(rkey, false);
        if (r == null || r.pd != pdB || !Access.has(r.access, right)) {
            return false;
        }
        if (address < r.address || address + length > r.address + r.length) {
            return false;
        }
        Object[] at = memAt(address, length, false);
        return at != null && ((Mem) at[0]).alive && r.mem.alive;
    }

    // ---- choosing SGEs and remote ranges, good and bad -------------------------------------------

    /**
     * A key/range for side A (sources and READ sinks) or B (receive SGEs): one the model expects
     * to pass ({@code good}), or one picked at random among every kind, bad ones included (stale,
     * forged, past its region, without LOCAL_WRITE, of the other PD, over freed memory). The model
     * judges every SGE on its own, whatever it was picked for.
     */
    private Sge pickSge(boolean sideA, long length, boolean written, boolean good) {
        ProtectionDomain pd = sideA ? pdA : pdB;
        List<Sge> candidates = new ArrayList<>();
        for (Reg r : regs) {
            if (r.sideA == sideA && (!good || (r.pd == pd && r.mem.alive && (!written || Access.has(r.access, Access.LOCAL_WRITE))))) {
                long len = Math.min(length, r.length);
                candidates.add(new Sge(r.address + rnd.nextLong(r.length - len + 1), len, r.key()));
            }
        }
        if (sideA) {
            for (PBuf p : pbufs) {
                if (p.live) {
                    long size = p.mem.seg.byteSize();
                    long len = Math.min(length, size);
                    candidates.add(new Sge(p.mem.address() + rnd.nextLong(size - len + 1), len, poolReg.lkey(p.buffer)));
                }
            }
        } else {
            for (Held h : held) {
                if (!good || (!revoked.contains(h.handle().region()) && h.mem().alive
                        && (!written || Access.has(h.handle().access(), Access.LOCAL_WRITE)))) {
                    long len = Math.min(length, h.handle().length());
                    candidates.add(new Sge(h.handle().address() + rnd.nextLong(h.handle().length() - len + 1), len,
                            h.handle().lkey()));
                }
            }
        }
        if (good && !candidates.isEmpty()) {
            return candidates.get(rnd.nextInt(candidates.size()));
        }
        int way = rnd.nextInt(8);
        if (way == 0 && !closedRegs.isEmpty()) { // a stale key
            Reg r = closedRegs.get(rnd.nextInt(closedRegs.size()));
            return new Sge(r.address, Math.min(length, r.length), r.key());
        }
        if (way == 1 || candidates.isEmpty()) { // a forged key
            return new Sge((sideA ? memA : memB).getFirst().address(), length, rnd.nextInt());
        }
        Sge c = candidates.get(rnd.nextInt(candidates.size()));
        if (way == 2) { // reaching past its region's end by at least one byte
            Reg r = resolve(c.key(), sideA);
            if (r != null) {
                return new Sge(r.address + r.length - c.length() / 2, c.length(), c.key());
            }
        }
        return c;
    }

    /** A remote range on B for {@code right}, good or picked at random among every kind: {address, rkey}. */
    private long[] pickRemote(long length, Access right, boolean good) {
        List<long[]> candidates = new ArrayList<>();
        for (Reg r : regs) {
            if (!r.sideA && r.length >= length && (!good || (r.pd == pdB && r.mem.alive && Access.has(r.access, right)))) {
                candidates.add(new long[] {r.address + rnd.nextLong(r.length - length + 1), r.key()});
            }
        }
        for (Held h : held) {
            if (h.handle().length() >= length && (!good || (!revoked.contains(h.handle().region()) && h.mem().alive
                    && Access.has(h.handle().access(), right)))) {
                candidates.add(new long[] {h.handle().address() + rnd.nextLong(h.handle().length() - length + 1),
                        h.handle().rkey()});
            }
        }
        for (Win w : wins) {
            if (w.bound && w.length >= length && (!good || (w.parent.mem.alive && Access.has(w.access, right)))) {
                candidates.add(new long[] {w.address + rnd.nextLong(w.length - length + 1), w.key});
            }
        }
        if (good && !candidates.isEmpty()) {
            return candidates.get(rnd.nextInt(candidates.size()));
        }
        int way = rnd.nextInt(7);
        if (way == 6 && !staleWindowKeys.isEmpty()) {
            return staleWindowKeys.get(rnd.nextInt(staleWindowKeys.size()));
        }
        if (way == 0 && !closedRegs.isEmpty()) {
            Reg r = closedRegs.get(rnd.nextInt(closedRegs.size()));
            return new long[] {r.address, r.key()};
        }
        if (way == 1 || candidates.isEmpty()) {
            return new long[] {memB.getFirst().address(), rnd.nextInt()};
        }
        long[] c = candidates.get(rnd.nextInt(candidates.size()));
        if (way == 2) {
            Reg r = resolve((int) c[1], false);
            if (r != null) {
                return new long[] {r.address + r.length - length / 2, c[1]};
            }
        }
        return c;
    }

    /** Whether the next request is meant to pass (most are): then every SGE and range is picked good. */
    private boolean meantGood() {
        return rnd.nextInt(5) != 0;
    }

    // ---- posting ---------------------------------------------------------------------------------

    private void postOneSided(Opcode opcode) {
        boolean read = opcode == Opcode.RDMA_READ;
        boolean good = meantGood();
        int n = 1 + rnd.nextInt(SGES);
        long want = 1 + rnd.nextInt(2048);
        int bad = good ? -1 : rnd.nextInt(n + 1); // which SGE (or n: the remote range) may be bad
        List<Sge> sges = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            sges.add(pickSge(true, want, read, i != bad));
        }
        long total = sges.stream().mapToLong(Sge::length).sum();
        long[] remote = pickRemote(total, read ? Access.REMOTE_READ : Access.REMOTE_WRITE, bad != n);
        long raddr = remote[0];
        int rkey = (int) remote[1];
        long wrId = nextWrId++;
        WorkRequest wr = new WorkRequest(SGES).wrId(wrId).opcode(opcode).signaled(true).immData((int) wrId).remote(raddr, onTheWire(rkey));
        for (Sge s : sges) {
            wr.addSge(s.address(), s.length(), s.key());
        }
        String what = opcode + " #" + wrId + " " + sges + " -> 0x" + Long.toHexString(raddr) + " key 0x" + Integer.toHexString(rkey);
        note(what);
        lastKeys = sges.stream().map(x -> explain(x.key(), true)).toList() + " remote " + explain(rkey, false);
        // The model's verdict, in a NIC's order.
        WcStatus status;
        boolean consumesRecv = opcode == Opcode.RDMA_WRITE_WITH_IMM;
        if (aError) {
            status = WcStatus.WR_FLUSH_ERR;
        } else if (!sges.stream().allMatch(s -> localOk(s, true, pdA, read))) {
            status = WcStatus.LOC_PROT_ERR;
        } else if (bError) {
            status = WcStatus.RETRY_EXC_ERR;
        } else if (!remoteOk(raddr, total, rkey, read ? Access.REMOTE_READ : Access.REMOTE_WRITE)) {
            status = WcStatus.REM_ACCESS_ERR;
        } else if (consumesRecv && recvsAtB().isEmpty()) {
            status = WcStatus.RNR_RETRY_EXC_ERR;
        } else {
            status = WcStatus.SUCCESS;
        }
        expectSuccess("post " + what, () -> {
            qpA.postSend(wr);
            return null;
        });
        expectA.add(new long[] {wrId, status.ordinal(), opcode.ordinal(), -1});
        outcomes.merge(opcode + " " + status, 1, Integer::sum);
        if (status == WcStatus.SUCCESS) {
            if (read) {
                long at = 0;
                for (Sge s : sges) {
                    copy(raddr + at, false, s.address(), true, s.length());
                    at += s.length();
                }
            } else {
                long at = 0;
                for (Sge s : sges) {
                    copy(s.address(), true, raddr + at, false, s.length());
                    at += s.length();
                }
                if (consumesRecv) {
                    Recv r = recvsAtB().removeFirst();
                    expectB.add(new long[] {r.wrId(), WcStatus.SUCCESS.ordinal(), Opcode.RECV_RDMA_WITH_IMM.ordinal(), total,
                        (int) wrId});
                }
            }
        } else if (status != WcStatus.WR_FLUSH_ERR) {
            failA(status);
        }
        if (!pipelining) {
            settle();
        }
    }

    /**
     * An atomic (CMP_AND_SWP or FETCH_AND_ADD), good or bad in one way (its SGE, its remote range,
     * a misaligned address): the model's verdict in a NIC's order, and on success the value found
     * in the SGE's bytes and the result at the target, as 64-bit native-order integers.
     */
    private void postAtomic() {
        Opcode opcode = rnd.nextBoolean() ? Opcode.ATOMIC_CMP_AND_SWP : Opcode.ATOMIC_FETCH_AND_ADD;
        boolean good = meantGood();
        int bad = good ? -1 : rnd.nextInt(3); // 0: the SGE, 1: the remote range, 2: misaligned
        Sge s = pickSge(true, 8, true, bad != 0);
        if (s.length() != 8) {
            return; // (a region shorter than 8 bytes: the post would refuse it, as badPost checks)
        }
        long[] remote = pickRemote(8, Access.REMOTE_ATOMIC, bad != 1);
        long raddr = bad == 2 ? remote[0] | (1 + rnd.nextInt(7)) : remote[0] & ~7L;
        int rkey = (int) remote[1];
        Object[] at = memAt(raddr, 8, false);
        long current = at == null ? 0 : shadowLong((Mem) at[0], (long) at[1]);
        long compareAdd = opcode == Opcode.ATOMIC_CMP_AND_SWP && rnd.nextBoolean() ? current : rnd.nextLong();
        long swap = rnd.nextLong();
        long wrId = nextWrId++;
        WorkRequest wr = new WorkRequest(SGES).wrId(wrId).opcode(opcode).signaled(true).atomic(compareAdd, swap)
                .addSge(s.address(), 8, s.key()).remote(raddr, onTheWire(rkey));
        note(opcode + " #" + wrId + " " + s + " -> 0x" + Long.toHexString(raddr) + " key 0x" + Integer.toHexString(rkey));
        lastKeys = explain(s.key(), true) + " remote " + explain(rkey, false);
        WcStatus status;
        if (aError) {
            status = WcStatus.WR_FLUSH_ERR;
        } else if (!localOk(s, true, pdA, true)) {
            status = WcStatus.LOC_PROT_ERR;
        } else if (bError) {
            status = WcStatus.RETRY_EXC_ERR;
        } else if (!remoteOk(raddr, 8, rkey, Access.REMOTE_ATOMIC)) {
            status = WcStatus.REM_ACCESS_ERR;
        } else if ((raddr & 7) != 0) {
            status = WcStatus.REM_INV_REQ_ERR;
        } else {
            status = WcStatus.SUCCESS;
        }
        expectSuccess("post " + opcode, () -> {
            qpA.postSend(wr);
            return null;
        });
        expectA.add(new long[] {wrId, status.ordinal(), opcode.ordinal(), status == WcStatus.SUCCESS ? 8 : -1});
        outcomes.merge(opcode + " " + status, 1, Integer::sum);
        if (status == WcStatus.SUCCESS) {
            long result = opcode == Opcode.ATOMIC_CMP_AND_SWP ? (current == compareAdd ? swap : current) : current + compareAdd;
            setShadowLong((Mem) at[0], (long) at[1], result);
            Object[] local = memAt(s.address(), 8, true);
            setShadowLong((Mem) local[0], (long) local[1], current);
        } else if (status != WcStatus.WR_FLUSH_ERR) {
            failA(status);
        }
        if (!pipelining) {
            settle();
        }
    }

    private static long shadowLong(Mem m, long off) {
        return ByteBuffer.wrap(m.shadow).order(ByteOrder.nativeOrder()).getLong((int) off);
    }

    private static void setShadowLong(Mem m, long off, long v) {
        ByteBuffer.wrap(m.shadow).order(ByteOrder.nativeOrder()).putLong((int) off, v);
    }

    /**
     * Two to six requests posted back to back, nothing awaited between them (SENDs, WRITEs,
     * WRITE_WITH_IMMs, a READ only last: verbs orders nothing after a READ without a fence), good
     * and bad as {@link #postOneSided} and {@link #postSend} pick them. The model is verbs' rule:
     * the first that fails breaks the QP, and everything behind it, pipelined or not, completes
     * WR_FLUSH_ERR and moves no byte.
     */
    private void postPipeline() {
        int k = 2 + rnd.nextInt(5);
        note("pipeline of " + k);
        pipelining = true;
        try {
            for (int i = 0; i < k; i++) {
                int c = rnd.nextInt(i == k - 1 ? 4 : 3);
                if (c == 0) {
                    postSend();
                } else {
                    postOneSided(c == 1 ? Opcode.RDMA_WRITE : c == 2 ? Opcode.RDMA_WRITE_WITH_IMM : Opcode.RDMA_READ);
                }
            }
        } finally {
            pipelining = false;
        }
        settle();
    }

    private void postRecv() {
        int n = rnd.nextInt(SGES + 1);
        boolean good = meantGood();
        int bad = good ? -1 : rnd.nextInt(Math.max(1, n));
        List<Sge> sges = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            sges.add(pickSge(false, 1 + rnd.nextInt(2048), true, i != bad));
        }
        long wrId = nextWrId++;
        WorkRequest wr = new WorkRequest(SGES).wrId(wrId);
        for (Sge s : sges) {
            wr.addSge(s.address(), s.length(), s.key());
        }
        note("recv #" + wrId + " " + sges + (useSrq ? " to the SRQ" : ""));
        if (useSrq && rnd.nextInt(8) == 0) {
            expectFailure(Errno.EINVAL, "recv to a QP whose receives come from an SRQ", () -> qpB.postRecv(wr));
            return;
        }
        if (recvsAtB().size() + pendingRecvCompletions() >= QUEUE) {
            expectFailure(Errno.ENOMEM, "recv into a full receive queue", () -> {
                if (useSrq) {
                    srqB.postRecv(wr);
                } else {
                    qpB.postRecv(wr);
                }
            });
            return;
        }
        expectSuccess("postRecv", () -> {
            if (useSrq) {
                srqB.postRecv(wr);
            } else {
                qpB.postRecv(wr);
            }
            return null;
        });
        if (bError && !useSrq) {
            expectB.add(new long[] {wrId, WcStatus.WR_FLUSH_ERR.ordinal(), Opcode.RECV.ordinal(), -1});
        } else {
            recvsAtB().addLast(new Recv(wrId, sges));
        }
        if (useSrq) {
            counts.merge("srq.postRecv", 1, Integer::sum);
        }
        settle();
    }

    /** Where B's QP takes its receives from: its own queue, or the SRQ. */
    private ArrayDeque<Recv> recvsAtB() {
        return useSrq ? recvsInSrq : recvsAtQp;
    }

    private int pendingRecvCompletions() {
        return expectB.size();
    }

    private void postSend() {
        int n = rnd.nextInt(SGES + 1);
        boolean good = meantGood();
        int bad = good ? -1 : rnd.nextInt(Math.max(1, n));
        List<Sge> sges = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            sges.add(pickSge(true, 1 + rnd.nextInt(1024), false, i != bad));
        }
        long total = sges.stream().mapToLong(Sge::length).sum();
        long wrId = nextWrId++;
        Opcode opcode = rnd.nextInt(3) == 0 ? Opcode.SEND_WITH_IMM : Opcode.SEND;
        WorkRequest wr = new WorkRequest(SGES).wrId(wrId).opcode(opcode).signaled(true).immData((int) wrId * 7);
        for (Sge s : sges) {
            wr.addSge(s.address(), s.length(), s.key());
        }
        note(opcode + " #" + wrId + " " + sges);
        lastKeys = sges.stream().map(x -> explain(x.key(), true) + " sge " + x + (localOk(x, true, pdA, false) ? " ok"
                : " BAD (memory " + (memAt(x.address(), x.length(), true) == null ? "unknown" : "known") + ")")).toList()
                + " into receive "
                + (recvsAtB().isEmpty() ? "none" : recvsAtB().getFirst().sges() + " " + recvsAtB().getFirst().sges().stream()
                .map(x -> explain(x.key(), false) + (localOk(x, false, pdB, true) ? " ok" : " BAD")).toList());
        WcStatus status;
        if (aError) {
            status = WcStatus.WR_FLUSH_ERR;
        } else if (!sges.stream().allMatch(s -> localOk(s, true, pdA, false))) {
            status = WcStatus.LOC_PROT_ERR;
        } else if (bError) {
            status = WcStatus.RETRY_EXC_ERR;
        } else if (recvsAtB().isEmpty()) {
            status = WcStatus.RNR_RETRY_EXC_ERR;
        } else {
            Recv r = recvsAtB().getFirst();
            long room = r.sges().stream().mapToLong(Sge::length).sum();
            if (!r.sges().stream().allMatch(s -> localOk(s, false, pdB, true))) {
                status = WcStatus.REM_OP_ERR;
                recvsAtB().removeFirst();
                expectB.add(new long[] {r.wrId(), WcStatus.LOC_PROT_ERR.ordinal(), Opcode.RECV.ordinal(), -1});
            } else if (room < total) {
                status = WcStatus.REM_INV_REQ_ERR;
                recvsAtB().removeFirst();
                expectB.add(new long[] {r.wrId(), WcStatus.LOC_LEN_ERR.ordinal(), Opcode.RECV.ordinal(), -1});
            } else {
                status = WcStatus.SUCCESS;
                recvsAtB().removeFirst();
                scatter(sges, r.sges());
                if (useSrq) {
                    outcomes.merge("SEND into an SRQ receive SUCCESS", 1, Integer::sum);
                }
                // (a SEND_WITH_IMM's receive carries the immediate; a plain SEND's none, whatever its request held)
                expectB.add(new long[] {r.wrId(), WcStatus.SUCCESS.ordinal(), Opcode.RECV.ordinal(), total,
                    opcode == Opcode.SEND_WITH_IMM ? (int) wrId * 7 : NO_IMM});
            }
        }
        expectSuccess("post " + opcode, () -> {
            qpA.postSend(wr);
            return null;
        });
        expectA.add(new long[] {wrId, status.ordinal(), opcode.ordinal(), -1});
        outcomes.merge(opcode + " " + status, 1, Integer::sum);
        if (status != WcStatus.SUCCESS && status != WcStatus.WR_FLUSH_ERR) {
            failA(status);
        }
        if (!pipelining) {
            settle();
        }
    }

    /** The model of a failed request at A: A breaks; a NAKed remote error breaks B too (flushing its receives). */
    private void failA(WcStatus status) {
        aError = true;
        if (status == WcStatus.REM_ACCESS_ERR || status == WcStatus.REM_OP_ERR || status == WcStatus.REM_INV_REQ_ERR) {
            breakB();
        }
    }

    private void breakB() {
        if (!bError) {
            bError = true;
            while (!useSrq && !recvsAtQp.isEmpty()) { // an SRQ's receives stay queued for the next QP
                expectB.add(new long[] {recvsAtQp.removeFirst().wrId(), WcStatus.WR_FLUSH_ERR.ordinal(), Opcode.RECV.ordinal(), -1});
            }
        }
    }

    /** Requests the API must refuse at post time, with nothing posted. */
    private void badPost() {
        int k = rnd.nextInt(4);
        note("bad post " + k);
        WorkRequest wr = new WorkRequest(SGES + 2).wrId(nextWrId++).opcode(Opcode.RDMA_WRITE).remote(memB.getFirst().address(), 0);
        switch (k) {
            case 0 -> {
                wr.addSge(memA.getFirst().address(), -1 - rnd.nextInt(4096), 0);
                expectFailure(Errno.EINVAL, "an SGE of negative length", () -> qpA.postSend(wr));
            }
            case 1 -> {
                for (int i = 0; i < SGES + 1; i++) {
                    wr.addSge(memA.getFirst().address(), 8, 0);
                }
                expectFailure(Errno.EINVAL, "too many SGEs", () -> qpA.postSend(wr));
            }
            case 2 -> {
                wr.opcode(Opcode.RDMA_READ_WITH_INV).addSge(memA.getFirst().address(), 8, 0);
                expectFailure(Errno.EOPNOTSUPP, "READ_WITH_INV on a non-iWARP device", () -> qpA.postSend(wr));
            }
            default -> {
                // A chain longer than the send queue: ENOMEM, nothing posted.
                WorkRequest first = null;
                for (int i = 0; i <= QUEUE; i++) {
                    WorkRequest w = new WorkRequest(1).wrId(nextWrId++).opcode(Opcode.RDMA_WRITE)
                            .addSge(memA.getFirst().address(), 8, 0).remote(0, 0).next(first);
                    first = w;
                }
                WorkRequest chain = first;
                expectFailure(Errno.ENOMEM, "a chain longer than the send queue", () -> qpA.postSend(chain));
            }
        }
        settle();
    }

    // ---- memory windows (B side) -----------------------------------------------------------------

    private static final int[] WINDOW_RIGHTS = {
        Access.mask(Access.REMOTE_READ),
        Access.mask(Access.REMOTE_WRITE),
        Access.mask(Access.REMOTE_READ, Access.REMOTE_WRITE),
        Access.mask(Access.REMOTE_ATOMIC),
        Access.mask(Access.REMOTE_READ, Access.REMOTE_WRITE, Access.REMOTE_ATOMIC),
    };

    /** Allocates, binds, invalidates (by call, LOCAL_INV or a peer's SEND_WITH_INV) and closes windows at B. */
    private void windowOp() {
        List<Win> live = wins.stream().filter(w -> !w.closed).toList();
        int k = live.isEmpty() ? 0 : rnd.nextInt(6);
        if (k == 0 && live.size() < 6) {
            MemoryWindow.Type type = rnd.nextBoolean() ? MemoryWindow.Type.TYPE_1 : MemoryWindow.Type.TYPE_2;
            note("allocMw " + type);
            wins.add(new Win(expectSuccess("allocMw", () -> pdB.allocMw(type))));
            return;
        }
        if (live.isEmpty()) {
            return;
        }
        Win w = live.get(rnd.nextInt(live.size()));
        switch (k) {
            case 1, 2 -> bindWindow(w);
            case 3 -> invalidateWindow(w);
            case 4 -> sendWithInv(w);
            default -> {
                note("close " + w.mw);
                unbound(w);
                expectSuccess("close " + w.mw, () -> {
                    w.mw.close();
                    return null;
                });
                w.closed = true;
                wins.remove(w);
            }
        }
    }

    /** The window's binding ended: its key goes stale, its parent may be deregistered again. */
    private void unbound(Win w) {
        if (w.bound) {
            staleWindowKeys.add(new long[] {w.address, w.key});
            if (staleWindowKeys.size() > 20) {
                staleWindowKeys.removeFirst();
            }
        }
        w.bound = false;
        w.parent = null;
    }

    private void bindWindow(Win w) {
        List<Reg> targets = regs.stream().filter(r -> !r.sideA).toList();
        if (targets.isEmpty()) {
            return;
        }
        Reg parent = targets.get(rnd.nextInt(targets.size()));
        boolean inside = rnd.nextInt(6) != 0;
        long len = inside ? 1 + rnd.nextLong(parent.length) : parent.length + 1;
        long addr = inside ? parent.address + rnd.nextLong(parent.length - len + 1) : parent.address;
        int rights = WINDOW_RIGHTS[rnd.nextInt(WINDOW_RIGHTS.length)];
        boolean ok = parent.pd == pdB && Access.has(parent.access, Access.MW_BIND) && inside
                && (!(Access.has(rights, Access.REMOTE_WRITE) || Access.has(rights, Access.REMOTE_ATOMIC))
                        || Access.has(parent.access, Access.LOCAL_WRITE));
        Access[] rightList = java.util.Arrays.stream(Access.values()).filter(a -> Access.has(rights, a)).toArray(Access[]::new);
        if (w.type == MemoryWindow.Type.TYPE_1) {
            String what = "bind " + w.mw + " to " + parent.mr + " 0x" + Long.toHexString(addr) + "+" + len + " "
                    + Access.describe(rights);
            note(what);
            if (!ok) {
                expectFailure(Errno.EINVAL, what, () -> w.mw.bind(parent.mr, addr, len, rightList));
                return;
            }
            int key = expectSuccess(what, () -> w.mw.bind(parent.mr, addr, len, rightList));
            unbound(w);
            bound(w, parent, addr, len, rights, key);
            return;
        }
        settle(); // B's completions in a known order: the bind's alone
        boolean rightKey = rnd.nextInt(8) != 0;
        int key = rightKey ? MemoryRegion.incRkey(w.mw.rkey()) : w.mw.rkey() ^ 0x100;
        long wrId = nextWrId++;
        WorkRequest wr = new WorkRequest(1).wrId(wrId).signaled(true).bindMw(w.mw, key, parent.mr, addr, len, rightList);
        note("BIND_MW #" + wrId + " " + w.mw + " key " + Integer.toHexString(key) + " to " + parent.mr + " 0x"
                + Long.toHexString(addr) + "+" + len + " " + Access.describe(rights));
        WcStatus status = bError ? WcStatus.WR_FLUSH_ERR
                : ok && rightKey && !w.bound ? WcStatus.SUCCESS : WcStatus.MW_BIND_ERR;
        expectSuccess("post BIND_MW", () -> {
            qpB.postSend(wr);
            return null;
        });
        expectB.add(new long[] {wrId, status.ordinal(), Opcode.BIND_MW.ordinal(), -1});
        outcomes.merge("BIND_MW " + status, 1, Integer::sum);
        if (status == WcStatus.SUCCESS) {
            bound(w, parent, addr, len, rights, key);
        } else if (status == WcStatus.MW_BIND_ERR) {
            brokeAloneAtB();
            return;
        }
        settle();
    }

    /**
     * A request of B's own failed: B is in the error state and A is not. What A's next request to
     * such a peer reports differs by provider (soft: RETRY_EXC_ERR, the peer gone; ucx checks the
     * rights of the peer's exported key at the initiator first, REM_ACCESS_ERR), so the model
     * reconnects at once instead of predicting it.
     */
    private void brokeAloneAtB() {
        breakB();
        settle();
        reconnect();
    }

    private void bound(Win w, Reg parent, long addr, long len, int rights, int key) {
        w.bound = true;
        w.parent = parent;
        w.address = addr;
        w.length = len;
        w.access = rights;
        w.key = key;
        w.binding = new Object();
    }

    /** Type 1: unbind() (or a zero-length bind); type 2: a LOCAL_INV of its key at B. */
    private void invalidateWindow(Win w) {
        if (w.type == MemoryWindow.Type.TYPE_1) {
            boolean zero = rnd.nextBoolean();
            note((zero ? "zero-length bind of " : "unbind ") + w.mw);
            expectSuccess("unbind " + w.mw, () -> {
                if (zero) {
                    w.mw.bind(null, 0, 0);
                } else {
                    w.mw.unbind();
                }
                return null;
            });
            unbound(w);
            return;
        }
        settle();
        long wrId = nextWrId++;
        // (the wrong key: a plain region's, which LOCAL_INV never invalidates)
        List<Reg> plain = regs.stream().filter(r -> !r.sideA).toList();
        int key = rnd.nextInt(6) != 0 || plain.isEmpty() ? w.mw.rkey() : plain.get(rnd.nextInt(plain.size())).key();
        note("LOCAL_INV #" + wrId + " of " + w.mw + " key " + Integer.toHexString(key));
        WcStatus status = bError ? WcStatus.WR_FLUSH_ERR : w.bound && key == w.key ? WcStatus.SUCCESS : WcStatus.LOC_PROT_ERR;
        expectSuccess("post LOCAL_INV", () -> {
            qpB.postSend(new WorkRequest(1).wrId(wrId).opcode(Opcode.LOCAL_INV).signaled(true).invalidateRkey(key));
            return null;
        });
        expectB.add(new long[] {wrId, status.ordinal(), Opcode.LOCAL_INV.ordinal(), -1});
        outcomes.merge("LOCAL_INV " + status, 1, Integer::sum);
        if (status == WcStatus.SUCCESS) {
            unbound(w);
        } else if (status == WcStatus.LOC_PROT_ERR) {
            brokeAloneAtB();
            return;
        }
        settle();
    }

    /** A's SEND_WITH_INV of 0 bytes naming the window's key (imported while it is bound): a type-2 binding ends. */
    private void sendWithInv(Win w) {
        settle();
        if (w.bound) {
            exchangeKey(w);
        }
        Imported imp = imported.get(w.key);
        int onWire = imp != null && (!w.bound || imp.owner() == w.binding) ? imp.handle() : w.key;
        long wrId = nextWrId++;
        note("SEND_WITH_INV #" + wrId + " of " + w.mw + (w.bound ? " (bound)" : " (unbound)"));
        boolean invalidatable = w.type == MemoryWindow.Type.TYPE_2 && w.bound;
        WcStatus status;
        if (aError) {
            status = WcStatus.WR_FLUSH_ERR;
        } else if (bError) {
            status = WcStatus.RETRY_EXC_ERR;
        } else if (recvsAtB().isEmpty()) {
            status = WcStatus.RNR_RETRY_EXC_ERR;
        } else {
            Recv r = recvsAtB().getFirst();
            if (!r.sges().stream().allMatch(s -> localOk(s, false, pdB, true))) {
                status = WcStatus.REM_OP_ERR;
                recvsAtB().removeFirst();
                expectB.add(new long[] {r.wrId(), WcStatus.LOC_PROT_ERR.ordinal(), Opcode.RECV.ordinal(), -1});
            } else if (!invalidatable) {
                status = WcStatus.REM_INV_REQ_ERR; // (the receive stays posted: the error state flushes it)
                if (useSrq) { // B's QP took it from the SRQ: its error flushes that one only
                    recvsInSrq.removeFirst();
                    expectB.add(new long[] {r.wrId(), WcStatus.WR_FLUSH_ERR.ordinal(), Opcode.RECV.ordinal(), -1});
                }
            } else {
                status = WcStatus.SUCCESS;
                recvsAtB().removeFirst();
                expectB.add(new long[] {r.wrId(), WcStatus.SUCCESS.ordinal(), Opcode.RECV.ordinal(), 0, NO_IMM});
                unbound(w);
            }
        }
        expectSuccess("post SEND_WITH_INV", () -> {
            qpA.postSend(new WorkRequest(1).wrId(wrId).opcode(Opcode.SEND_WITH_INV).signaled(true).invalidateRkey(onWire));
            return null;
        });
        expectA.add(new long[] {wrId, status.ordinal(), Opcode.SEND_WITH_INV.ordinal(), -1});
        outcomes.merge("SEND_WITH_INV " + status, 1, Integer::sum);
        if (status != WcStatus.SUCCESS && status != WcStatus.WR_FLUSH_ERR) {
            failA(status);
        }
        settle();
    }

    // ---- closes in the wrong order, and twice -----------------------------------------------------

    private void wrongOrderCloses() {
        int k = rnd.nextInt(8);
        note("close in the wrong order " + k);
        switch (k) {
            case 0 -> expectFailure(Errno.EBUSY, "PD with a QP", pdA::close);
            case 1 -> expectFailure(Errno.EBUSY, "CQ with a QP", cqB::close);
            case 2 -> expectFailure(Errno.EBUSY, "device with objects", devA::close);
            case 3 -> expectFailure(Errno.EBUSY, "CM ID with a QP", idA::close);
            case 6 -> {
                if (useSrq) {
                    expectFailure(Errno.EBUSY, "SRQ with a QP", srqB::close);
                } else {
                    expectFailure(Errno.EBUSY, "PD with an SRQ", pdB::close);
                }
            }
            case 4 -> { // the second PD: closable when nothing lives on it, then refused, then made again
                ProtectionDomain pd = rnd.nextBoolean() ? pdA2 : pdB2;
                boolean children = regs.stream().anyMatch(r -> r.pd == pd);
                if (pd.isDestroyed()) {
                    expectFailure(Errno.EBADF, "second close of " + pd, pd::close);
                    if (pd == pdA2) {
                        pdA2 = devA.allocPd();
                    } else {
                        pdB2 = devB.allocPd();
                    }
                } else if (children) {
                    expectFailure(Errno.EBUSY, "PD with regions", pd::close);
                } else {
                    expectSuccess("close " + pd, () -> {
                        pd.close();
                        return null;
                    });
                }
            }
            case 5 -> {
                if (!closedRegs.isEmpty()) {
                    Reg r = closedRegs.getLast();
                    expectFailure(Errno.EBADF, "a closed region's revoke", r.mr::revoke);
                }
            }
            default -> expectFailure(Errno.EBUSY, "listener's device", devB::close);
        }
    }

    /** Frees memory under its registrations (the owner's error): every access through them fails from now on. */
    private void killMemory() {
        List<Mem> mems = rnd.nextBoolean() ? memA : memB;
        int i = rnd.nextInt(mems.size());
        Mem m = mems.get(i);
        note("free the memory of " + m.name + " (registrations stay)");
        m.arena.close();
        m.alive = false;
        // A fresh buffer takes its place for what follows.
        mems.set(i, newMem(m.name + "'", m.sideA));
        deadMems.add(m);
    }

    private final List<Mem> deadMems = new ArrayList<>();

    private void reconnect() {
        note("reconnect");
        idA.disconnect();
        breakB();
        aError = true;
        settle();
        idA.destroyQp();
        idB.destroyQp();
        expectFailure(Errno.EINVAL, "second destroyQp", idA::destroyQp);
        idA.close();
        idB.close();
        expectFailure(Errno.EBADF, "second close of a CM ID", idA::close);
        connect();
    }

    // ---- completions and bytes -------------------------------------------------------------------

    /** Polls both CQs until every expected completion is in; compares each. */
    private void settle() {
        drain(cqA, expectA, "A");
        drain(cqB, expectB, "B");
        checkBytes();
    }

    private void drain(CompletionQueue cq, List<long[]> expected, String side) {
        int got = 0;
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (got < expected.size()) {
            int n = cq.poll(wcs);
            for (int i = 0; i < n; i++) {
                if (got + i >= expected.size()) {
                    throw mismatch("an unexpected completion on " + side + ": " + wcs[i]);
                }
                long[] e = expected.get(got + i);
                WorkCompletion wc = wcs[i];
                if (wc.wrId() != e[0] || wc.status().ordinal() != e[1] || wc.opcode().ordinal() != e[2]
                        || (e[3] >= 0 && wc.byteLen() != e[3])
                        || (e.length > 4 && (e[4] == NO_IMM ? wc.withImm() : !wc.withImm() || wc.immData() != (int) e[4]))) {
                    throw mismatch("completion on " + side + " " + wc + ", the model expected wrId " + e[0] + " "
                            + WcStatus.values()[(int) e[1]] + " " + Opcode.values()[(int) e[2]] + (e[3] >= 0 ? " " + e[3] + " bytes" : "")
                            + (e.length > 4 ? (e[4] == NO_IMM ? " without an immediate" : " immediate " + (int) e[4]) : "")
                            + "; the model's state: A " + (aError ? "ERROR" : "RTS") + ", B " + (bError ? "ERROR" : "RTS")
                            + ", keys of the last request: " + lastKeys);
                }
            }
            got += n;
            if (n == 0 && System.nanoTime() > deadline) {
                throw mismatch("completions on " + side + ": " + got + " of " + expected.size() + " arrived");
            }
        }
        expected.clear();
        if (cq.poll(wcs) != 0) {
            throw mismatch("an unexpected completion on " + side + ": " + wcs[0]);
        }
    }

    private void copy(long from, boolean fromA, long to, boolean toA, long length) {
        Object[] src = memAt(from, length, fromA);
        Object[] dst = memAt(to, length, toA);
        System.arraycopy(((Mem) src[0]).shadow, (int) (long) src[1], ((Mem) dst[0]).shadow, (int) (long) dst[1], (int) length);
    }

    private void scatter(List<Sge> from, List<Sge> to) {
        byte[] message = new byte[(int) from.stream().mapToLong(Sge::length).sum()];
        int at = 0;
        for (Sge s : from) {
            Object[] m = memAt(s.address(), s.length(), true);
            System.arraycopy(((Mem) m[0]).shadow, (int) (long) m[1], message, at, (int) s.length());
            at += (int) s.length();
        }
        int left = message.length;
        at = 0;
        for (Sge s : to) {
            if (left == 0) {
                break;
            }
            int n = (int) Math.min(left, s.length());
            Object[] m = memAt(s.address(), n, false);
            System.arraycopy(message, at, ((Mem) m[0]).shadow, (int) (long) m[1], n);
            at += n;
            left -= n;
        }
    }

    /** Every byte of every live buffer on both sides equals the model's. */
    void checkBytes() {
        List<Mem> all = new ArrayList<>(memA);
        all.addAll(memB);
        for (PBuf p : pbufs) {
            if (p.live) {
                all.add(p.mem);
            }
        }
        for (Mem m : all) {
            MemorySegment shadow = MemorySegment.ofArray(m.shadow);
            long at = m.seg.mismatch(shadow);
            if (at != -1) {
                throw mismatch("the bytes of " + m.name + " differ from the model's at offset " + at);
            }
        }
    }

    /** What the run did, by kind of operation (to see that every kind happened). */
    Map<String, Integer> counts() {
        return counts;
    }

    int connections() {
        return connections;
    }

    /** Completion statuses the model predicted (and the provider gave), by opcode. */
    Map<String, Integer> outcomes() {
        return outcomes;
    }

    /** Tears everything down in the mandatory order; nothing may be left. */
    @Override
    public void close() {
        for (Held h : held) {
            h.handle().close();
        }
        held.clear();
        cache.close();
        idA.disconnect();
        drainQuietly();
        idA.destroyQp();
        idB.destroyQp();
        idA.close();
        idB.close();
        listener.close();
        srqB.close();
        for (Win w : wins) {
            w.mw.close();
        }
        wins.clear();
        for (Reg r : regs) {
            r.mr.close();
        }
        regs.clear();
        poolReg.close();
        for (PBuf p : pbufs) {
            if (p.live) {
                p.buffer.close();
            }
        }
        pool.close();
        cqA.close();
        cqB.close();
        pdA.close();
        pdB.close();
        if (!pdA2.isDestroyed()) {
            pdA2.close();
        }
        if (!pdB2.isDestroyed()) {
            pdB2.close();
        }
        devA.close(); // EBUSY if anything survived
        devB.close();
        for (Mem m : memA) {
            m.arena.close();
        }
        for (Mem m : memB) {
            m.arena.close();
        }
        confined.close();
    }

    private void drainQuietly() {
        while (cqA.poll(wcs) + cqB.poll(wcs) > 0) {
            // flushes of the disconnect
        }
    }
}
