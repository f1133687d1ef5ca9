package io.regmem.registration.ucx;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.shm.SameHostLane;
import io.regmem.registration.spi.Guard;
import io.regmem.registration.spi.ProgressFaults;
import io.regmem.registration.spi.MrContext;
import java.util.concurrent.locks.ReentrantLock;
import org.agrona.concurrent.IdleStrategy;

/**
 * How a UCX device's workers and QPs are progressed: a CQ's poll progresses the workers its QPs use
 * ({@link #channels}), the progress thread every worker and QP ({@link #qps}), a waiter its device's
 * ({@link #all}) and this JVM's other devices' ({@link #others}), never waiting for a lock another
 * thread holds except the worker lock of its own device; and a deregistration's wait for what may
 * still touch the region ({@link #quiesce}).
 */
final class UcxProgress {
    private static final System.Logger LOG = System.getLogger("io.regmem.registration.ucx");
    private final UcxDevice device;
    /** Progress rounds of {@link #channels} (worker lock). */
    private long round;

    UcxProgress(UcxDevice device) {
        this.device = device;
    }

    /** How long the progress thread finds nothing to do before it may sleep on the lanes. */
    static final long SLEEP_AFTER_NANOS = 50_000L;

    /**
     * The progress thread's loop ({@link UcxDevice#startProgressThread}): rounds of {@link #qps()}
     * until the device closes, idling as {@code idle} says, and sleeping on the lanes ({@code sleep})
     * when only lanes need it; no failure ends it.
     */
    void loop(IdleStrategy idle, boolean sleep, int number) {
        long[] words = new long[SameHostLane.SLEEP_WORDS];
        long lastWork = System.nanoTime();
        while (!device.stopping()) {
            try {
                int work = qps(); // (a QP whose progress fails errs alone)
                if (work > 0) {
                    lastWork = System.nanoTime();
                    idle.idle(work);
                } else if (sleep && System.nanoTime() - lastWork > SLEEP_AFTER_NANOS && onlyLanes()) {
                    device.lanes.sleepUntilWoken(words);
                    lastWork = System.nanoTime();
                } else {
                    idle.idle(0);
                }
            } catch (RuntimeException | Error e) {
                if (device.stopping()) {
                    return; // (the device closed under the round: ENODEV)
                }
                ProgressFaults.survived("regmem ucx: the progress thread of device " + number, e);
            }
        }
    }

    /**
     * True if every connection of the device runs over the same-host lane (whose peers wake a sleeping
     * progress thread), no UCX channel is open and no UD QP waits for datagrams: nothing waits for
     * this thread's progress but the lanes.
     */
    private boolean onlyLanes() {
        if (device.channels().length > 0 || device.datagrams != null && device.datagrams.active()) {
            return false;
        }
        for (UcxQp qp : device.qps()) {
            if (qp.lane == null && !qp.destroyed && qp.ctx.isReady()) {
                return false;
            }
        }
        return true;
    }

    /** One round of the progress thread: the worker, then every QP whose lock is free; the work done. */
    int qps() {
        int work = 0;
        device.lockWorker();
        try {
            work += allWorkers();
        } finally {
            device.workerLock.unlock();
        }
        work += device.lanes.progress();
        work += device.datagrams == null ? 0 : device.datagrams.progress();
        for (UcxQp qp : device.qps()) {
            ReentrantLock l = qp.ctx.lock();
            try {
                if (!qp.destroyed && qp.lane == null && (qp.receiveWork() || qp.sendWork()) && l.tryLock()) {
                    try {
                        if (!qp.destroyed) {
                            work += qp.inbox().isEmpty() ? 0 : 1;
                            qp.deliver();
                            work += qp.busy() ? 1 : 0;
                            qp.reap();
                        }
                    } finally {
                        l.unlock();
                    }
                }
            } catch (RuntimeException | Error e) { // (this QP's fault only: the others are served on)
                work += fault(qp, e);
            }
        }
        return work;
    }

    /**
     * A failure of {@code qp}'s progress that no rule describes: the QP moves to the error state with
     * {@code QP_FATAL} (its requests flush at its next progress), said once in the log. Never throws.
     */
    static int fault(UcxQp qp, Throwable e) {
        try {
            if (!qp.ctx.isError()) {
                LOG.log(System.Logger.Level.WARNING, "regmem ucx: " + qp.ctx.name() + ": its progress failed; the QP moves "
                        + "to the error state", e);
            }
            qp.ctx.fatal("its progress failed: " + e);
        } catch (RuntimeException | Error again) {
            // nothing more can be done for this QP here
        }
        return 1;
    }

    /**
     * Progresses the workers of this JVM's other open devices whose lock is free (an in-process peer
     * answers only when its worker progresses); true if any did something. Takes no lock it waits for.
     */
    boolean others() {
        boolean busy = false;
        for (UcxDevice other : UcxAm.devices()) {
            if (other != null && other != device && other.workerLock.tryLock()) {
                try {
                    busy |= !other.isClosed() && other.worker.progress();
                } finally {
                    other.workerLock.unlock();
                }
            }
        }
        return busy;
    }

