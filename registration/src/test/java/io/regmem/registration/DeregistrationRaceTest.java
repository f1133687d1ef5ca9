package io.regmem.registration;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.BufferPool;
import io.regmem.core.PooledBuffer;
import io.regmem.core.ScatterList;
import io.regmem.registration.cache.CachedRegion;
import io.regmem.registration.cache.RegistrationCache;
import io.regmem.registration.testkit.Loopback;
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Invariant 19, the guarantee of {@code ib_dereg_mr}: when a deregistration or an invalidation
 * returns, nothing touches the memory any more. A thread posts a chain of 24 RDMA WRITEs of 4 MiB
 * each into a region and polls; the test thread deregisters the region (each way regmem offers)
 * at a random moment while the chain is being copied, takes a snapshot of the region's memory the
 * moment the call returns, waits for the chain to end and compares: not one byte may have changed
 * after the call returned. Each way runs several rounds, and the test checks that some of them
 * really hit the middle of the chain.
 */
@ExtendWith(NoLeaks.class)
class DeregistrationRaceTest {
    private static final long SIZE = 4L << 20;
    private static final int CHAIN = 24;
    private static final int ROUNDS = 12;

    /**
     * What a round writes into and how it deregisters it: the address and rkey the chain writes
     * to, the memory compared afterwards (alive after the deregistration), the deregistration
     * (returns once the guarantee holds) and what releases the rest at the end of the round.
     */
    record Target(long address, int rkey, MemorySegment memory, Runnable deregister, Runnable release)
            implements AutoCloseable {
        @Override
        public void close() {
            release.run();
        }
    }

    interface TargetFactory {
        Target make(Loopback lb, MemorySegment memory);
    }

