package io.regmem.registration.rpc;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.atomic.AtomicBoolean;
import org.jctools.queues.MpscArrayQueue;

/**
 * The free requests and free replies of an {@link RpcBuffer}, and the ownership moves that go with
 * them.
 *
 * <p>Free requests: a bitmap with a bit per request number, set while the request is free. Taking
 * one clears the lowest set bit of a word by compare-and-set, starting at a word chosen by the
 * calling thread, so threads that take and put back their own requests work on different words;
 * putting one back sets its bit with an atomic OR, which also tells whether it was free already (a
 * double put, refused). One atomic operation each way: a JCTools MPMC queue needs one each way for
 * the queue alone, plus the compare-and-set that refuses a double put (21 ns per get + put against
 * 14 here). The word holds the whole state, so there is no ABA. No library structure does this:
 * tested with Lincheck and a two-thread stress with ownership marks, benchmarked beside JCTools
 * {@code MpmcArrayQueue} and {@code ArrayBlockingQueue}.
 *
 * <p>Free replies: a bounded lock-free MPSC queue (JCTools) that any thread pushes to and one thread
 * at a time pops from (the kernel's lock-less stack with serialized pops; a second concurrent
 * popper is refused). No allocation.
 */
final class FreeLists {
    private static final VarHandle WORDS = MethodHandles.arrayElementVarHandle(long[].class);
    /** Bit {@code id & 63} of word {@code id >>> 6} is set while request {@code id} is free; a power of two of words. */
    private final long[] words;
    private final int wordMask;
    /** Request by number; written before its bit is first set, so a taker that sees the bit sees it. */
    private final Req[] reqs;
    private final MpscArrayQueue<Rep> reps;
    private final AtomicBoolean popping = new AtomicBoolean();

    FreeLists(int maxReqs, int maxReps) {
        int n = Integer.highestOneBit(Math.max(1, (maxReqs + 63) >>> 6) * 2 - 1);
        this.words = new long[n];
        this.wordMask = n - 1;
        this.reqs = new Req[maxReqs];
        this.reps = new MpscArrayQueue<>(Math.max(2, maxReps));
    }

    /** Request numbers go from 0 to this, exclusive. */
    int capacity() {
        return reqs.length;
    }

    /** Adds a new request to the free list (creation); its number must be below {@link #capacity()}. */
    void addFree(Req req) {
        addOwned(req);
        WORDS.getAndBitwiseOr(words, req.id >>> 6, 1L << (req.id & 63));
    }

    /** Remembers a new request that starts owned (not free until put). */
    void addOwned(Req req) {
        req.lists = this;
        reqs[req.id] = req;
    }

    /** Whether the request's bit is set. */
    boolean isFree(Req req) {
        return ((long) WORDS.getVolatile(words, req.id >>> 6) & (1L << (req.id & 63))) != 0;
    }

    /** A free request, now owned; null if none. */
    Req get() {
        int start = (int) Thread.currentThread().threadId();
        for (int k = 0; k <= wordMask; k++) {
            int w = (start + k) & wordMask;
            long bits;
            while ((bits = (long) WORDS.getVolatile(words, w)) != 0) {
                long lowest = bits & -bits;
                if (WORDS.compareAndSet(words, w, bits, bits ^ lowest)) {
                    Req req = reqs[(w << 6) | Long.numberOfTrailingZeros(lowest)];
                    req.take();
                    return req;
                }
            }
        }
        return null;
    }

    /**
     * Makes an owned request free again.
     *
     * @return false if it was free already (a double put): nothing changed
     */
    boolean release(Req req) {
        long bit = 1L << (req.id & 63);
        return ((long) WORDS.getAndBitwiseOr(words, req.id >>> 6, bit) & bit) == 0;
    }

    /** Takes a free request off the free list for good (buffer destroy); false if it is not free. */
    boolean claimFree(Req req) {
        int w = req.id >>> 6;
        long bit = 1L << (req.id & 63);
        long bits;
        while (((bits = (long) WORDS.getVolatile(words, w)) & bit) != 0) {
            if (WORDS.compareAndSet(words, w, bits, bits ^ bit)) {
                return true;
            }
        }
        return false;
    }

    /** Forgets a destroyed request's number, so a new request may take it. */
    void forget(Req req) {
        reqs[req.id] = null;
    }

    /**
     * A free reply, now taken; null if none is free. One caller at a time. Not linearizable with
     * {@link #push}: a push frees its reply first and enqueues it second, so a pop that overlaps a
     * push may miss that reply (it is there once the push returns; nothing is lost or taken twice).
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
        int n = 0;
        for (int w = 0; w <= wordMask; w++) {
            n += Long.bitCount((long) WORDS.getVolatile(words, w));
        }
        return n;
    }

    int freeReplies() {
        return reps.size();
    }

    void clear() {
        for (int w = 0; w <= wordMask; w++) {
            WORDS.setVolatile(words, w, 0L);
        }
        reps.clear();
    }
}
