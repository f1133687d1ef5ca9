package io.regmem.registration.rpc;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.util.concurrent.atomic.AtomicBoolean;
import org.jctools.queues.MpmcArrayQueue;
import org.jctools.queues.MpscArrayQueue;

/**
 * The free requests and free replies of an {@link RpcBuffer}, and the ownership moves that go with
 * them. Free requests: a bounded lock-free MPMC queue (JCTools); a request moves FREE to OWNED by
 * compare-and-set when taken and back when put, so it is never handed to two RPCs nor put twice.
 * Free replies: a bounded lock-free MPSC queue (JCTools) that any thread pushes to and one thread at
 * a time pops from (the kernel's lock-less stack with serialized pops; a second concurrent popper is
 * refused). No allocation.
 */
final class FreeLists {
    private final MpmcArrayQueue<Req> reqs;
    private final MpscArrayQueue<Rep> reps;
    private final AtomicBoolean popping = new AtomicBoolean();

    FreeLists(int maxReqs, int maxReps) {
        this.reqs = new MpmcArrayQueue<>(Math.max(2, maxReqs));
        this.reps = new MpscArrayQueue<>(Math.max(2, maxReps));
    }

    /** Adds a new request to the free list (creation). */
    void addFree(Req req) {
        reqs.offer(req);
    }

    /** A free request, now owned; null if none. */
    Req get() {
        Req req = reqs.poll(); // not relaxedPoll: that may answer null while an offer is in flight
        if (req != null && !req.take()) {
            throw new IllegalStateException(req + " was on the free list but not free");
        }
        return req;
    }

    /** Makes an owned request free again; false (nothing changes) if it was not owned. */
    boolean release(Req req) {
        return req.release();
    }

    /** Puts a request {@link #release released} by the caller on the free list. */
    void offer(Req req) {
        reqs.offer(req);
    }

    /**
     * A free reply, now taken; null if none is free. One caller at a time.
     *
     * @throws RdmaException {@link Errno#EBUSY} if another thread is popping right now
     */
    Rep pop() {
        if (!popping.compareAndSet(false, true)) {
            throw new RdmaException(Errno.EBUSY, "RpcBuffer: another thread is taking replies; pops are serialized");
        }
        try {
            Rep rep = reps.poll();
            if (rep != null && !rep.move(Rep.FREE, Rep.POSTED)) {
                throw new IllegalStateException(rep + " was on the free stack but not free");
            }
            return rep;
        } finally {
            popping.set(false);
        }
    }

    /** Frees a taken or attached reply and pushes it; false (nothing changes) if it was free already. */
    boolean push(Rep rep) {
        if (!(rep.move(Rep.POSTED, Rep.FREE) || rep.move(Rep.ATTACHED, Rep.FREE))) {
            return false;
        }
        Req owner = rep.owner;
        rep.owner = null;
        if (owner != null && owner.reply == rep) {
            owner.reply = null;
        }
        reps.offer(rep);
        return true;
    }

    int freeRequests() {
        return reqs.size();
    }

    int freeReplies() {
        return reps.size();
    }

    void clear() {
        reqs.clear();
        reps.clear();
    }
}
