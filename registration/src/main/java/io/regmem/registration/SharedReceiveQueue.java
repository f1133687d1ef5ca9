package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A shared receive queue ({@code ibv_srq}): one receive queue serving every queue pair created with
 * it ({@link QpInitAttributes#srq}), so a server with many connections posts its receives once, here,
 * instead of per connection. Created by {@link ProtectionDomain#createSrq}; it holds a reference on its
 * PD, and each QP using it holds one on it.
 *
 * <p><b>Consumption.</b> A message that consumes a receive at any of its QPs takes the oldest receive
 * posted here; its completion goes to that QP's receive CQ and names that QP
 * ({@link WorkCompletion#qp()}). Receives are taken in posting order; their completions may reach the
 * CQs in another order (different QPs complete independently). A slot is freed when its completion is
 * polled, whichever order that happens in, so {@link #postRecv} accepts at most
 * {@link #maxWr()} {@code - outstandingRecvs()} more.
 *
 * <p><b>Errors.</b> A QP moving to the error state flushes only the receive it had taken and not yet
 * completed (with {@link WcStatus#WR_FLUSH_ERR} on its CQ); the receives still queued here stay for
 * the other QPs. The QP then raises {@link AsyncEvent.Type#QP_LAST_WQE_REACHED}.
 *
 * <p><b>Limit.</b> {@link #armLimit(int)} ({@code ibv_modify_srq} with {@code IBV_SRQ_LIMIT}) arms a
 * low-water mark: once a receive is taken and fewer than the limit remain queued, the device raises
 * {@link AsyncEvent.Type#SRQ_LIMIT_REACHED} for this SRQ, once, and the limit returns to 0 (disarmed)
 * until armed again.
 *
 * <p><b>Threads.</b> Any thread may post; posting, taking and freeing slots hold this queue's own
 * lock briefly, so QPs on different threads share it safely.
 */
public final class SharedReceiveQueue extends CountedResource implements AutoCloseable {
    private final ProtectionDomain pd;
    private final int maxWr;
    private final int maxSge;
    private final ReentrantLock lock = new ReentrantLock();
    private final Wqe[] slots;
    /** Free slot numbers (a stack of {@code free} of them). */
    private final int[] freeSlots;
    private int free;
    /** Posted, not yet taken slot numbers, oldest first: a ring of {@code queued} from {@code first}. */
    private final int[] queue;
    private int first;
    private int queued;
    private int limit;
    private long taken;

    SharedReceiveQueue(ProtectionDomain pd, int maxWr, int maxSge) {
        super(pd.device, "SharedReceiveQueue", pd.owner());
        this.pd = pd;
        this.maxWr = maxWr;
        this.maxSge = maxSge;
        slots = new Wqe[maxWr];
        freeSlots = new int[maxWr];
        queue = new int[maxWr];
        for (int i = 0; i < maxWr; i++) {
            slots[i] = new Wqe(maxSge);
            slots[i].seq = i;
            freeSlots[i] = maxWr - 1 - i;
        }
        free = maxWr;
    }

    /**
     * Posts a chain of receive work requests ({@code ibv_post_srq_recv}): all of it or nothing, as
     * {@link QueuePair#postRecv}.
     *
     * @throws RdmaException {@link Errno#EINVAL} naming the bad request's index (more SGEs than
     *                       {@link #maxSge()}, a negative or wrapping SGE, over 2 GiB); {@link Errno#ENOMEM}
     *                       when the chain does not fit; {@link Errno#EBADF} once destroyed
     */
    public void postRecv(WorkRequest first) {
        lock.lock();
        try {
            checkAlive("postRecv");
            int n = 0;
            for (WorkRequest wr = first; wr != null; wr = wr.next()) {
                WrChecks.sges(this, wr, n, maxSge, "maxSge");
                if (n == free) {
                    throw new RdmaException(Errno.ENOMEM, this + ": shared receive queue full (maxWr " + maxWr + ", "
                            + (maxWr - free) + " outstanding: a slot is freed when its completion is polled): bad WR index "
                            + n);
                }
                n++;
            }
            for (WorkRequest wr = first; wr != null; wr = wr.next()) {
                int slot = freeSlots[--free];
                slots[slot].copyFrom(wr, true);
                queue[(this.first + queued++) % maxWr] = slot;
            }
        } finally {
            lock.unlock();
        }
    }

    /**
     * Arms the limit ({@code ibv_modify_srq(IBV_SRQ_LIMIT)}): once fewer than {@code srqLimit} receives
     * remain queued after one is taken, {@link AsyncEvent.Type#SRQ_LIMIT_REACHED} is raised once and the
     * limit disarms. 0 disarms it.
     *
     * @throws RdmaException {@link Errno#EINVAL} for a limit outside [0, maxWr] (nothing changes);
     *                       {@link Errno#EBADF} once destroyed
     */
    public void armLimit(int srqLimit) {
        lock.lock();
        try {
            checkAlive("armLimit");
            if (srqLimit < 0 || srqLimit > maxWr) {
                throw new RdmaException(Errno.EINVAL, this + ": srq limit " + srqLimit + " is outside [0, maxWr " + maxWr + "]");
            }
            limit = srqLimit;
        } finally {
            lock.unlock();
        }
    }

    /** The armed limit ({@code ibv_query_srq}'s {@code srq_limit}); 0 when disarmed or once the event was raised. */
    public int limit() {
        lock.lock();
        try {
            return limit;
        } finally {
            lock.unlock();
        }
    }

    /** Receives posted and not yet taken by a QP. */
    public int queued() {
        lock.lock();
        try {
            return queued;
        } finally {
            lock.unlock();
        }
    }

    /** Slots occupied: posted and not yet consumed (or flushed) with their completion polled. */
    public int outstandingRecvs() {
        lock.lock();
        try {
            return maxWr - free;
        } finally {
            lock.unlock();
        }
    }

    /** Receives taken by QPs since creation. */
    public long taken() {
        lock.lock();
        try {
            return taken;
        } finally {
            lock.unlock();
        }
    }

    /** The receive slots ({@code max_wr}). */
    public int maxWr() {
        return maxWr;
    }

    /** SGEs per receive ({@code max_sge}). */
    public int maxSge() {
        return maxSge;
    }

    /** The SRQ's protection domain: the QPs using it are of this PD. */
    public ProtectionDomain pd() {
        return pd;
    }

    /**
     * Destroys the SRQ ({@code ibv_destroy_srq}); receives still queued are dropped (no QP can take
     * them any more).
     *
     * @throws RdmaException {@link Errno#EBUSY} while queue pairs use it (the SRQ stays usable);
     *                       {@link Errno#EBADF} if already destroyed
     */
    @Override
    public void close() {
        synchronized (device.lock) {
            lock.lock();
            try {
                destroyUnlessCounted("destroy", "queue pair(s) using it", "destroy the QPs first");
                queued = 0;
            } finally {
                lock.unlock();
            }
            pd.release();
        }
    }

    // ---- the verbs layer's side: a QP takes and frees slots ----------------------------------------

    /**
     * Takes the oldest queued receive for {@code qp}: its slot number, or -1 if none is queued (the
     * caller holds {@code qp}'s execution lock). Raises the limit event (outside this queue's lock)
     * when the take leaves fewer queued than an armed limit.
     */
    int take(QueuePair qp) {
        int slot;
        boolean low = false;
        int left;
        lock.lock();
        try {
            if (queued == 0) {
                return -1;
            }
            slot = queue[first];
            first = (first + 1) % maxWr;
            left = --queued;
            taken++;
            if (limit > 0 && left < limit) {
                low = true;
                limit = 0;
            }
        } finally {
            lock.unlock();
        }
        if (low) {
            device.raiseAsync(AsyncEvent.Type.SRQ_LIMIT_REACHED, this, this + " fell below its limit: " + left
                    + " receive(s) left queued after " + qp + " took one; post more and arm the limit again");
        }
        return slot;
    }

    /** A receive {@link #take} returned goes back to the front of the queue, untouched (its QP was destroyed). */
    void untake(int slot) {
        lock.lock();
        try {
            first = (first + maxWr - 1) % maxWr;
            queue[first] = slot;
            queued++;
        } finally {
            lock.unlock();
        }
    }

    /** The request in slot {@code slot} (taken by the caller's QP). */
    Wqe slot(int slot) {
        return slots[slot];
    }

    /** The completion of slot {@code slot}'s receive was polled (or lost): the slot is free again. */
    void retire(int slot) {
        lock.lock();
        try {
            freeSlots[free++] = slot;
        } finally {
            lock.unlock();
        }
    }
}
