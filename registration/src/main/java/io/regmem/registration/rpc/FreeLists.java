package io.regmem.registration.rpc;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.atomic.AtomicBoolean;

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
 * <p>Free replies: the same kind of bitmap, a bit per reply number. Any thread pushes (an atomic OR,
 * which also refuses a double push); one thread at a time pops (the kernel's lock-less stack with
 * serialized pops; a second concurrent popper is refused), taking the lowest free number by
 * compare-and-set. The bit is the only record of "free", so a push is one atomic step: a pop that
 * overlaps it either sees the reply or linearizes before it. (The first version pushed by a
 * compare-and-set on the reply's state and then an enqueue on a JCTools MPSC queue: two steps, so a
 * pop overlapping a push could miss the reply, and a soak run of the Lincheck test showed it.)
 * No allocation.
 */
final class FreeLists {
    private static final VarHandle WORDS = MethodHandles.arrayElementVarHandle(long[].class);
    /** Bit {@code id & 63} of word {@code id >>> 6} is set while request {@code id} is free; a power of two of words. */
    private final long[] words;
    private final int wordMask;
    /** Request by number; written before its bit is first set, so a taker that sees the bit sees it. */
    private final Req[] reqs;
    /** Bit {@code id & 63} of word {@code id >>> 6} is set while reply {@code id} is free. */
    private final long[] repWords;
    /** Reply by number; written before its bit is first set, so the popper that sees the bit sees it. */
    private final Rep[] reps;
    private final AtomicBoolean popping = new AtomicBoolean();

    FreeLists(int maxReqs, int maxReps) {
        int n = Integer.highestOneBit(Math.max(1, (maxReqs + 63) >>> 6) * 2 - 1);
        this.words = new long[n];
        this.wordMask = n - 1;
        this.reqs = new Req[maxReqs];
        this.repWords = new long[Math.max(1, (maxReps + 63) >>> 6)];
        this.reps = new Rep[maxReps];
    }

    /** Request numbers go from 0 to this, exclusive. */
    int capacity() {
        return reqs.length;
    }

    /** Adds a new request to the free list (creation); its number must be below {@link #capacity()}. */
    void addFree(Req req) {
        addOwned(req);
        set(words, req.id);
    }

    /** Remembers a new request that starts owned (not free until put). */
    void addOwned(Req req) {
        req.lists = this;
        reqs[req.id] = req;
    }

    /** Whether the request's bit is set. */
    boolean isFree(Req req) {
        return isSet(words, req.id);
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
        return set(words, req.id);
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

    /** Remembers a new reply (creation); it starts taken, and its number must be below the reply limit. */
    void addRep(Rep rep) {
        rep.lists = this;
        reps[rep.id] = rep;
    }

    /**
     * A free reply (the lowest free number), now taken and marked posted; null if none is free. One
     * caller at a time.
     *
     * @throws RdmaException {@link Errno#EBUSY} if another thread is popping right now
     */
    Rep pop() {
        if (!popping.compareAndSet(false, true)) {
            throw new RdmaException(Errno.EBUSY, "RpcBuffer: another thread is taking replies; pops are serialized");
        }
        try {
            for (int w = 0; w < repWords.length; w++) {
                long bits;
                while ((bits = (long) WORDS.getVolatile(repWords, w)) != 0) {
                    long lowest = bits & -bits;
                    Rep rep = reps[(w << 6) | Long.numberOfTrailingZeros(lowest)];
                    rep.taken(); // still free (only this popper clears bits): nobody else looks at its use yet
                    if (WORDS.compareAndSet(repWords, w, bits, bits ^ lowest)) {
                        return rep;
                    }
                }
            }
            return null;
        } finally {
            popping.setRelease(false); // the next popper's compare-and-set orders after everything here
        }
    }

    /**
     * Frees a taken or attached reply (any thread): drops its request's hold on it, then sets its bit.
     *
     * @return false if it was free already (a double push), destroyed, or not of these lists:
     *         nothing changed
     */
    boolean push(Rep rep) {
        if (rep.isDestroyed() || rep.id >= reps.length || reps[rep.id] != rep) {
            return false; // destroyed, or not one of ours
        }
        if (isSet(repWords, rep.id)) {
            return false; // free already: its owner was dropped by the push that freed it
        }
        Req owner = rep.owner;
        if (owner != null) { // no store when there is none (the atomic OR below orders what there is)
            rep.owner = null;
            if (owner.reply == rep) {
                owner.reply = null;
            }
        }
        return set(repWords, rep.id);
    }

    /** Whether the reply's bit is set. */
    boolean isFree(Rep rep) {
        return isSet(repWords, rep.id);
    }

    int freeRequests() {
        return count(words);
    }

    int freeReplies() {
        return count(repWords);
    }

    void clear() {
        zero(words);
        zero(repWords);
    }

    /** Sets bit {@code id} with an atomic OR; false if it was set already (nothing changed). */
    private static boolean set(long[] bitmap, int id) {
        long bit = 1L << (id & 63);
        return ((long) WORDS.getAndBitwiseOr(bitmap, id >>> 6, bit) & bit) == 0;
    }

    private static boolean isSet(long[] bitmap, int id) {
        return ((long) WORDS.getVolatile(bitmap, id >>> 6) & (1L << (id & 63))) != 0;
    }

    private static int count(long[] bitmap) {
        int n = 0;
        for (int w = 0; w < bitmap.length; w++) {
            n += Long.bitCount((long) WORDS.getVolatile(bitmap, w));
        }
        return n;
    }

    private static void zero(long[] bitmap) {
        for (int w = 0; w < bitmap.length; w++) {
            WORDS.setVolatile(bitmap, w, 0L);
        }
    }
}