    @Test
    void memoryRegionClose() throws InterruptedException {
        race((lb, mem) -> {
            MemoryRegion mr = lb.pdB.register(mem, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
            return new Target(mr.address(), lb.key(mr), mem, mr::close, () -> { });
        });
    }

    @Test
    void memoryRegionRevoke() throws InterruptedException {
        race((lb, mem) -> {
            MemoryRegion mr = lb.pdB.register(mem, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
            return new Target(mr.address(), lb.key(mr), mem, mr::revoke, mr::close);
        });
    }

    @Test
    void registrationCacheInvalidate() throws InterruptedException {
        race((lb, mem) -> {
            RegistrationCache cache = RegistrationCache.of(lb.pdB);
            CachedRegion held = cache.get(mem, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
            return new Target(held.address(), lb.key(held.region()), mem, () -> cache.invalidate(mem.address(), mem.byteSize()),
                    () -> {
                        held.close();
                        cache.close();
                    });
        });
    }

    @Test
    void poolRegistrationClose() throws InterruptedException {
        race((lb, mem) -> {
            BufferPool pool = BufferPool.builder().name("race").largestClass(1 << 20).build();
            PoolRegistration reg = lb.pdB.register(pool, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
            PooledBuffer buffer = pool.allocate(SIZE);
            return new Target(buffer.address(), lb.qpA.importRemoteKey(reg.exportRemoteKey(buffer)), buffer.segment(),
                    reg::close, // deregisters every chunk of the pool
                    () -> {
                        buffer.close();
                        pool.close();
                    });
        });
    }

    /**
     * A pool's trim: the chunk's only buffer was freed, but a peer still writes through the chunk's
     * key (a late or hostile peer). The trim deregisters the chunk (waiting for the copy in flight)
     * before its memory is decommitted: the memory reads zeros when trim() returns (a copy still
     * running at the decommit would leave its bytes), and nothing lands in it afterwards.
     */
    @Test
    void poolTrim() throws InterruptedException {
        race((lb, mem) -> {
            BufferPool pool = BufferPool.builder().name("race-trim").chunkSize(2 * SIZE).largestClass(SIZE).noDecay()
                    .build();
            PoolRegistration reg = lb.pdB.register(pool, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
            PooledBuffer buffer = pool.allocate(SIZE);
            MemorySegment memory = buffer.segment(); // kept past the free: the pool's range stays mapped
            long address = buffer.address();
            int key = lb.qpA.importRemoteKey(reg.exportRemoteKey(buffer));
            buffer.close(); // every slot of the chunk idle: a trim takes it
            MemorySegment zeros = Arena.ofAuto().allocate(SIZE);
            return new Target(address, key, memory, () -> {
                assertThat(pool.trim()).isEqualTo(2 * SIZE);
                // decommitted only after the last copy through the key: not one byte of it is left
                assertThat(memory.mismatch(zeros)).as("bytes written after the memory was given back").isEqualTo(-1);
            }, () -> {
                reg.close();
                pool.close();
            });
        });
    }

    @Test
    void memoryWindowUnbind() throws InterruptedException {
        race((lb, mem) -> {
            MemoryRegion mr = lb.pdB.register(mem, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.MW_BIND);
            MemoryWindow mw = lb.pdB.allocMw();
            mw.bind(mr, mem.address(), SIZE, Access.REMOTE_WRITE);
            return new Target(mem.address(), lb.qpA.importRemoteKey(mw.exportRemoteKey()), mem, mw::unbind, () -> {
                mw.close();
                mr.close();
            });
        });
    }

    /** A type-2 window bound by a BIND_MW request, invalidated by B's LOCAL_INV: its completion is the deregistration. */
    @Test
    void typeTwoWindowLocalInvalidate() throws InterruptedException {
        race((lb, mem) -> {
            MemoryRegion mr = lb.pdB.register(mem, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.MW_BIND);
            MemoryWindow mw = lb.pdB.allocMw(MemoryWindow.Type.TYPE_2);
            int key = MemoryRegion.incRkey(mw.rkey());
            lb.qpB.postSend(new WorkRequest(1).wrId(7).signaled(true).bindMw(mw, key, mr, mem.address(), SIZE,
                    Access.REMOTE_WRITE));
            assertThat(lb.one(lb.cqB).status()).isEqualTo(WcStatus.SUCCESS);
            return new Target(mem.address(), lb.qpA.importRemoteKey(mw.exportRemoteKey()), mem, () -> {
                lb.qpB.postSend(new WorkRequest(1).wrId(8).signaled(true).opcode(Opcode.LOCAL_INV).invalidateRkey(key));
                WorkCompletion[] one = {new WorkCompletion()};
                long deadline = System.nanoTime() + 10_000_000_000L;
                while (lb.cqB.poll(one) == 0) {
                    assertThat(System.nanoTime()).as("the LOCAL_INV completes").isLessThan(deadline);
                }
                // SUCCESS, or flushed because a WRITE that arrived through the invalidated key already broke
                // B's QP (ucx: the NAKed error breaks both ends): a QP in the error state executes nothing more
                if (one[0].status() != WcStatus.SUCCESS) {
                    assertThat(one[0].status()).isEqualTo(WcStatus.WR_FLUSH_ERR);
                    assertThat(lb.qpB.state()).isEqualTo(QueuePair.State.ERROR);
                }
            }, () -> {
                mw.close();
                mr.close();
            });
        });
    }

    @Test
    void dmaUnmapUnderAFastRegRegion() throws InterruptedException {
        race(java.util.Map.of("maxFastRegPageListLen", "1024"), (lb, mem) -> {
            DmaMapping mapping = lb.devB.dmaMap(mem);
            MemoryRegion mr = lb.pdB.allocMr((int) (SIZE / 4096));
            ScatterList sg = new ScatterList().add(mem);
            assertThat(mr.mapSg(sg, 1, 0, 4096)).isEqualTo(1);
            int key = MemoryRegion.incRkey(mr.rkey());
            lb.qpB.postSend(new WorkRequest(1).wrId(5).signaled(true)
                    .regMr(mr, key, Access.mask(Access.LOCAL_WRITE, Access.REMOTE_WRITE)));
            assertThat(lb.one(lb.cqB).status()).isEqualTo(WcStatus.SUCCESS);
            return new Target(mr.address(), lb.key(mr), mem, mapping::close, mr::close);
        });
    }

    /**
     * The source side: the region the chain reads from is deregistered mid-chain, and the moment the
     * call returns its memory is overwritten with a marker (as a new owner would): no byte of the
     * marker may reach the target.
     */
    @Test
    void sourceRegionClose() throws InterruptedException {
        sourceRace((lb, arena) -> {
            MemorySegment src = arena.allocate(SIZE, 4096);
            MemoryRegion srcMr = lb.pdA.register(src, Access.LOCAL_WRITE);
            return new Source(src, srcMr, srcMr::close, () -> { });
        });
    }

    /**
     * The source side of a trim: the chain's WRITEs read from a pool chunk whose only buffer was
     * freed (a sender that posted from a buffer and freed it too early), the trim takes the chunk mid-chain,
     * and the moment it returns the range is written with a marker (as the next owner of the memory
     * would): no byte of the marker may reach the target, since the chunk's lkey died, and the
     * copies in flight ended, before its memory went.
     */
    @Test
    void poolTrimAsTheSource() throws InterruptedException {
        sourceRace((lb, arena) -> {
            BufferPool pool = BufferPool.builder().name("race-trim-source").chunkSize(2 * SIZE).largestClass(SIZE)
                    .noDecay().build();
            PoolRegistration reg = lb.pdA.register(pool, Access.LOCAL_WRITE);
            PooledBuffer buffer = pool.allocate(SIZE);
            MemorySegment src = buffer.segment(); // kept past the free: the pool's range stays mapped
            MemoryRegion srcMr = reg.region(buffer);
            buffer.close();
            return new Source(src, srcMr, () -> assertThat(pool.trim()).isEqualTo(2 * SIZE), () -> {
                reg.close();
                pool.close();
            });
        });
    }

    /** What a source-side round reads from, how it is deregistered, and what releases the rest. */
    record Source(MemorySegment memory, MemoryRegion region, Runnable deregister, Runnable release) {
    }

    interface SourceFactory {
        Source make(Loopback lb, Arena arena);
    }

    /**
     * Runs source-side rounds: a chain reads from a fresh source each round, deregistered mid-chain,
     * and the moment that returns the source is overwritten with a marker (as a new owner would): no
     * byte of the marker may reach the target.
     */
    private static void sourceRace(SourceFactory factory) throws InterruptedException {
        int midChain = 0;
        StringBuilder seen = new StringBuilder(); // writes completed per round, for a failure's message
        DelaySearch search = new DelaySearch(20_000_000); // where the deregistration falls, adapted round by round
        for (int round = 0; round < ROUNDS || (midChain == 0 && round < 10 * ROUNDS); round++) {
            try (Loopback lb = new Loopback(java.util.Map.of(), 64, new QpInitAttributes().maxSendWr(CHAIN + 8).maxSendSge(2),
                    new QpInitAttributes().maxSendWr(CHAIN + 8).maxSendSge(2));
                 Arena arena = Arena.ofShared()) {
                Source source = factory.make(lb, arena);
                MemorySegment src = source.memory();
                MemorySegment dst = arena.allocate(SIZE, 4096);
                dst.fill((byte) 0);
                MemoryRegion dstMr = lb.pdB.register(dst, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
                Target target = new Target(dstMr.address(), lb.key(dstMr), dst, source.deregister(), () -> { });
                Round r = new Round(lb, src, source.region(), target, round + 2);
                Thread poster = Thread.ofPlatform().name("poster").start(r);
                while (!r.posting) {
                    Thread.onSpinWait();
                }
                long delay = search.next();
                long until = System.nanoTime() + delay;
                while (System.nanoTime() < until) {
                    Thread.onSpinWait();
                }
                target.deregister().run();
                src.fill((byte) 0xEE); // the new owner's bytes
                poster.join(TimeUnit.SECONDS.toMillis(60));
                assertThat(r.failure.get()).isNull();
                long marker = 0xEEEEEEEEEEEEEEEEL;
                for (long i = 0; i < SIZE; i += 8) {
                    if (dst.get(ValueLayout.JAVA_LONG, i) == marker) {
                        throw new AssertionError("round " + round + ": the target got bytes written to the source after "
                                + "its deregistration returned, at offset " + i + " (" + r.succeeded + " writes completed)");
                    }
                }
                if (r.succeeded > 0 && r.succeeded < CHAIN) {
                    midChain++;
                }
                seen.append(r.succeeded).append('@').append(delay / 1000).append("us ");
                search.record(delay, r.succeeded);
                source.release().run();
            }
        }
        assertThat(midChain).as("rounds whose deregistration fell in the middle of the chain (writes completed "
                + "@ delay, per round: %s)", seen).isPositive();
    }

    /**
     * Where the rounds put the deregistration: a delay after the chain starts, looked for as a
     * bisection. A delay that came before the first write (none succeeded) is a lower bound, one
     * that came after the whole chain (all succeeded) an upper bound; while both are known and in
     * order the next delay is drawn between them, else from [0, bound), the bound halved after a
     * whole chain and doubled after none, so that the rounds find the middle of the chain whatever
     * this machine's speed (the first, unraced chain runs cold and overestimates it). A noisy
     * machine can put the bounds out of order: they are then forgotten and found again.
     */
    private static final class DelaySearch {
        private long bound;
        private long before = -1;
        private long after = Long.MAX_VALUE;

        DelaySearch(long bound) {
            this.bound = Math.max(1_000, bound);
        }

        long next() {
            if (before >= 0 && after != Long.MAX_VALUE && before < after) {
                return before + ThreadLocalRandom.current().nextLong(after - before + 1);
            }
            return ThreadLocalRandom.current().nextLong(bound);
        }

        void record(long delay, int succeeded) {
            if (succeeded >= CHAIN) {
                after = Math.min(after, delay);
                bound = Math.max(1_000, bound / 2);
            } else if (succeeded == 0) {
                before = Math.max(before, delay);
                bound = Math.min(1_000_000_000L, bound * 2);
            }
            if (before >= after) {
                before = -1;
                after = Long.MAX_VALUE;
            }
        }

        @Override
        public String toString() {
            return bound / 1000 + "us";
        }
    }

    /** Runs the rounds: chains into a fresh target each round, deregistered mid-chain. */
    private static void race(TargetFactory factory) throws InterruptedException {
        race(java.util.Map.of(), factory);
    }

    private static void race(java.util.Map<String, String> options, TargetFactory factory) throws InterruptedException {
        int midChain = 0;
        DelaySearch search = null;
        StringBuilder seen = new StringBuilder();
        for (int round = 0; round < ROUNDS || (midChain == 0 && round < 10 * ROUNDS); round++) {
            try (Loopback lb = new Loopback(options, 64, new QpInitAttributes().maxSendWr(CHAIN + 8).maxSendSge(2),
                    new QpInitAttributes().maxSendWr(CHAIN + 8).maxSendSge(2));
                 Arena arena = Arena.ofShared()) {
                MemorySegment src = arena.allocate(SIZE, 4096);
                MemorySegment dst = arena.allocate(SIZE, 4096);
                dst.fill((byte) 0);
                MemoryRegion srcMr = lb.pdA.register(src, Access.LOCAL_WRITE);
                try (Target target = factory.make(lb, dst)) {
                    if (round == 0) {
                        // A first chain, not raced, to learn how long a chain takes here.
                        long t0 = System.nanoTime();
                        assertThat(runChain(lb, src, srcMr, target, 1)).isEqualTo(CHAIN);
                        search = new DelaySearch(System.nanoTime() - t0);
                    }
                    Round r = new Round(lb, src, srcMr, target, round + 2);
                    Thread poster = Thread.ofPlatform().name("poster").start(r);
                    while (!r.posting) {
                        Thread.onSpinWait();
                    }
                    long delay = search.next();
                    long until = System.nanoTime() + delay;
                    while (System.nanoTime() < until) {
                        Thread.onSpinWait();
                    }
                    target.deregister().run();
                    MemorySegment after = Arena.ofAuto().allocate(SIZE);
                    after.copyFrom(target.memory()); // the moment the call returned
                    poster.join(TimeUnit.SECONDS.toMillis(60));
                    assertThat(poster.isAlive()).as("the chain ends").isFalse();
                    assertThat(r.failure.get()).isNull();
                    assertThat(target.memory().mismatch(after)).as("round %d: a byte changed after the deregistration "
                            + "returned (%d of %d writes completed)", round, r.succeeded, CHAIN).isEqualTo(-1);
                    if (r.succeeded > 0 && r.succeeded < CHAIN) {
                        midChain++;
                    }
                    seen.append(r.succeeded).append('@').append(delay / 1000).append("us ");
                    search.record(delay, r.succeeded);
                }
                if (!srcMr.isDestroyed()) {
                    srcMr.close();
                }
            }
        }
        assertThat(midChain).as("rounds whose deregistration fell in the middle of the chain (writes completed @ "
                + "delay, per round: %s)", seen).isPositive();
    }

    /** Posts the chain and polls its completions; counts the successes. */
    private static final class Round implements Runnable {
        final Loopback lb;
        final MemorySegment src;
        final MemoryRegion srcMr;
        final Target target;
        final int pattern;
        volatile boolean posting;
        volatile int succeeded;
        final AtomicReference<Throwable> failure = new AtomicReference<>();

        Round(Loopback lb, MemorySegment src, MemoryRegion srcMr, Target target, int pattern) {
            this.lb = lb;
            this.src = src;
            this.srcMr = srcMr;
            this.target = target;
            this.pattern = pattern;
        }

        @Override
        public void run() {
            try {
                posting = true;
                succeeded = runChain(lb, src, srcMr, target, pattern);
            } catch (Throwable e) {
                failure.set(e);
            }
        }
    }

    /**
     * Fills the source with a pattern that differs per WR of the chain, posts the chain (every WR
     * signaled) and polls until every completion is in; returns how many succeeded.
     */
    private static int runChain(Loopback lb, MemorySegment src, MemoryRegion srcMr, Target target, int pattern) {
        WorkRequest first = null;
        WorkRequest prev = null;
        for (int i = 0; i < CHAIN; i++) {
            // Each WR writes the source rotated by a different offset, so every WR changes the target.
            long shift = (long) i * 4096;
            WorkRequest wr = new WorkRequest(2).wrId(i).opcode(Opcode.RDMA_WRITE).signaled(true)
                    .addSge(src.address() + shift, SIZE - shift, srcMr.lkey())
                    .remote(target.address(), target.rkey());
            if (shift > 0) {
                wr.addSge(src.address(), shift, srcMr.lkey());
            }
            if (prev == null) {
                first = wr;
            } else {
                prev.next(wr);
            }
            prev = wr;
        }
        for (long i = 0; i < SIZE; i += 8) {
            src.set(ValueLayout.JAVA_LONG, i, pattern * 0x9E3779B97F4A7C15L + i);
        }
        lb.qpA.postSend(first);
        int ok = 0;
        int got = 0;
        while (got < CHAIN) {
            int n = lb.cqA.poll(lb.wcs);
            for (int k = 0; k < n; k++) {
                if (lb.wcs[k].status() == WcStatus.SUCCESS) {
                    ok++;
                }
            }
            got += n;
        }
        return ok;
    }
}
