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
 * <h2>Free requests</h2>
 * A bitmap with a bit per request number, set while the request is free, 32 requests to a 64-bit
 * word; the word's high half counts the puts into it (mod 2^32):
 * <pre>
 *   63                       32 31                        0
 *  +--------------------------+---------------------------+
 *  | puts into this word      | a bit per request (1 free) |
 *  +--------------------------+---------------------------+
 * </pre>
 * Taking one clears the lowest set bit of a word by compare-and-set, starting at a word chosen by
 * the calling thread, so threads that take and put back their own requests work on different
 * words; putting one back sets its bit and counts the put in one compare-and-set, which also tells
 * whether it was free already (a double put, refused). One atomic operation each way: a JCTools
 * MPMC queue needs one each way for the queue alone, plus the compare-and-set that refuses a
 * double put. The word holds the whole state, so there is no ABA.
 *
 * <p>Linearizable, "empty" included: a get that finds every word empty scans again and answers
 * null only if the second scan finds them empty too with the same put counts. Only puts set bits,
 * so each word was then empty from its first read to its second, and every word was empty at the
 * moment between the two scans: a request was free at no moment of that instant, which is where
 * the null linearizes. (A single scan is not enough: a put into a word already passed while
 * another thread empties the next leaves it answering null although a request was free all along.)
 * The counts compare by their sum; a false match needs 2^32 puts during one get.
 *
 * <h2>Free replies</h2>
 * The same kind of bitmap, a bit per reply number, 64 to a word. Any thread pushes (an atomic OR,
 * which also refuses a double push); one thread at a time pops (the kernel's lock-less stack with
 * serialized pops; a second concurrent popper is refused), taking the lowest free number by
 * compare-and-set. The bit is the only record of "free", so a push is one atomic step. Since only
 * the popper clears bits, a word it finds empty was empty at the start of its scan, so one scan is
 * linearizable: a pop that answers null found no reply free at the moment it began.
 *
 * <p>No library structure does this (tested with Lincheck over three words and a two-thread
 * stress with ownership marks, benchmarked beside JCTools {@code MpmcArrayQueue} and
 * {@code ArrayBlockingQueue}). No allocation.
 */
final class FreeLists {
    private static final VarHandle WORDS = MethodHandles.arrayElementVarHandle(long[].class);
    /** One put, in a request word's high half. */
    private static final long PUT = 1L << 32;
    /** A request word's bits. */
    private static final long REQ_BITS = 0xFFFF_FFFFL;
    /** Bit {@code id & 31} of word {@code id >>> 5} is set while request {@code id} is free; a power of two of words. */
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
        int n = Integer.highestOneBit(Math.max(1, (maxReqs + 31) >>> 5) * 2 - 1);
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
        release(req);
    }

    /** Remembers a new request that starts owned (not free until put). */
    void addOwned(Req req) {
        req.lists = this;
        reqs[req.id] = req;
    }

    /** Whether the request's bit is set. */
    boolean isFree(Req req) {
        return ((long) WORDS.getVolatile(words, req.id >>> 5) & (1L << (req.id & 31))) != 0;
    }

    /** A free request, now owned; null if none. */
    Req get() {
        return get((int) Thread.currentThread().threadId());
    }

    /** {@link #get()} with the scan starting at word {@code start} (masked). */
    Req get(int start) {
        long lastPuts = -1;
        while (true) {
            long puts = 0;
            for (int k = 0; k <= wordMask; k++) {
                int w = (start + k) & wordMask;
                long word;
                while (((word = (long) WORDS.getVolatile(words, w)) & REQ_BITS) != 0) {
                    long lowest = word & -word; // a request bit: the low half is not empty
                    if (WORDS.compareAndSet(words, w, word, word ^ lowest)) {
                        Req req = reqs[(w << 5) | Long.numberOfTrailingZeros(lowest)];
                        req.take();
                        return req;
                    }
                }
                puts += word >>> 32;
            }
            if (puts == lastPuts) {
                return null; // two scans, every word empty, no put between: empty at the instant between
            }
            lastPuts = puts;
        }
    }

    /**
     * Makes an owned request free again.
     *
     * @return false if it was free already (a double put): nothing changed
     */
    boolean release(Req req) {
        int w = req.id >>> 5;
        long bit = 1L << (req.id & 31);
        long word;
        do {
            word = (long) WORDS.getVolatile(words, w);
            if ((word & bit) != 0) {
                return false;
            }
        } while (!WORDS.compareAndSet(words, w, word, (word | bit) + PUT));
        return true;
    }

    /** Takes a free request off the free list for good (buffer destroy); false if it is not free. */
    boolean claimFree(Req req) {
        int w = req.id >>> 5;
        long bit = 1L << (req.id & 31);
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
        int n = 0;
        for (int w = 0; w < words.length; w++) {
            n += Long.bitCount((long) WORDS.getVolatile(words, w) & REQ_BITS);
        }
        return n;
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
