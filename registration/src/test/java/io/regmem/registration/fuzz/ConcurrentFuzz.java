package io.regmem.registration.fuzz;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.Access;
import io.regmem.registration.CmId;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.Opcode;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import io.regmem.registration.cache.CachedRegion;
import io.regmem.registration.cache.RegistrationCache;
import io.regmem.registration.testkit.Providers;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The concurrent variant of the API fuzz: two threads post RDMA WRITEs on one QP, a third polls its
 * completions, and the test thread deregisters target regions (closing the region, revoking it, or
 * invalidating it through the registration cache) while the writes fly. Every write goes to a slot
 * of its own, with a pattern of its own. What must hold, whatever the interleaving:
 * <ul>
 *   <li>every posted write completes exactly once, as SUCCESS, as REM_ACCESS_ERR (only a write into a
 *       region that was deregistered) or as WR_FLUSH_ERR (after the first error); at most one error
 *       that is not a flush;</li>
 *   <li>a write that succeeded left its whole pattern in its slot; one that failed moved no byte;</li>
 *   <li>once a deregistration returned, not one byte of that region's memory changes;</li>
 *   <li>nothing leaks.</li>
 * </ul>
 * Public API only, provider-neutral.
 */
final class ConcurrentFuzz implements AutoCloseable {
    private static final int REGIONS = 4;
    private static final int QUEUE = 32;
    /** Patterns (the source holds each once, a slot long): writes carry 1..PATTERNS. */
    private static final int PATTERNS = 15;

    private final long seed;
    private final SplittableRandom rnd;
    private final RdmaDevice devA;
    private final RdmaDevice devB;
    private final ProtectionDomain pdA;
    private final ProtectionDomain pdB;
    private final CompletionQueue cqA;
    private final CompletionQueue cqB;
    private final CmId listener;
    private final String listenName;
    private final RegistrationCache cache;
    /** This round's slot size and slots per region: many small writes, or a few of half a MiB. */
    private int slot;
    private int slotsPerRegion;
    private int rounds;
    private int racedDeregistrations;

    /** One posted write: where it goes and what it carries. */
    record Write(long wrId, int region, int slot, byte pattern) {
    }

    ConcurrentFuzz(long seed, String provider) {
        this.seed = seed;
        this.rnd = new SplittableRandom(seed);
        devA = RdmaDevice.open(provider, Providers.defaults(provider));
        devB = RdmaDevice.open(provider, Providers.defaults(provider));
        pdA = devA.allocPd();
        pdB = devB.allocPd();
        cqA = devA.createCq(4 * QUEUE);
        cqB = devB.createCq(4 * QUEUE);
        listener = devB.createCmId();
        listenName = Providers.address(provider, "concurrent-fuzz-" + seed + "-" + System.nanoTime());
        listener.listen(listenName);
        cache = RegistrationCache.of(pdB);
    }

    private AssertionError fail(String what) {
        return new AssertionError("concurrent fuzz (seed " + seed + ", round " + rounds + "): " + what);
    }

    /** Runs {@code n} rounds, each on a fresh connection and fresh target regions. */
    void run(int n) throws InterruptedException {
        for (int i = 0; i < n; i++) {
            round();
            rounds++;
        }
    }

