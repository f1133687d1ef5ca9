package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.spi.CqContext;
import io.regmem.registration.spi.ProviderCq;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A completion queue ({@code ib_create_cq}): where work completions of the queue pairs that use it
 * arrive. It counts the QPs that use it; destroying it while any does fails with {@link Errno#EBUSY}.
 *
 * <p>Threads: completions are added by whichever thread executes a QP that completes here (the
 * provider holds that QP's lock) and taken by pollers, one at a time. While one QP uses the CQ (the
 * usual layout), that QP's lock orders everything: adding takes no further lock, and a poll takes
 * the QP's lock once for the provider's progress and the taking. Once a second QP shares the CQ,
 * adders take a producer lock of the CQ and pollers a poll lock of its own, and the provider
 * progresses before the poll lock is taken. Entries are published with release stores and taken
 * with acquire loads; CQs of independent connections share no lock.
 */
public final class CompletionQueue extends CountedResource implements AutoCloseable {
    private static final VarHandle HEAD;
    private static final VarHandle TAIL;
    private static final VarHandle ARMED;
    private static final VarHandle FAILED = MethodHandles.arrayElementVarHandle(long[].class);

    static {
        try {
            MethodHandles.Lookup l = MethodHandles.lookup();
            HEAD = l.findVarHandle(CompletionQueue.class, "head", long.class);
            TAIL = l.findVarHandle(CompletionQueue.class, "tail", long.class);
            ARMED = l.findVarHandle(CompletionQueue.class, "armed", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private final int depth;
    /**
     * Preallocated entries; head counts polls (poll lock), tail pushes (producer side). A power of two
     * at least {@code depth} long, so that a position is found with a mask, not a division.
     */
    private final WorkCompletion[] ring;
    private final int mask;
    /** Orders pollers, and the slot accounting of the queues completing here, once the CQ is shared. */
    private final ReentrantLock pollLock = new ReentrantLock();
    /** Orders adders once more than one QP uses the CQ. */
    private final ReentrantLock sharedProducer = new ReentrantLock();
    /** What orders adders: the sole user's QP lock, {@link #sharedProducer}, or null while unused. */
    private volatile ReentrantLock producer;
    /** QPs using the CQ (device lock). */
    private int users;
    private volatile long head;
    private volatile long tail;
    /** Failed completions polled, by status ordinal: plain counts under the consumer lock ({@link #take}). */
    private final long[] failedByStatus = new long[WcStatus.values().length];
    private volatile boolean overrun;
    /** The completion channel its events go to, or null. */
    private final CompletionChannel channel;
    /** Not armed, armed for the next completion, or for the next solicited or failed one ({@link #requestNotify}). */
    private volatile int armed;
    private static final int ARMED_NEXT = 1;
    private static final int ARMED_SOLICITED = 2;
    /** Events got from the channel for this CQ, and those acknowledged (under this CQ's monitor). */
    private long eventsGot;
    private long eventsAcked;
    /** What the provider sees of this CQ. */
    final Context context = new Context();
    /** The provider's half (set once, at creation). */
    ProviderCq provider;

    CompletionQueue(RdmaDevice device, int depth, CompletionChannel channel) {
        super(device, "CompletionQueue", null);
        this.depth = depth;
        this.channel = channel;
        this.ring = new WorkCompletion[Integer.highestOneBit(Math.max(1, depth - 1)) << 1];
        this.mask = ring.length - 1;
        for (int i = 0; i < ring.length; i++) {
            ring[i] = new WorkCompletion();
        }
    }

    /**
     * A QP starts completing here (device lock held, before it can complete anything). The first
     * user's lock orders the adders; a second user moves every adder to the shared producer lock,
     * switching while it holds the first user's lock, so no add of the first user is in progress.
     */
    void attach(QueuePair qp) {
        ReentrantLock current = producer;
        if (users == 0 || current == null) {
            producer = qp.lock;
        } else if (current != sharedProducer) {
            current.lock();
            try {
                producer = sharedProducer;
            } finally {
                current.unlock();
            }
        }
        users++;
    }

    /** A QP no longer completes here (device lock held; it is destroyed and its provider stopped). */
    void detach(QueuePair qp) {
        if (--users == 0) {
            producer = null;
        }
    }

    /**
     * Progresses the work that completes on this CQ (on soft: executes the queue pairs whose
     * requests complete here, and nothing else), then moves up to {@code out.length} completions
     * into the caller's array ({@code ib_poll_cq}). Each completion polled frees its request's slot
     * in its queue, and the slots of the unsignaled requests before it in the same send queue
     * ({@link QueuePair#outstandingSends()}). Allocates nothing.
     *
     * @return how many entries of {@code out} were filled, oldest first
     * @throws RdmaException {@link Errno#EBADF} if the CQ was destroyed
     */
    public int poll(WorkCompletion[] out) {
        checkAlive("poll");
        if (tail == head && provider.idle()) {
            return 0; // nothing here and nothing to progress: no lock taken
        }
        return progressAndTake(out);
    }

    /**
     * Progresses the provider, then takes completions into {@code out} (none if null): under the sole
     * user's QP lock while one QP uses this CQ (its lock orders the pollers too, and the provider
     * progresses the QP under the same acquisition, {@link ProviderCq#progress}), else progressing
     * first and taking under the poll lock.
     */
    private int progressAndTake(WorkCompletion[] out) {
        ReentrantLock sole = producer;
        if (sole != null && sole != sharedProducer) {
            lockSpinning(sole);
            try {
                if (producer == sole) {
                    provider.progress();
                    return out == null ? 0 : take(out);
                }
            } finally {
                sole.unlock();
            }
        }
        provider.progress();
        if (out == null) {
            return 0;
        }
        pollLock.lock();
        try {
            return take(out);
        } finally {
            pollLock.unlock();
        }
    }

    /**
     * Progresses the provider as a poll does, taking no completion: for a channel's waiter on a
     * device that makes no completions on its own.
     */
    void progressOnly() {
        checkAlive("progress");
        if (!provider.idle()) { // (an idle provider has nothing to do: no lock taken, as in poll)
            progressAndTake(null);
        }
    }

    /** True if its device makes completions without anybody polling (a progress thread). */
    boolean progressesOnItsOwn() {
        return provider.progressesOnItsOwn();
    }

    /**
     * Sets the sleeping words of this CQ's connections for a channel's waiter ({@link ProviderCq#sleeping}):
     * how many it wrote into {@code words} from {@code from}, or -1 (then the waiter sleeps in slices).
     */
    int sleeping(long[] words, int from) {
        return isDestroyed() ? 0 : provider.sleeping(words, from);
    }

    /** Clears what {@link #sleeping} set. */
    void awake() {
        provider.awake();
    }

    /** True while armed ({@link #requestNotify}). */
    boolean isArmed() {
        return armed != 0;
    }

    /**
     * Arms the CQ ({@code ibv_req_notify_cq}): its next completion raises one event on its completion
     * channel, or, with {@code solicitedOnly}, its next receive of a solicited SEND
     * ({@link WorkRequest#solicited(boolean)}) or next failed completion. Completions already in the
     * CQ raise none: arm, poll until empty, then wait. Arming an armed CQ keeps the broader of the two
     * settings (verbs: a request for the next completion overrides a solicited-only one). One event
     * per arming: arm again after each.
     *
     * @throws RdmaException {@link Errno#EINVAL} if the CQ was created without a completion channel;
     *                       {@link Errno#EBADF} if it was destroyed
     */
    public void requestNotify(boolean solicitedOnly) {
        checkAlive("requestNotify");
        if (channel == null) {
            throw new RdmaException(Errno.EINVAL, this + ": requestNotify on a CQ created without a completion channel "
                    + "(RdmaDevice.createCq(depth, channel))");
        }
        if (solicitedOnly) {
            ARMED.compareAndSet(this, 0, ARMED_SOLICITED);
        } else {
            armed = ARMED_NEXT;
        }
    }

    /** The completion channel this CQ's events go to, or null. */
    public CompletionChannel channel() {
        return channel;
    }

    /** An event of this CQ was taken from its channel (channel lock held). */
    synchronized void delivered() {
        eventsGot++;
    }

    /**
     * Acknowledges {@code n} events got for this CQ ({@code ibv_ack_cq_events}); the CQ cannot be
     * destroyed while any event got for it is not acknowledged.
     *
     * @throws RdmaException {@link Errno#EINVAL} if {@code n} is negative or more than the events got
     *                       and not yet acknowledged (nothing is acknowledged then)
     */
    public synchronized void ackEvents(int n) {
        if (n < 0 || n > eventsGot - eventsAcked) {
            throw new RdmaException(Errno.EINVAL, this + ": ackEvents(" + n + ") with " + (eventsGot - eventsAcked)
                    + " event(s) got and not acknowledged");
        }
        eventsAcked += n;
    }

    /** Events got for this CQ and not acknowledged. */
    public synchronized long unackedEvents() {
        return eventsGot - eventsAcked;
    }

    /** Acknowledges every event got (the device's forced close). */
    synchronized void ackAll() {
        eventsAcked = eventsGot;
    }

    /**
     * Takes a QP's execution lock for a poll: its holder is another thread executing the QP (its
     * peer delivering a message, or a poll of the peer's CQ), usually for microseconds, so spin on it
     * a while before parking, which costs tens of microseconds to wake from.
     */
    private static void lockSpinning(ReentrantLock l) {
        for (int i = 0; i < 1024; i++) {
            if (l.tryLock()) {
                return;
            }
            Thread.onSpinWait();
        }
        l.lock();
    }

    /**
     * Moves completions into {@code out}, frees their entries, then retires their queues' slots (the
     * consumer lock held). The order matters: a slot retired is a receive or send that may be posted
     * again at once, by any thread, and complete here; its entry must be free by then, or a CQ as deep
     * as its queues' slots (an SRQ's {@code maxWr}) could find itself full (see SrqCqDepthTest).
     */
    private int take(WorkCompletion[] out) {
        int n = 0;
        long h = head;
        long t = tail;
        while (n < out.length && h != t) {
            WorkCompletion wc = out[n++];
            wc.copyFrom(ring[(int) h & mask]);
            if (wc.status != WcStatus.SUCCESS) {
                FAILED.setOpaque(failedByStatus, wc.status.ordinal(), failedByStatus[wc.status.ordinal()] + 1);
            }
            h++;
        }
        HEAD.setRelease(this, h);
        for (int i = 0; i < n; i++) {
            // Polling frees the request's queue slot (and those of the unsignaled ones before it).
            out[i].qp.retire(out[i].fromRecvQueue, out[i].queueSeq);
        }
        return n;
    }

    /**
     * The lock every change of this CQ's consumer side and of the slot accounting of the queues
     * completing here holds: the sole user's QP lock, or the poll lock once the CQ is shared.
     */
    private ReentrantLock consumerLock() {
        ReentrantLock p = producer;
        return p != null && p != sharedProducer ? p : pollLock;
    }

    /** Retires up to {@code seq} in a queue completing here, under the poll lock (a completion lost to an overrun). */
    void retire(WorkQueue q, long seq) {
        ReentrantLock l = consumerLock();
        l.lock();
        try {
            q.retire(seq);
        } finally {
            l.unlock();
        }
    }

    /** Settles a queue completing here, under the poll lock (the error state's flush). */
    void settle(WorkQueue q) {
        ReentrantLock l = consumerLock();
        l.lock();
        try {
            q.settle();
        } finally {
            l.unlock();
        }
    }

    /**
     * Adds a completion for {@code qp}, whose lock the caller holds; false when the CQ is full (an
     * overrun: the caller moves the QP to the error state).
     */
    boolean push(QueuePair qp, boolean recv, long seq, long wrId, WcStatus status, Opcode op, long bytes,
                 boolean withImm, int imm, boolean withInv, int invRkey, boolean solicited, int srcQp, AhAttributes source) {
        assert qp.lock.isHeldByCurrentThread() : qp + ": a provider completed a request without holding the QP's lock";
        ReentrantLock p = producer;
        boolean added;
        if (p == qp.lock) { // the sole user: its lock, which the caller holds, orders every add
            added = add(qp, recv, seq, wrId, status, op, bytes, withImm, imm, withInv, invRkey, srcQp, source);
        } else {
            sharedProducer.lock();
            try {
                added = add(qp, recv, seq, wrId, status, op, bytes, withImm, imm, withInv, invRkey, srcQp, source);
            } finally {
                sharedProducer.unlock();
            }
        }
        int a = armed;
        if (added && a != 0 && (a == ARMED_NEXT || solicited || status != WcStatus.SUCCESS)
                && ARMED.compareAndSet(this, a, 0)) {
            channel.raise(this); // after the completion is published: the woken poller finds it
        }
        return added;
    }

    private boolean add(QueuePair qp, boolean recv, long seq, long wrId, WcStatus status, Opcode op, long bytes,
                        boolean withImm, int imm, boolean withInv, int invRkey, int srcQp, AhAttributes source) {
        long t = tail;
        if (t - head == depth) {
            if (!overrun) {
                overrun = true;
                device.raiseAsync(AsyncEvent.Type.CQ_ERR, this, this + " overran: a completion of " + qp
                        + " found it full (depth " + depth + ") and was lost; poll faster or make it deeper");
            }
            return false;
        }
        ring[(int) t & mask].fill(qp, recv, seq, wrId, status, op, bytes, withImm, imm, withInv, invRkey, srcQp, source);
        TAIL.setRelease(this, t + 1);
        return true;
    }

    /** True once a completion was lost because the CQ was full (the QP then went to the error state). */
    public boolean overrun() {
        return overrun;
    }

    /** Completions waiting to be polled (progresses nothing). */
    public int pending() {
        return (int) (tail - head);
    }

    /** Entries the queue holds. */
    public int depth() {
        return depth;
    }

    /**
     * Destroys the CQ ({@code ib_destroy_cq}).
     *
     * @throws RdmaException {@link Errno#EBUSY} while queue pairs use it, or while events got for it
     *                       are not acknowledged (the CQ stays usable); {@link Errno#EBADF} if
     *                       already destroyed
     */
    @Override
    public void close() {
        close(false);
    }

    /** Destroys the CQ; {@code force} (the device's forced close) first acknowledges every event got. */
    void close(boolean force) {
        synchronized (device.lock) {
            Runnable destroy = () -> {
                if (force) {
                    ackAll();
                }
                checkAndMarkDestroyed();
                device.counters.retire(this); // (device lock: no poller runs on a destroyed CQ)
            };
            if (channel != null) {
                channel.destroy(this, destroy); // atomic with the channel's hand-out of this CQ's events
            } else {
                destroy.run();
            }
            provider.destroy();
            if (channel != null) {
                channel.detach(this);
            }
        }
    }

    /** The close's checks, then the mark; throws (changing nothing) if the CQ cannot be destroyed. */
    private void checkAndMarkDestroyed() {
        long unacked = unackedEvents();
        if (unacked > 0 && !isDestroyed()) {
            throw new RdmaException(Errno.EBUSY, this + ": cannot destroy with " + unacked
                    + " completion event(s) got and not acknowledged; ackEvents first");
        }
        destroyUnlessCounted("destroy", "queue pair role(s) using it", "destroy the QPs first");
    }

    /** Completions polled from this CQ since it was created (every status). Any thread; a recent value. */
    public long completionsPolled() {
        return head;
    }

    /**
     * Completions polled from this CQ with {@code status} ({@link WcStatus#SUCCESS}: those that are not
     * errors). Any thread; a recent value.
     */
    public long completionsPolled(WcStatus status) {
        if (status == WcStatus.SUCCESS) {
            return head - failedPolled();
        }
        return (long) FAILED.getOpaque(failedByStatus, status.ordinal());
    }

    /** Completions polled from this CQ with any status but {@link WcStatus#SUCCESS}. */
    long failedPolled() {
        long failed = 0;
        for (int i = 0; i < failedByStatus.length; i++) {
            failed += (long) FAILED.getOpaque(failedByStatus, i); // (SUCCESS's slot stays 0)
        }
        return failed;
    }

    /** The CQ as its provider sees it. */
    final class Context extends ProviderState implements CqContext {
    }
}
