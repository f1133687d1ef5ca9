package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.core.internal.FutexWaiter;
import static java.lang.foreign.ValueLayout.JAVA_INT;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.VarHandle;
import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.concurrent.locks.LockSupport;

/**
 * A completion channel ({@code ibv_create_comp_channel}): where completion events of the CQs created
 * on it arrive, so that a thread can sleep until work arrives instead of polling. A CQ made with
 * {@link RdmaDevice#createCq(int, CompletionChannel)} and armed with
 * {@link CompletionQueue#requestNotify(boolean)} raises one event on this channel for its next
 * completion (or, solicited only, its next solicited receive or failed completion); {@link #getEvent}
 * waits for an event and returns its CQ, which the caller then polls (until it is empty, having armed
 * it again first: completions that arrive between the last poll and the arming raise no event) and
 * acknowledges ({@link CompletionQueue#ackEvents(int)}, before the CQ can be destroyed), as
 * {@code ibv_get_cq_event} and {@code ibv_ack_cq_events}.
 *
 * <p>Completions are made by a provider's progress, and a sleeping thread progresses nothing: on a
 * device opened with {@code progressThread=true} its thread makes them (and a peer's poll makes a
 * soft receive's), and {@link #getEvent} sleeps until the event wakes it. Without one, the waiting
 * thread progresses the channel's armed CQs itself between sleeps, which grow from microseconds to
 * {@link #MAX_SLEEP_NANOS}; once they have (about a millisecond with nothing to do), where every such
 * CQ's connections can wake it (shm's: a futex word in the connection's shared memory that the peer
 * wakes once it published work into it), it sleeps until a peer does, an event is raised, or
 * {@link #MAX_SLEEP_NANOS} pass; otherwise (datagrams, ucx, soft) it goes on sleeping in slices of
 * {@link #MAX_SLEEP_NANOS}. It does not spin, and an event is seen within about that much (at once
 * where a peer wakes it). The short sleeps come first because a thread woken by its own timer wakes on
 * its own CPU, where one woken by a peer that goes on spinning may be put on that peer's CPU.
 * {@link #pollEvent()} takes an event without waiting, for a loop that watches several channels.
 * {@link #wakeup()} makes a waiter return early, as {@code Selector.wakeup} does (an event loop
 * that sleeps on the channel and must also run tasks other threads hand it).
 *
 * <p>Threads: any number of threads may wait on a channel; each event goes to one of them.
 * Raising an event takes the channel's monitor for a moment and unparks its waiters; raising none
 * costs a CQ one volatile read per completion. Allocates nothing in steady state.
 */
public final class CompletionChannel extends CountedResource implements AutoCloseable {
    /** The longest a waiter on a device without a progress thread sleeps between progressing its CQs. */
    public static final long MAX_SLEEP_NANOS = 1_000_000L;
    /** Waiters that hold a slot (and are woken by an event rather than by their sleep's end). */
    private static final int SLOTS = 16;

    /** Events not yet taken, oldest first: the CQ of each (under its own monitor). */
    private final ArrayDeque<CompletionQueue> events = new ArrayDeque<>();
    /** The threads waiting in {@link #getEvent}: each claims a slot, and a raised event unparks them. */
    private final AtomicReferenceArray<Thread> waiters = new AtomicReferenceArray<>(SLOTS);
    /** A {@link #wakeup()} not yet consumed by a waiter. */
    private volatile boolean wakeupPending;
    /** The CQs created on this channel (copy-on-write under the device lock): what a waiter progresses. */
    private volatile CompletionQueue[] cqs = new CompletionQueue[0];
    /** A futex word: 1 while a waiter may sleep on its CQs' connections; a raised event or wakeup clears and wakes it. */
    private final MemorySegment wakeWord = Arena.ofAuto().allocate(4, 4);
    private static final VarHandle WORD = JAVA_INT.varHandle();
    /** Each waiter slot's futex wait (made on its first sleep; used by the slot's holder only). */
    private final Sleeper[] sleepers = new Sleeper[SLOTS];

    CompletionChannel(RdmaDevice device) {
        super(device, "CompletionChannel", null);
    }

    /** A CQ was created on this channel (device lock held). */
    void attach(CompletionQueue cq) {
        CompletionQueue[] c = Arrays.copyOf(cqs, cqs.length + 1);
        c[c.length - 1] = cq;
        cqs = c;
        retain();
    }

    /**
     * Destroys a CQ of this channel unless an event got for it is unacknowledged (device lock held),
     * atomically with the hand-out of its events: under the events' monitor the CQ is checked and
     * marked destroyed and its events not yet taken are dropped, so no {@link #pollEvent} hands out an
     * event of a CQ whose close succeeded, and none is raised for it afterwards.
     */
    void destroy(CompletionQueue cq, Runnable checkAndMarkDestroyed) {
        synchronized (events) {
            checkAndMarkDestroyed.run();
            events.removeIf(e -> e == cq);
        }
    }

