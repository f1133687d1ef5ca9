package io.regmem.registration.spi;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import org.agrona.collections.ArrayUtil;

/**
 * Grace periods between the data path, which reaches registered memory without a lock, and the
 * threads that deregister it: the guarantee of {@code ib_dereg_mr} ("when it returns, no access
 * through the registration is in progress and none will start"), built as quiescent-state
 * reclamation in the manner of RCU.
 *
 * <h2>Protocol</h2>
 * A <b>reader</b> is an execution context of the data path (a soft queue pair's executor, a
 * provider's progress thread). It brackets every stretch of work that touches registered memory
 * with {@link Reader#enter()} and {@link Reader#exit()}, and after {@code enter()} checks that every
 * registration it is about to use is still valid. A <b>writer</b> first makes a registration invalid
 * (a volatile store), then calls {@link #synchronize()}, which returns once every reader that was
 * inside a section when the call began has left it. A reader that enters later reads the
 * invalidation in its checks, so nothing touches the memory once {@code synchronize()} returns.
 *
 * <pre>
 *   writer:  valid = false ──► epoch++ (= E) ──► wait until every reader's mark is 0 or >= E
 *   reader:  mark = epoch ──► check valid ──► copy ──► mark = 0
 * </pre>
 *
 * <p>Why it holds: the reader's mark store and its validity load, and the writer's validity store
 * and its mark load, are volatile accesses, so they fall in one total order. If the writer reads a
 * reader's mark as 0, the reader's next mark store comes after that read, hence after the
 * invalidation, and its check sees it. If it reads a mark below E, the reader entered before the
 * writer's epoch and is waited out. A mark of E or more was stored after the epoch moved on, so
 * that reader's check sees the invalidation too and it is not waited for: a writer never waits for
 * a reader that started after it (no writer starvation by a busy data path).
 *
 * <h2>Costs</h2>
 * A reader pays one volatile store to enter (a fenced store on x86), one read of the epoch (a
 * read-mostly line, written once per grace period) and one release store to leave: no atomic
 * read-modify-write, no shared line written, no allocation. A writer pays one atomic increment and
 * a scan of the readers; it waits only while a reader is inside a section that began before it, so
 * readers keep their sections short (the soft provider copies at most {@code 1 MiB} per section).
 * Readers are registered and unregistered rarely (with queue pairs), by copy-on-write.
 *
 * <p>A reader must never call {@link #synchronize()} inside its own section (it would wait for
 * itself), and must never block inside a section.
 */
public final class GracePeriod {
    private static final VarHandle MARK;

    static {
        try {
            MARK = MethodHandles.lookup().findVarHandle(ReaderMark.class, "mark", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** The current epoch; starts at 1 so that a mark of 0 means "outside". */
    private final AtomicLong epoch = new AtomicLong(1);
    private final Object registry = new Object();
    private volatile Reader[] readers = new Reader[0];
    /** Grace periods completed, and how many of them had to wait for a reader (diagnostics). */
    private final AtomicLong periods = new AtomicLong();
    private final AtomicLong waited = new AtomicLong();

    /** A new, empty domain. */
    public GracePeriod() {
    }

    /** Registers a new reader of this domain; {@link Reader#close()} unregisters it. */
    public Reader newReader() {
        Reader r = new Reader(this);
        synchronized (registry) {
            readers = ArrayUtil.add(readers, r);
        }
        return r;
    }

    private void remove(Reader r) {
        synchronized (registry) {
            readers = ArrayUtil.remove(readers, r); // (the same array if r is not in it)
        }
    }

    /**
     * Waits until every reader that was inside a section when this call began has left it. Call it
     * after making a registration invalid; when it returns, no reader uses the registration any
     * more and none will. Spins briefly, then yields, then parks in short intervals (a reader's
     * section is short, but its thread may be descheduled).
     *
     * @throws IllegalStateException if the calling thread is inside a section of a reader of this
     *                               domain (it would wait for itself)
     */
    public void synchronize() {
        long target = epoch.incrementAndGet();
        periods.incrementAndGet();
        boolean hadToWait = false;
        for (Reader r : readers) {
            int spins = 0;
            long mark;
            while ((mark = (long) MARK.getVolatile(r)) != 0 && mark < target) {
                if (r.owner == Thread.currentThread()) {
                    throw new IllegalStateException("GracePeriod.synchronize inside a reader's own section: it would "
                            + "wait for itself");
                }
                hadToWait = true;
                backOff(spins++);
            }
        }
        if (hadToWait) {
            waited.incrementAndGet();
        }
    }

    private static void backOff(int spins) {
        if (spins < 1024) {
            Thread.onSpinWait(); // a section in progress on another core ends within microseconds
        } else if (spins < 2048) {
            Thread.yield(); // its thread may be waiting for this core
        } else {
            // Descheduled: check again every ~20 us. (A growing park overshoots the section's end by
            // as much as its last interval, and the waiter may hold up a whole connection meanwhile.)
            LockSupport.parkNanos(20_000);
        }
    }

    /** Grace periods completed since the domain was made. */
    public long periods() {
        return periods.get();
    }

    /** Grace periods that found a reader inside an older section and waited for it. */
    public long periodsThatWaited() {
        return waited.get();
    }

    /** Readers registered now. */
    public int readerCount() {
        return readers.length;
    }

    /**
     * One execution context of the data path. Its sections do not nest and are entered by one
     * thread at a time (the context's own lock or thread serializes them). Its mark, which every
     * section stores twice, has 128 bytes of padding each side (see the package documentation of
     * {@code io.regmem.registration}): readers are made one after another, and two of them on one
     * cache line, entered by two threads, would take the line from each other on every section.
     */
    public static final class Reader extends ReaderPadRight implements AutoCloseable {
        private final GracePeriod domain;

        private Reader(GracePeriod domain) {
            this.domain = domain;
        }

        /**
         * Enters a section: from here until {@link #exit()}, a writer that invalidates a registration
         * waits for this reader before its {@link GracePeriod#synchronize()} returns. Check the
         * registrations to be used after this call, not before.
         */
        public void enter() {
            owner = Thread.currentThread();
            MARK.setVolatile(this, domain.epoch.get());
        }

        /** Leaves the section: no registration checked inside it may be used any more. */
        public void exit() {
            owner = null;
            MARK.setRelease(this, 0L);
        }

        /** True inside a section. */
        public boolean inSection() {
            return (long) MARK.getVolatile(this) != 0;
        }

        /** Unregisters the reader; it must be outside a section. Idempotent. */
        @Override
        public void close() {
            domain.remove(this);
        }
    }
}

/** The padding before a reader's mark ({@link GracePeriod.Reader}). */
abstract class ReaderPadLeft {
    long p00, p01, p02, p03, p04, p05, p06, p07, p08, p09, p0a, p0b, p0c, p0d, p0e, p0f;
}

/** A reader's mark: 0 outside a section; inside, the epoch read on entry. Through {@code GracePeriod.MARK}. */
abstract class ReaderMark extends ReaderPadLeft {
    volatile long mark;
    /** The thread inside the section (for the self-wait check); plain, only compared to the caller. On the mark's line. */
    Thread owner;
}

/** The padding after a reader's mark. */
abstract class ReaderPadRight extends ReaderMark {
    long p10, p11, p12, p13, p14, p15, p16, p17, p18, p19, p1a, p1b, p1c, p1d, p1e, p1f;
}
