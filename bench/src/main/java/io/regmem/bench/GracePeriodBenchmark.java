package io.regmem.bench;

import io.regmem.registration.spi.GracePeriod;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.concurrent.locks.StampedLock;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Group;
import org.openjdk.jmh.annotations.GroupThreads;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * What the data path pays to be waited for by deregistration: a {@link GracePeriod} reader's
 * section (enter, check a registration, exit) beside the closest library structures, the read
 * side of a JDK {@link StampedLock} and of a {@link ReentrantReadWriteLock} (a deregistering
 * thread would take the write side to wait out copies in progress), on one thread and with two
 * readers on both cores. Also the writer's cost: one grace period with sixteen idle readers.
 * Run with {@code -prof gc}: 0 B/op.
 */
@State(Scope.Benchmark)
public class GracePeriodBenchmark extends BenchDefaults {
    private GracePeriod grace;
    private GracePeriod.Reader[] idle;
    private final StampedLock stamped = new StampedLock();
    private final ReentrantReadWriteLock rw = new ReentrantReadWriteLock();
    /** A registration's validity flag, as the data path checks it inside its section. */
    private volatile boolean valid = true;

    /** Each thread's own reader (one per QP executor in regmem). */
    @State(Scope.Thread)
    public static class MyReader {
        GracePeriod.Reader reader;

        /** Registers this thread's reader. */
        @Setup(Level.Trial)
        public void setUp(GracePeriodBenchmark b) {
            reader = b.grace.newReader();
        }

        /** Unregisters it. */
        @TearDown(Level.Trial)
        public void tearDown() {
            reader.close();
        }
    }

    /** The domain, with sixteen idle readers besides the benchmark's own. */
    @Setup(Level.Trial)
    public void setUp() {
        grace = new GracePeriod();
        idle = new GracePeriod.Reader[16];
        for (int i = 0; i < idle.length; i++) {
            idle[i] = grace.newReader();
        }
    }

    /** Unregisters the idle readers. */
    @TearDown(Level.Trial)
    public void tearDown() {
        for (GracePeriod.Reader r : idle) {
            r.close();
        }
    }

    /** A grace-period section around one validity check. */
    @Benchmark
    public boolean graceSection(MyReader r) {
        r.reader.enter();
        boolean ok = valid;
        r.reader.exit();
        return ok;
    }

    /** The same under a StampedLock read lock. */
    @Benchmark
    public boolean stampedReadLock() {
        long s = stamped.readLock();
        boolean ok = valid;
        stamped.unlockRead(s);
        return ok;
    }

    /** The same under a ReentrantReadWriteLock read lock. */
    @Benchmark
    public boolean rwReadLock() {
        rw.readLock().lock();
        boolean ok = valid;
        rw.readLock().unlock();
        return ok;
    }

    /** Two readers on both cores, each with its own reader. */
    @Benchmark
    @Group("graceTwoReaders")
    @GroupThreads(2)
    public boolean graceSectionTwoThreads(MyReader r) {
        return graceSection(r);
    }

    /** Two readers on both cores sharing one StampedLock. */
    @Benchmark
    @Group("stampedTwoReaders")
    @GroupThreads(2)
    public boolean stampedReadLockTwoThreads() {
        return stampedReadLock();
    }

    /** Two readers on both cores sharing one ReentrantReadWriteLock. */
    @Benchmark
    @Group("rwTwoReaders")
    @GroupThreads(2)
    public boolean rwReadLockTwoThreads() {
        return rwReadLock();
    }

    /** A writer's grace period with sixteen idle readers (what a deregistration adds when nothing copies). */
    @Benchmark
    public void synchronizeIdle() {
        grace.synchronize();
    }
}