    /** A CQ of this channel was destroyed (device lock held): waiters stop progressing it. */
    void detach(CompletionQueue cq) {
        CompletionQueue[] c = cqs;
        CompletionQueue[] next = new CompletionQueue[c.length - 1];
        for (int i = 0, j = 0; i < c.length; i++) {
            if (c[i] != cq) {
                next[j++] = c[i];
            }
        }
        cqs = next;
        release();
    }

    /** An armed CQ of this channel raised its event (from the thread that added the completion). */
    void raise(CompletionQueue cq) {
        synchronized (events) {
            if (cq.isDestroyed()) {
                return; // a completion raced the close: the destroyed CQ raises nothing
            }
            events.addLast(cq);
        }
        wakeAll();
    }

    private void wakeAll() {
        for (int i = 0; i < waiters.length(); i++) {
            Thread t = waiters.get(i);
            if (t != null) {
                LockSupport.unpark(t);
            }
        }
        // The event or wakeup is stored before the look at the word, as a sleeper stores the word
        // before its last look for them: one of the two sees the other.
        VarHandle.fullFence();
        if ((int) WORD.getVolatile(wakeWord, 0L) == 1 && WORD.compareAndSet(wakeWord, 0L, 1, 0)) {
            FutexWaiter.wake(wakeWord.address());
        }
    }

    /**
     * Makes {@link #getEvent} return null at once, as if its time had run out: the thread waiting in
     * it now, or, if none waits, the next call (once; wakeups do not add up), as
     * {@code Selector.wakeup}. For a thread that sleeps on this channel and has other work that other
     * threads hand it. Takes no lock; allocates nothing.
     */
    public void wakeup() {
        wakeupPending = true;
        wakeAll();
    }

    /**
     * Takes an event without waiting ({@code ibv_get_cq_event} on a non-blocking channel): the CQ that
     * raised it, or null if none is waiting. Progresses nothing.
     *
     * @throws RdmaException {@link Errno#EBADF} if the channel was destroyed
     */
    public CompletionQueue pollEvent() {
        checkAlive("pollEvent");
        return take();
    }

    /** The oldest event's CQ, counted as delivered to it, or null. */
    private CompletionQueue take() {
        synchronized (events) {
            CompletionQueue cq = events.pollFirst();
            if (cq != null) {
                cq.delivered();
            }
            return cq;
        }
    }