    /**
     * Progresses the workers the QPs of {@code a} and {@code b} use, each once (a channel is shared by
     * the QPs to one peer process), up to 64 rounds each while they report work; the main worker if
     * there are no QPs. A CQ's poll: workers none of its QPs use are left to their own CQs.
     */
    void channels(UcxQp[] a, UcxQp[] b) {
        device.lockWorker();
        try {
            if (a.length == 0 && b.length == 0) {
                progressWorker(device.worker);
                return;
            }
            long r = ++round;
            for (UcxQp qp : a) {
                if (qp.lane == null) { // (a QP on the same-host lane uses no worker)
                    progressOnce(qp.channel, r);
                }
            }
            for (UcxQp qp : b) {
                if (qp.lane == null) {
                    progressOnce(qp.channel, r);
                }
            }
        } finally {
            device.workerLock.unlock();
        }
    }

    private static void progressOnce(UcxChannel c, long round) {
        if (c.round != round) {
            c.round = round;
            progressWorker(c.worker);
        }
    }

    /** Progresses {@code w} while it reports work, at most 64 rounds (worker lock held); the rounds that did something. */
    private static int progressWorker(UcpWorker w) {
        int i = 0;
        while (i < 64 && w.progress()) {
            i++;
        }
        return i;
    }

    /** Progresses every worker of the device (worker lock held); the rounds that did something. */
    private int allWorkers() {
        int work = progressWorker(device.worker);
        for (UcxChannel c : device.channels.all()) {
            work += progressWorker(c.worker);
        }
        return work;
    }

    /**
     * Before the worker is destroyed: progresses it until it has been idle for 16 calls in a row (at
     * most 200 ms), so that the connection-level messages UCX still exchanges for closed endpoints
     * are done. UCX 1.13 aborts the process in {@code ucp_worker_destroy} when such a message is
     * still pending on a TCP endpoint ({@code ucp_request.c:684: got REP message}). Worker lock held.
     */
    void settle() {
        long deadline = System.nanoTime() + 200_000_000L;
        int idle = 0;
        while (idle < 16 && System.nanoTime() < deadline) {
            boolean busy = allWorkers() > 0;
            busy |= others(); // a peer in this JVM must answer too
            idle = busy ? 0 : idle + 1;
        }
    }

    /**
     * Progresses the worker if its lock is free (another thread holds it: that one is progressing
     * it); never waits. For a peer's progress driven from this JVM's other threads.
     */
    void tryWorker() {
        if (!device.workerLock.tryLock()) {
            return;
        }
        try {
            if (!device.isClosed()) {
                progressWorker(device.worker);
            }
        } finally {
            device.workerLock.unlock();
        }
    }

    /** Progresses every worker of the device until it has nothing more to do now (at most 64 rounds each). */
    void all() {
        device.lockWorker();
        try {
            allWorkers();
        } finally {
            device.workerLock.unlock();
        }
    }

    /**
     * {@link #quiesce()}, and for a region being deregistered ({@code region} non-null) also waits for
     * the answers of READs and atomics started before that will be placed into it: the target has
     * executed them, so they complete, placed, rather than fail. The wait ends when each is answered,
     * or fails as unanswered after the device's answer timeout (RETRY_EXC_ERR: it may have executed).
     */
    void quiesce(Guard region) {
        device.grace.synchronize(); // every request that resolved its entries before the keys went invalid is started now
        long start = System.nanoTime();
        long deadline = start + 10_000_000_000L;
        // Answers are waited for as long as a request may wait for its answer (its own timeout fails it
        // then), plus a second; with no answer timeout, 10 s. After that the region goes, and an answer
        // still to come is refused at its placement (the request completes with an error).
        long answersUntil = start + 1_000_000_000L + (device.answerTimeoutNanos > 0 ? device.answerTimeoutNanos : 9_000_000_000L);
        for (UcxQp qp : device.qps()) {
            while (true) {
                ReentrantLock l = qp.ctx.lock();
                boolean usesMemory = true;
                if (l.tryLock()) {
                    try {
                        qp.reap();
                        usesMemory = qp.usesLocalMemory();
                        if (!usesMemory && (region == null || !qp.answersInto(region))) {
                            break;
                        }
                        if (!usesMemory && System.nanoTime() > answersUntil) {
                            // Given up: under the QP's lock, where every placement runs, so no answer is
                            // being placed now and none will be (refused: the request fails).
                            qp.sends.abandonAnswersInto(region);
                            break;
                        }
                    } finally {
                        l.unlock();
                    }
                } else if (!qp.busy()) {
                    break; // (another thread runs the QP: nothing started is left to look at)
                }
                all();
                UcxCq.progressPeer(qp); // an in-process peer answers only when its worker progresses
                if (usesMemory && System.nanoTime() > deadline) {
                    throw new RdmaException(Errno.EIO, qp.ctx.name() + ": ucx requests still running after 10 s");
                }
            }
        }
        if (region instanceof MrContext mr) {
            device.lanes.quiesce(mr); // the lane's answers into it and verdicts on pulls from it
        }
    }
}
