package io.regmem.netty;

import io.netty.channel.IoEvent;
import io.netty.channel.IoHandle;
import io.netty.channel.IoHandler;
import io.netty.channel.IoHandlerContext;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.IoOps;
import io.netty.channel.IoRegistration;
import io.netty.util.concurrent.ThreadAwareExecutor;
import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.core.internal.Libc;
import io.regmem.core.internal.Prctl;
import io.regmem.registration.CompletionChannel;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.WorkCompletion;
import java.lang.foreign.Arena;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A Netty 4.2 {@link IoHandler} over a regmem device: what one event loop of a
 * {@code MultiThreadIoEventLoopGroup} runs. It owns one completion queue, on a completion channel of its
 * own, where every connection of its channels completes. A run polls the CQ and hands each completion to
 * its connection (received bytes go up the channel's pipeline, finished sends give their buffers back, a
 * flushed one closes the channel); with nothing to do it polls on for {@code busyPollNanos} (or for
 * {@code chunkPollNanos} if longer, while a chunk of one of its connections is under way) and then
 * sleeps on the completion channel until a completion, Netty's next scheduled task, or a
 * {@link #wakeup()} from another thread. Make event loops with {@link #newFactory(RegmemTransport)}.
 *
 * <p>Threads: everything but {@link #wakeup()} runs on the event loop's thread.
 */
public final class RegmemIoHandler implements IoHandler {
    private static final System.Logger LOG = System.getLogger("io.regmem.netty");
    private static final int BATCH = 64;
    /** Empty polls between two clock reads while the loop spins. */
    private static final int CLOCK_TURNS = 16;
    private static final long UNKNOWN = Long.MIN_VALUE;
    private final RegmemTransport transport;
    private final ThreadAwareExecutor executor;
    private final CompletionChannel channel;
    private final CompletionQueue cq;
    private final WorkCompletion[] wcs = new WorkCompletion[BATCH];
    private final Set<Registration> registrations = new LinkedHashSet<>();
    /** Connections by slot (a completion's work-request id carries its slot in its upper half). */
    private Connection[] slots = new Connection[16];
    private int[] free = new int[16];
    private int frees;
    private int used;
    /** CQ entries the connections here may fill at once (their receives and sends). */
    private int reserved;
    private final List<Connection> touched = new ArrayList<>();
    /** When the loop last found work (its first clock read after it), or {@link #UNKNOWN} until the next clock read. */
    private long lastWork = System.nanoTime();
    private long clock = lastWork;
    /** Chunks of this loop's connections under way: its own that peers read (DONE awaited), and peers' it reads. */
    private int chunks;
    /** True while the loop sleeps on its completion channel (written by the loop only; read by tests). */
    private volatile boolean asleep;
    /** Counts {@link #wakeup()}s from other threads (tasks for the loop), so that a spinning loop sees them. */
    private final AtomicInteger wakeups = new AtomicInteger();
    private boolean destroyed;

    private RegmemIoHandler(RegmemTransport transport, ThreadAwareExecutor executor) {
        this.transport = transport;
        this.executor = Objects.requireNonNull(executor, "executor");
        transport.loopMade();
        CompletionChannel ch = null;
        try {
            ch = transport.device().createCompletionChannel();
            this.cq = transport.device().createCq(transport.cqEntries, ch);
        } catch (RuntimeException e) {
            if (ch != null) {
                ch.close();
            }
            transport.loopDestroyed();
            throw e;
        }
        this.channel = ch;
        for (int i = 0; i < BATCH; i++) {
            wcs[i] = new WorkCompletion();
        }
        for (int i = free.length - 1; i >= 0; i--) {
            free[frees++] = i;
        }
    }

    /** A factory of handlers on {@code transport}: give it to {@code MultiThreadIoEventLoopGroup}. */
    public static IoHandlerFactory newFactory(RegmemTransport transport) {
        Objects.requireNonNull(transport, "transport");
        return executor -> new RegmemIoHandler(transport, executor);
    }

    RegmemTransport transport() {
        return transport;
    }

    CompletionQueue cq() {
        return cq;
    }

    boolean inLoop() {
        return executor.isExecutorThread(Thread.currentThread());
    }

    /**
     * Gives {@code c} a slot and reserves its CQ entries ({@code entries}: its receives and sends).
     *
     * @throws RdmaException {@link Errno#ENOSPC} if the CQ has no room for them (too many connections on
     *                       this event loop: give the transport more {@code cqEntries} or the group more loops)
     */
    int attach(Connection c, int entries) {
        if (destroyed) {
            throw new RdmaException(Errno.EBADF, this + ": the event loop is shutting down");
        }
        if (reserved + entries > transport.cqEntries) {
            throw new RdmaException(Errno.ENOSPC, this + ": the event loop's CQ (" + transport.cqEntries + " entries) has "
                    + (transport.cqEntries - reserved) + " left, a connection needs " + entries
                    + ": give the transport more cqEntries or the group more event loops");
        }
        if (frees == 0) {
            int n = slots.length;
            slots = Arrays.copyOf(slots, n * 2);
            free = Arrays.copyOf(free, n * 2);
            for (int i = 2 * n - 1; i >= n; i--) {
                free[frees++] = i;
            }
        }
        int slot = free[--frees];
        slots[slot] = c;
        reserved += entries;
        used++;
        return slot;
    }

    /** Frees the slot of {@code c}, which has nothing outstanding on the CQ any more. */
    void detach(Connection c, int slot, int entries) {
        if (slots[slot] == c) {
            slots[slot] = null;
            free[frees++] = slot;
            reserved -= entries;
            used--;
        }
    }

    /**
     * One turn of the loop. Nothing escapes it (Netty's loop would end with it, and every channel on it):
     * a failure outside any one connection's completions (its CQ or completion channel, say) is logged
     * and the loop pauses a second before its next turn, as Netty's own IoHandlers do.
     */
    @Override
    public int run(IoHandlerContext context) {
        try {
            return turn(context);
        } catch (Throwable t) {
            LOG.log(System.Logger.Level.WARNING, () -> this + ": a turn of the event loop failed; it goes on in a second", t);
            try {
                Thread.sleep(1000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return 0;
        }
    }

    private int turn(IoHandlerContext context) {
        long now = System.nanoTime();
        clock = now;
        if (lastWork == UNKNOWN) {
            lastWork = now; // (the first clock read after work)
        }
        int work = poll();
        if (work > 0) {
            return worked(context, now, work);
        }
        if (!context.canBlock()) {
            return 0;
        }
        long window = idleWindow();
        if (window > 0 && now - lastWork < window) {
            work = spin(context);
            if (work != 0) {
                return Math.max(0, work);
            }
            now = clock;
        }
        cq.requestNotify(false); // (then look once more: what completed before the arming raises nothing)
        work = poll();
        if (work == 0) {
            asleep = true;
            try {
                if (channel.getEvent(Math.max(0, context.delayNanos(now)), TimeUnit.NANOSECONDS) != null) {
                    cq.ackEvents(1);
                }
            } catch (RdmaException e) { // interrupted (the group shuts down): Netty's loop goes on to see it
                if (e.errno() != Errno.EINTR) {
                    throw e;
                }
                Thread.interrupted();
            } finally {
                asleep = false;
            }
            work = poll();
        }
        lastWork = System.nanoTime();
        clock = lastWork;
        return work;
    }

    /**
     * Polls until a poll finds work (its count), a task comes from another thread or a scheduled one
     * is due (-1: Netty's loop runs them), or {@code busy} nanoseconds have gone since the last work
     * (0: the loop sleeps). It stays here rather than going back to Netty's loop after each empty poll:
     * that loop reads the clock up to twice a turn when tasks are scheduled, and so would lengthen the
     * time a completion waits to be seen. The clock is read every {@link #CLOCK_TURNS}th turn only.
     */
    private int spin(IoHandlerContext context) {
        int wakes = wakeups.get(); // (read after canBlock() found no task: a later one changes it)
        boolean report = context.shouldReportActiveIoTime();
        for (int turn = 1; ; turn++) {
            Thread.onSpinWait();
            if (wakeups.get() != wakes) {
                return -1;
            }
            long start = report ? System.nanoTime() : 0;
            int work = poll();
            if (work > 0) {
                return worked(context, start, work);
            }
            if (turn % CLOCK_TURNS == 0) {
                long now = System.nanoTime();
                clock = now;
                long window = idleWindow();
                if (window != Long.MAX_VALUE && now - lastWork >= window) {
                    return 0;
                }
                if (context.delayNanos(now) <= 0 || !context.canBlock()) {
                    return -1;
                }
            }
        }
    }

    /**
     * How long the loop polls on after its last work before it sleeps: {@code busyPollNanos}, or
     * {@code chunkPollNanos} if longer while a chunk of one of its connections is under way.
     */
    private long idleWindow() {
        long busy = transport.busyPollNanos;
        return chunks > 0 ? Math.max(busy, transport.chunkPollNanos) : busy;
    }

    /**
     * Chunks of one of this loop's connections started ({@code delta} > 0: this side announced one,
     * or the peer did) or ended (< 0: answered, read, or dropped with the connection).
     */
    void chunks(int delta) {
        chunks += delta;
    }

    /** Chunks of this loop's connections under way (event loop only). */
    int chunksUnderWay() {
        return chunks;
    }

    /** True while the loop sleeps on its completion channel (any thread; a moment's view). */
    boolean asleep() {
        return asleep;
    }

    /** A poll that started at {@code start} found {@code work}: reported to Netty if it asks, the last work now. */
    private int worked(IoHandlerContext context, long start, int work) {
        if (context.shouldReportActiveIoTime()) {
            context.reportActiveIoTime(System.nanoTime() - start); // (Netty's ioRatio weighs its tasks against this)
        }
        lastWork = UNKNOWN; // (set by the next clock read: none here, after the work and before the next poll)
        return work;
    }

    /**
     * The event loop's clock: {@link System#nanoTime()} as read at the start of its current turn, or
     * while it polled for work, at most {@link #CLOCK_TURNS} empty polls before the work it hands out now.
     */
    long clock() {
        return clock;
    }

    /** Polls the CQ until it is empty (a few batches at most), handing each completion to its connection. */
    private int poll() {
        int total = 0;
        for (int round = 0; round < 16; round++) {
            int n = cq.poll(wcs);
            for (int i = 0; i < n; i++) {
                WorkCompletion wc = wcs[i];
                int slot = (int) (wc.wrId() >>> 32);
                Connection c = slot < slots.length ? slots[slot] : null;
                if (c == null) {
                    LOG.log(System.Logger.Level.WARNING, () -> this + ": a completion for no connection: " + wc);
                    continue;
                }
                if (!c.touched) {
                    c.touched = true;
                    touched.add(c);
                }
                try {
                    c.completed(wc);
                } catch (Throwable t) { // (a thread of Netty's: nothing escapes a run; the failure ends its connection)
                    failed(c, t);
                }
            }
            total += n;
            if (n < wcs.length) {
                break;
            }
        }
        if (!touched.isEmpty()) {
            for (int i = 0; i < touched.size(); i++) {
                Connection c = touched.get(i);
                c.touched = false;
                try {
                    c.batchDone();
                } catch (Throwable t) {
                    failed(c, t);
                }
            }
            touched.clear();
        }
        return total;
    }

    @Override
    public void wakeup() {
        if (!inLoop()) {
            wakeups.incrementAndGet(); // (a loop spinning in run() goes back to Netty's, which runs the task)
            channel.wakeup();
        }
    }

    /** Handling {@code c}'s completions threw {@code t}: its channel hears it and closes (logged if that fails too). */
    private static void failed(Connection c, Throwable t) {
        try {
            c.failed(t);
        } catch (Throwable again) {
            again.addSuppressed(t);
            LOG.log(System.Logger.Level.WARNING, () -> c + ": handling a completion failed, and so did ending the connection", again);
        }
    }

    /**
     * On the loop's thread, before its first turn: the thread's timer slack
     * ({@link RegmemTransport.Builder#timerSlackNanos}), so that the short sleeps of an idle loop are
     * about as short as asked. A kernel that refuses leaves the thread as it was (logged).
     */
    @Override
    public void initialize() {
        long slack = transport.timerSlackNanos;
        if (slack > 0) {
            try (Arena a = Arena.ofConfined()) {
                int r = Prctl.prctl(a.allocate(Libc.CAPTURE), Prctl.PR_SET_TIMERSLACK, slack);
                if (r < 0) {
                    LOG.log(System.Logger.Level.INFO, () -> this + ": PR_SET_TIMERSLACK " + slack + " refused, errno " + -r);
                }
            } catch (RuntimeException | Error e) {
                LOG.log(System.Logger.Level.INFO, () -> this + ": the timer slack could not be set", e);
            }
        }
    }

    @Override
    public void prepareToDestroy() {
        for (Registration r : new ArrayList<>(registrations)) {
            r.handle.close();
        }
    }

    /**
     * Ends every connection still here (each drains its QP: what it posted completes, flushed) and
     * reaps their completions for up to 5 s; then destroys what is left, the CQ and the channel.
     */
    @Override
    public void destroy() {
        destroyed = true;
        for (Connection c : slots) {
            if (c != null) {
                c.abort();
            }
        }
        long deadline = System.nanoTime() + 5_000_000_000L;
        while (used > 0 && System.nanoTime() < deadline) {
            if (poll() == 0) {
                Thread.onSpinWait();
            }
        }
        try {
            for (Connection c : slots) {
                if (c != null) {
                    c.destroyNow();
                }
            }
            cq.ackEvents((int) cq.unackedEvents());
            cq.close();
            channel.close();
        } finally {
            transport.loopDestroyed(); // (whatever failed above is Netty's to log; the transport can close)
        }
    }

    @Override
    public IoRegistration register(IoHandle handle) {
        if (!(handle instanceof RegmemIoHandle h)) {
            throw new IllegalArgumentException("IoHandle of type " + handle.getClass().getName() + " not supported by "
                    + "RegmemIoHandler (a RegmemSocketChannel's or RegmemServerSocketChannel's)");
        }
        Registration r = new Registration(h);
        registrations.add(r);
        h.registered();
        return r;
    }

    @Override
    public boolean isCompatible(Class<? extends IoHandle> handleType) {
        return RegmemIoHandle.class.isAssignableFrom(handleType);
    }

    @Override
    public String toString() {
        return "RegmemIoHandler[" + transport.device() + ", " + used + " connection(s)]";
    }

    /** What a channel's unsafe is to this handler. */
    interface RegmemIoHandle extends IoHandle {
        /** Closes the channel now (the event loop shuts down). */
        @Override
        void close();

        @Override
        default void handle(IoRegistration registration, IoEvent ioEvent) {
            // Completions come through Connection, not as IoEvents.
        }
    }

    private final class Registration implements IoRegistration {
        private final AtomicBoolean canceled = new AtomicBoolean();
        final RegmemIoHandle handle;

        Registration(RegmemIoHandle handle) {
            this.handle = handle;
        }

        @Override
        @SuppressWarnings("unchecked")
        public <T> T attachment() {
            return (T) RegmemIoHandler.this;
        }

        @Override
        public long submit(IoOps ops) {
            throw new UnsupportedOperationException("RegmemIoHandler takes no IoOps: a channel's connection posts its own work");
        }

        @Override
        public boolean isValid() {
            return !canceled.get();
        }

        @Override
        public boolean cancel() {
            if (!canceled.compareAndSet(false, true)) {
                return false;
            }
            if (inLoop()) {
                cancel0();
            } else {
                executor.execute(this::cancel0);
            }
            return true;
        }

        private void cancel0() {
            if (registrations.remove(this)) {
                handle.unregistered();
            }
        }
    }
}