    private void round() throws InterruptedException {
        boolean big = rnd.nextInt(3) == 0;
        slot = big ? 512 << 10 : 4096;
        slotsPerRegion = big ? 3 : 64;
        Arena arena = Arena.ofShared();
        // The source: slot p - 1 full of byte p (a write of pattern p reads it).
        MemorySegment src = arena.allocate((long) PATTERNS * slot, 4096);
        for (int p = 1; p <= PATTERNS; p++) {
            src.asSlice((long) (p - 1) * slot, slot).fill((byte) p);
        }
        MemoryRegion srcMr = pdA.register(src, Access.LOCAL_WRITE);
        CmId idA = devA.createCmId();
        QueuePair qpA = idA.createQp(pdA, new QpInitAttributes().sendCq(cqA).recvCq(cqA).maxSendWr(QUEUE).maxSendSge(2));
        idA.connect(listenName);
        CmId idB = listener.getRequest();
        idB.createQp(pdB, new QpInitAttributes().sendCq(cqB).recvCq(cqB).maxSendWr(QUEUE));
        idB.accept();
        MemorySegment dst = arena.allocate((long) REGIONS * slotsPerRegion * slot, 4096);
        dst.fill((byte) 0);
        boolean viaCache = rnd.nextBoolean();
        MemoryRegion[] mrs = new MemoryRegion[REGIONS];
        CachedRegion[] cached = new CachedRegion[REGIONS];
        int[] keys = new int[REGIONS]; // each region's key as A's QP imported it, once per registration
        for (int r = 0; r < REGIONS; r++) {
            MemorySegment part = region(dst, r);
            if (viaCache) {
                cached[r] = cache.get(part, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
            } else {
                mrs[r] = pdB.register(part, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
            }
            keys[r] = qpA.importRemoteKey((viaCache ? cached[r].region() : mrs[r]).exportRemoteKey());
        }
        Map<Long, Write> posted = new ConcurrentHashMap<>();
        Map<Long, WcStatus> completed = new ConcurrentHashMap<>();
        boolean[] deregistered = new boolean[REGIONS];
        AtomicReference<Throwable> failure = new AtomicReference<>();
        AtomicBoolean postersDone = new AtomicBoolean();
        AtomicInteger postersRunning = new AtomicInteger(2);
        AtomicInteger slotNext = new AtomicInteger();
        int perPoster = 40 + rnd.nextInt(80);
        long[] posterSeeds = {rnd.nextLong(), rnd.nextLong()};
        AtomicInteger posterIndex = new AtomicInteger();
        Runnable poster = () -> {
            SplittableRandom my = new SplittableRandom(posterSeeds[posterIndex.getAndIncrement()]);
            try {
                for (int i = 0; i < perPoster; i++) {
                    int n = slotNext.getAndIncrement();
                    if (n >= REGIONS * slotsPerRegion) {
                        break;
                    }
                    int region = n / slotsPerRegion;
                    long wrId = ((long) rounds << 32) | n;
                    int pattern = 1 + my.nextInt(PATTERNS);
                    long at = dst.address() + (long) n * slot;
                    int rkey = keys[region];
                    long from = src.address() + (long) (pattern - 1) * slot;
                    long split = 1 + my.nextInt(slot - 1);
                    WorkRequest wr = new WorkRequest(2).wrId(wrId).opcode(Opcode.RDMA_WRITE).signaled(true)
                            .addSge(from, split, srcMr.lkey()).addSge(from + split, slot - split, srcMr.lkey())
                            .remote(at, rkey);
                    posted.put(wrId, new Write(wrId, region, n, (byte) pattern));
                    while (true) {
                        try {
                            qpA.postSend(wr);
                            break;
                        } catch (RdmaException e) {
                            if (e.errno() != Errno.ENOMEM) {
                                throw e;
                            }
                            Thread.onSpinWait(); // the queue is full until the poller polls
                        }
                    }
                }
            } catch (Throwable e) {
                failure.compareAndSet(null, e);
            } finally {
                if (postersRunning.decrementAndGet() == 0) {
                    postersDone.set(true);
                }
            }
        };
        Runnable poller = () -> {
            WorkCompletion[] wcs = new WorkCompletion[16];
            for (int i = 0; i < wcs.length; i++) {
                wcs[i] = new WorkCompletion();
            }
            try {
                while (!postersDone.get() || completed.size() < posted.size()) {
                    int n = cqA.poll(wcs);
                    for (int i = 0; i < n; i++) {
                        if (completed.put(wcs[i].wrId(), wcs[i].status()) != null) {
                            throw fail("a second completion for write " + wcs[i].wrId());
                        }
                    }
                    if (n == 0) {
                        Thread.onSpinWait();
                    }
                }
            } catch (Throwable e) {
                failure.compareAndSet(null, e);
            }
        };
        Thread[] threads = {new Thread(poster, "poster-1"), new Thread(poster, "poster-2"), new Thread(poller, "poller")};
        for (Thread t : threads) {
            t.start();
        }
        // Deregister one or two regions at random moments while the writes fly; snapshot each the
        // moment its deregistration returns.
        int victims = 1 + rnd.nextInt(2);
        MemorySegment[] snapshots = new MemorySegment[REGIONS];
        for (int v = 0; v < victims; v++) {
            long spin = rnd.nextInt(200_000);
            long until = System.nanoTime() + spin;
            while (System.nanoTime() < until) {
                Thread.onSpinWait();
            }
            // Mostly the region the posters are writing into right now, else any.
            int latest = Math.min(slotNext.get(), REGIONS * slotsPerRegion) - 1;
            int r = latest >= 0 && rnd.nextInt(4) != 0 ? latest / slotsPerRegion : rnd.nextInt(REGIONS);
            if (deregistered[r]) {
                continue;
            }
            int way = rnd.nextInt(3);
            if (viaCache) {
                cache.invalidate(region(dst, r).address(), region(dst, r).byteSize());
            } else if (way == 0) {
                mrs[r].revoke();
            } else {
                mrs[r].close();
            }
            deregistered[r] = true;
            snapshots[r] = Arena.ofAuto().allocate(region(dst, r).byteSize());
            snapshots[r].copyFrom(region(dst, r));
            if (!postersDone.get()) {
                racedDeregistrations++;
            }
        }
        for (Thread t : threads) {
            t.join(60_000);
            if (t.isAlive()) {
                throw fail(t.getName() + " is stuck");
            }
        }
        if (failure.get() != null) {
            throw new AssertionError("concurrent fuzz (seed " + seed + ", round " + rounds + ")", failure.get());
        }
        check(dst, posted, completed, deregistered, snapshots);
        // Teardown of the round.
        idA.disconnect();
        WorkCompletion[] rest = {new WorkCompletion()};
        while (cqA.poll(rest) + cqB.poll(rest) > 0) {
            // flushes
        }
        idA.destroyQp();
        idB.destroyQp();
        idA.close();
        idB.close();
        for (int r = 0; r < REGIONS; r++) {
            if (viaCache) {
                cached[r].close();
            } else if (!mrs[r].isDestroyed()) {
                mrs[r].close();
            }
        }
        cache.invalidate(dst.address(), dst.byteSize());
        srcMr.close();
        arena.close();
    }

    private MemorySegment region(MemorySegment dst, int r) {
        return dst.asSlice((long) r * slotsPerRegion * slot, (long) slotsPerRegion * slot);
    }

    private void check(MemorySegment dst, Map<Long, Write> posted, Map<Long, WcStatus> completed, boolean[] deregistered,
                       MemorySegment[] snapshots) {
        if (!completed.keySet().equals(posted.keySet())) {
            throw fail("posted " + posted.size() + " writes, " + completed.size() + " completed, not the same ones");
        }
        int errors = 0;
        for (Write w : posted.values()) {
            WcStatus s = completed.get(w.wrId());
            MemorySegment bytes = dst.asSlice((long) w.slot() * slot, slot);
            switch (s) {
                case SUCCESS -> {
                    for (long i = 0; i < slot; i++) {
                        if (bytes.get(ValueLayout.JAVA_BYTE, i) != w.pattern()) {
                            throw fail("write " + w + " succeeded but byte " + i + " of its slot is "
                                    + bytes.get(ValueLayout.JAVA_BYTE, i));
                        }
                    }
                }
                case REM_ACCESS_ERR, WR_FLUSH_ERR -> {
                    if (s == WcStatus.REM_ACCESS_ERR) {
                        errors++;
                        if (!deregistered[w.region()]) {
                            throw fail("write " + w + " failed with REM_ACCESS_ERR into a region nobody deregistered");
                        }
                    }
                    if (bytes.mismatch(MemorySegment.ofArray(new byte[slot])) != -1) {
                        throw fail("write " + w + " failed (" + s + ") but moved bytes into its slot");
                    }
                }
                default -> throw fail("write " + w + " completed with " + s);
            }
        }
        if (errors > 1) {
            throw fail(errors + " writes failed with an error that is not a flush: after the first, the QP flushes");
        }
        for (int r = 0; r < REGIONS; r++) {
            if (snapshots[r] != null && region(dst, r).mismatch(snapshots[r]) != -1) {
                throw fail("region " + r + " changed after its deregistration returned");
            }
        }
    }

    int rounds() {
        return rounds;
    }

    int racedDeregistrations() {
        return racedDeregistrations;
    }

    @Override
    public void close() {
        cache.close();
        listener.close();
        cqA.close();
        cqB.close();
        pdA.close();
        pdB.close();
        devA.close();
        devB.close();
    }
}