    /**
     * Waits for an event ({@code ibv_get_cq_event}) and returns the CQ that raised it; the event must
     * be acknowledged on that CQ ({@link CompletionQueue#ackEvents(int)}). Waits at most
     * {@code timeout}; null if no event came by then, or once {@link #wakeup()} was called. The
     * thread parks ({@code LockSupport}) and the event unparks it; allocates nothing.
     *
     * @throws RdmaException {@link Errno#EBADF} if the channel was destroyed (also while waiting);
     *                       {@link Errno#EINTR} if the thread was interrupted (its interrupt status
     *                       stays set); {@link Errno#EINVAL} for a negative timeout or a null unit
     */
    public CompletionQueue getEvent(long timeout, TimeUnit unit) {
        checkAlive("getEvent");
        if (timeout < 0 || unit == null) {
            throw new RdmaException(Errno.EINVAL, this + ": getEvent needs a timeout of at least 0 and a unit, got "
                    + timeout + " " + unit);
        }
        long deadline = System.nanoTime() + unit.toNanos(timeout);
        Thread me = Thread.currentThread();
        int slot = -1;
        for (int i = 0; i < waiters.length() && slot < 0; i++) {
            if (waiters.get(i) == null && waiters.compareAndSet(i, null, me)) {
                slot = i; // before the first look: an event raised from now on unparks this thread
            }
        }
        try {
            long sleep = 1_000L;
            boolean self = needsProgress();
            for (int round = 0; ; round++) {
                CompletionQueue cq = take();
                if (cq != null) {
                    return cq;
                }
                if (isDestroyed()) {
                    throw new RdmaException(Errno.EBADF, this + ": destroyed while getEvent waited");
                }
                if (me.isInterrupted()) {
                    throw new RdmaException(Errno.EINTR, this + ": getEvent was interrupted");
                }
                if (wakeupPending) {
                    wakeupPending = false;
                    return null; // woken up (wakeup): as a timeout
                }
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    return null;
                }
                if (round == 0 && self) {
                    progressArmed(); // what is queued may complete at once
                    continue;
                }
                if (self && slot >= 0 && sleep >= MAX_SLEEP_NANOS && sleepOnConnections(slot, Math.min(left, MAX_SLEEP_NANOS))) {
                    progressArmed();
                    continue;
                }
                // Without a slot (more than 16 waiters) a thread sleeps in slices and looks again.
                LockSupport.parkNanos(this, self || slot < 0 ? Math.min(left, sleep) : left);
                sleep = Math.min(MAX_SLEEP_NANOS, sleep * 2);
                if (self) {
                    progressArmed();
                }
            }
        } finally {
            if (slot >= 0) {
                waiters.set(slot, null);
            }
        }
    }

    /**
     * Sleeps until a peer publishes work into a connection of the channel's armed CQs that make no
     * completions on their own (their sleeping words, {@link CompletionQueue#sleeping}), an event is
     * raised or a wakeup comes (the channel's own word), or {@code nanos} pass; with a last look for
     * work after the words are set, and none if that look found some. False, at once, if some such CQ
     * cannot be woken so (the caller sleeps a slice instead).
     */
    private boolean sleepOnConnections(int slot, long nanos) {
        if (!FutexWaiter.AVAILABLE) {
            return false;
        }
        Sleeper s = sleepers[slot];
        if (s == null) {
            s = new Sleeper();
            sleepers[slot] = s;
        }
        long[] words = s.words;
        words[0] = wakeWord.address();
        int n = 1;
        CompletionQueue[] c = cqs;
        int set = 0;
        try {
            for (; set < c.length; set++) {
                CompletionQueue cq = c[set];
                if (cq.isArmed() && !cq.progressesOnItsOwn()) {
                    int k = cq.sleeping(words, n);
                    if (k < 0) {
                        return false; // (it cleared its own words)
                    }
                    n += k;
                }
            }
            WORD.setVolatile(wakeWord, 0L, 1);
            progressArmed(); // the last look: what a peer publishes from now on wakes the sleep
            if (pendingEvents() == 0 && !wakeupPending && !isDestroyed() && !Thread.currentThread().isInterrupted()) {
                s.sleeps++;
                s.waiter.await(words, n, nanos);
            }
            return true;
        } finally {
            for (int i = 0; i < set; i++) {
                CompletionQueue cq = c[i];
                if (!cq.progressesOnItsOwn()) {
                    cq.awake(); // (one armed meanwhile had none set: clearing is harmless)
                }
            }
        }
    }

    /** One waiter slot's futex wait and its words (the channel's own first, then its connections'). */
    private static final class Sleeper {
        final FutexWaiter waiter = new FutexWaiter();
        final long[] words = new long[FutexWaiter.MAX];
        /** Its sleeps (written by the slot's holder; read racily for diagnostics). */
        volatile long sleeps;
    }

    /**
     * What the channel's waiters did, for a person reading it: how many times they slept on their
     * connections' words and how many of those sleeps a peer's work, an event or a wakeup ended (the
     * rest ran their time out, or a word changed before the sleep began).
     */
    public String diagnostics() {
        long slept = 0;
        long woken = 0;
        for (int i = 0; i < sleepers.length; i++) {
            Sleeper s = sleepers[i];
            if (s != null) {
                slept += s.sleeps;
                woken += s.waiter.woken();
            }
        }
        return this + ": " + slept + " sleep(s) on its connections, " + woken + " woken";
    }

    /** Waits for an event without a time limit ({@link #getEvent(long, TimeUnit)}). */
    public CompletionQueue getEvent() {
        return getEvent(Long.MAX_VALUE / 4, TimeUnit.NANOSECONDS);
    }

    /** True if some CQ of this channel is on a device that makes no completions on its own. */
    private boolean needsProgress() {
        for (CompletionQueue cq : cqs) {
            if (!cq.progressesOnItsOwn()) {
                return true;
            }
        }
        return false;
    }

    /** Progresses the armed CQs of this channel whose device has no progress thread (no completion taken). */
    private void progressArmed() {
        for (CompletionQueue cq : cqs) {
            if (cq.isArmed() && !cq.progressesOnItsOwn() && !cq.isDestroyed()) {
                try {
                    cq.progressOnly();
                } catch (RdmaException destroyed) {
                    // destroyed meanwhile: its events went with it
                }
            }
        }
    }

    /** Events raised and not yet taken (progresses nothing). */
    public int pendingEvents() {
        synchronized (events) {
            return events.size();
        }
    }

    /**
     * Destroys the channel ({@code ibv_destroy_comp_channel}); waiters get {@link Errno#EBADF}.
     *
     * @throws RdmaException {@link Errno#EBUSY} while CQs created on it live (it stays usable);
     *                       {@link Errno#EBADF} if already destroyed
     */
    @Override
    public void close() {
        synchronized (device.lock) {
            destroyUnlessCounted("destroy", "completion queue(s) created on it", "destroy the CQs first");
        }
        wakeAll();
    }
}
