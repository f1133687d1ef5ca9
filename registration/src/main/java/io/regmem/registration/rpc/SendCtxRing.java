package io.regmem.registration.rpc;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.function.Consumer;

/**
 * The send-context ring of an RPC-over-RDMA transport ({@code rpcrdma_sendctx_*}): N slots, at most
 * N - 1 of them outstanding (the tail slot is a sentinel), handed out in order by one consumer (the
 * sender, under its send lock) and released in order by one producer (the send-completion handler).
 * No lock, no allocation.
 *
 * <ul>
 * <li>{@link #getLocked()} (consumer): the next slot, or null when {@code next(head) == tail}
 * (the ring is out of slots; the caller waits for the space hook and retries).</li>
 * <li>{@link #putLocked(SendCtx)} (producer, on a Send completion): releases every slot from the one
 * after the tail up to and including {@code sc}, then publishes the new tail. Valid because a
 * reliable-connected send queue completes in order: a signaled completion proves every earlier
 * unsignaled Send finished.</li>
 * <li>{@link #ungetLocked(SendCtx)} (consumer): gives back the latest slot when its Send was never
 * posted, so no completion would ever release it.</li>
 * </ul>
 *
 * <p>Memory ordering: the consumer reads the slot before publishing {@code head} with a release
 * store and reads {@code tail} with an acquire load; the producer publishes {@code tail} with a
 * release store after releasing the slots, and reads {@code head} with an acquire load to check
 * that what it releases was handed out. Space waiters: a consumer that finds the ring full raises a
 * flag and re-reads the tail (both volatile), and the producer reads the flag after publishing the
 * tail, so one of them always sees the other and no wake-up is lost.
 *
 * <p>Signaling ({@link #signal(int, boolean)}): a budget of {@code batch} WRs; a Send is signaled
 * when it must be (it holds page mappings to release) or when its WRs exceed the budget, which then
 * refills to {@code batch}. So at most {@code batch} unsignaled WRs are outstanding after each
 * signaled one, and the ring never fills with unsignaled slots only ({@code batch < N - 1}).
 */
public final class SendCtxRing extends SendCtxRingFields {
    private static final VarHandle HEAD;
    private static final VarHandle TAIL;
    private static final VarHandle WAITING;

    static {
        try {
            MethodHandles.Lookup l = MethodHandles.lookup();
            HEAD = l.findVarHandle(SendCtxRingConsumer.class, "head", int.class);
            TAIL = l.findVarHandle(SendCtxRingProducer.class, "tail", int.class);
            WAITING = l.findVarHandle(SendCtxRingFields.class, "waiting", boolean.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private final SendCtx[] slots;
    private final int last;
    private final int batch;
    private final Consumer<SendCtx> onRelease;
    private final Runnable onSpace;

    /**
     * @param maxRequests the transport's request limit: the ring gets {@code maxRequests + 2} slots
     * @param maxSge      SGEs per slot ({@code max_send_sge}, at least 3)
     * @param onRelease   called by the producer for each slot it releases (unmap its pages, drop the
     *                    request's reference), or null
     * @param onSpace     called by the producer after releasing slots when a consumer found the ring
     *                    full, or null
     * @throws RdmaException {@link Errno#EINVAL} for maxRequests outside [1, 16384] or maxSge below 3
     */
    public SendCtxRing(int maxRequests, int maxSge, Consumer<SendCtx> onRelease, Runnable onSpace) {
        if (maxRequests < 1 || maxRequests > 16384 || maxSge < 3) {
            throw new RdmaException(Errno.EINVAL, "SendCtxRing: maxRequests " + maxRequests + " must be in [1, 16384] "
                    + "and maxSge " + maxSge + " at least 3 (header, send buffer, one page)");
        }
        this.slots = new SendCtx[maxRequests + 2];
        for (int i = 0; i < slots.length; i++) {
            slots[i] = new SendCtx(i, maxSge);
        }
        this.last = slots.length - 1;
        this.batch = Math.max(1, maxRequests / 8);
        budget = batch;
        this.onRelease = onRelease;
        this.onSpace = onSpace;
    }

    private int next(int i) {
        return i < last ? i + 1 : 0;
    }

    private int prev(int i) {
        return i > 0 ? i - 1 : last;
    }

    /**
     * Hands out the next slot (consumer only, {@code rpcrdma_sendctx_get_locked}), or null when
     * N - 1 slots are outstanding; then the space hook runs once a completion frees some.
     */
    public SendCtx getLocked() {
        int h = head; // consumer-owned
        int n = next(h);
        if (n == tailCache) { // only then look at the producer's line
            tailCache = (int) TAIL.getAcquire(this);
            if (n == tailCache) {
                WAITING.setVolatile(this, true);
                tailCache = (int) TAIL.getVolatile(this);
                if (n == tailCache) {
                    fullEvents++;
                    return null;
                }
                WAITING.setVolatile(this, false); // a completion made room meanwhile
            }
        }
        SendCtx sc = slots[n];
        sc.generation++;
        sc.numSge = 0;
        sc.owner = null;
        sc.holdsRef = false;
        HEAD.setRelease(this, n);
        return sc;
    }

    /**
     * Gives back the latest slot, whose Send was never posted (consumer only,
     * {@code rpcrdma_sendctx_unget_locked}).
     *
     * @throws RdmaException {@link Errno#EINVAL} if {@code sc} is not the latest slot handed out
     *                       (nothing changes)
     */
    public void ungetLocked(SendCtx sc) {
        int h = head;
        if (sc == null || slots[h] != sc || h == (int) TAIL.getAcquire(this)) {
            throw new RdmaException(Errno.EINVAL, "SendCtxRing: unget of " + sc + " refused; only the latest slot "
                    + "handed out (" + (h == (int) TAIL.getAcquire(this) ? "none" : slots[h]) + ") may be given back");
        }
        sc.owner = null;
        HEAD.setRelease(this, prev(h));
        wakeIfWaiting();
    }

    /**
     * Releases every outstanding slot up to and including {@code sc} (producer only,
     * {@code rpcrdma_sendctx_put_locked}), in order, calling the release hook for each.
     *
     * @throws RdmaException {@link Errno#EINVAL} if {@code sc} is not outstanding (outside
     *                       (tail, head]): a contract violation; nothing changes
     */
    public void putLocked(SendCtx sc) {
        int t = tail; // producer-owned
        // The head is read every time (not cached): after an unget it moves back, and a completion for
        // the slot given back (never posted, so a forged or stale one) must not release it.
        int h = (int) HEAD.getAcquire(this);
        if (sc == null || !outstanding(sc.index, t, h)) {
            throw new RdmaException(Errno.EINVAL, "SendCtxRing: put of " + sc + " which is not outstanding (tail "
                    + t + ", head " + h + ")");
        }
        sweep(sc, t);
    }

    /** Releases the slots after {@code t} up to and including {@code sc} (checked outstanding), then publishes the tail. */
    private void sweep(SendCtx sc, int t) {
        SendCtx s;
        do {
            t = next(t);
            s = slots[t];
            if (onRelease != null) {
                onRelease.accept(s); // the slot's owner is cleared by its next hand-out, on the consumer's side
            }
        } while (s != sc);
        TAIL.setRelease(this, t);
        wakeIfWaiting();
    }

    /**
     * Applies a Send completion by its work-request id (producer only): the slot it names is
     * released with everything before it, if the id's generation is the slot's current one and the
     * slot is outstanding; otherwise the completion is stale (a duplicate, or one for an earlier
     * user of the slot), counted and ignored.
     *
     * @return true if applied
     */
    public boolean complete(long wrId) {
        int index = (int) wrId;
        int gen = (int) (wrId >>> 32);
        int t = tail;
        int h = (int) HEAD.getAcquire(this);
        if (index < 0 || index > last || !outstanding(index, t, h) || slots[index].generation != gen) {
            staleCompletions++;
            return false;
        }
        sweep(slots[index], t); // checked against this head: no second read of the sender's line
        return true;
    }

    private boolean outstanding(int index, int t, int h) {
        // (t, h] going round: index is after t and not after h
        int fromTail = index - t;
        if (fromTail <= 0) {
            fromTail += slots.length;
        }
        int span = h - t;
        if (span < 0) {
            span += slots.length;
        }
        return fromTail <= span && span != 0;
    }

    private void wakeIfWaiting() {
        if ((boolean) WAITING.getVolatile(this)) { // a volatile read after the tail store: no lost wake-up
            WAITING.setVolatile(this, false);
            if (onSpace != null) {
                onSpace.run();
            }
        }
    }

    /**
     * Whether a Send of {@code wrs} work requests must be signaled (consumer only): when it holds
     * page mappings that only its completion may release, or when it exceeds the unsignaled budget,
     * which then refills; otherwise the budget shrinks by {@code wrs}.
     */
    public boolean signal(int wrs, boolean mustSignal) {
        if (mustSignal || wrs > budget) {
            budget = batch;
            return true;
        }
        budget -= wrs;
        return false;
    }

    /** Slots in the ring (N = maxRequests + 2). */
    public int size() {
        return slots.length;
    }

    /** Slots handed out and not yet released. */
    public int outstanding() {
        int span = (int) HEAD.getAcquire(this) - (int) TAIL.getAcquire(this);
        return span < 0 ? span + slots.length : span;
    }

    /** The oldest outstanding slot's index (the one after the tail), or -1: producer side. */
    int oldestIndex() {
        int t = tail;
        return (int) HEAD.getAcquire(this) == t ? -1 : next(t);
    }

    /** The newest outstanding slot's index (head), or -1: producer side. */
    int newestIndex() {
        int h = (int) HEAD.getAcquire(this);
        return h == tail ? -1 : h;
    }

    /**
     * The newest outstanding slot, or null (producer side): what a completion handler that only knows
     * "everything posted so far completed" would complete.
     */
    public SendCtx newestOutstanding() {
        int n = newestIndex();
        return n < 0 ? null : slots[n];
    }

    /** Times {@link #getLocked()} found the ring full. */
    public long fullEvents() {
        return fullEvents;
    }

    /** Completions {@link #complete(long)} rejected as stale. */
    public long staleCompletions() {
        return staleCompletions;
    }

    /** The unsignaled-WR budget per signaled Send. */
    public int batch() {
        return batch;
    }

    /** The slot at {@code index} (tests, diagnostics). */
    public SendCtx slot(int index) {
        return slots[index];
    }

    /**
     * Releases every outstanding slot (after the QP was drained: every posted Send has completed or
     * flushed) and starts over at 0, as a reconnect does.
     */
    public void reset() {
        if (outstanding() > 0) {
            putLocked(slots[(int) HEAD.getAcquire(this)]);
        }
        HEAD.setRelease(this, 0);
        TAIL.setRelease(this, 0);
        tailCache = 0;
        budget = batch;
    }

    @Override
    public String toString() {
        return "SendCtxRing[" + slots.length + " slots, head " + (int) HEAD.getAcquire(this) + ", tail "
                + (int) TAIL.getAcquire(this) + "]";
    }
}

/** Padding before the consumer's fields (JCTools-style: superclass fields are laid out first). */
abstract class SendCtxRingPad0 {
    long p00, p01, p02, p03, p04, p05, p06, p07, p08, p09, p0a, p0b, p0c, p0d, p0e, p0f;
}

/** The consumer's fields, on their own cache lines. */
abstract class SendCtxRingConsumer extends SendCtxRingPad0 {
    /** The last slot handed out: written by the consumer (release), read by the producer (acquire). */
    int head;
    /** The consumer's last look at the tail: the tail is re-read only when the ring looks full. */
    int tailCache;
    /** The unsignaled-WR budget. */
    int budget;
    long fullEvents;
}

abstract class SendCtxRingPad1 extends SendCtxRingConsumer {
    long p10, p11, p12, p13, p14, p15, p16, p17, p18, p19, p1a, p1b, p1c, p1d, p1e, p1f;
}

/** The producer's fields, on their own cache lines. */
abstract class SendCtxRingProducer extends SendCtxRingPad1 {
    /** The last slot released: written by the producer (release), read by the consumer (acquire). */
    int tail;
    long staleCompletions;
}

abstract class SendCtxRingPad2 extends SendCtxRingProducer {
    long p20, p21, p22, p23, p24, p25, p26, p27, p28, p29, p2a, p2b, p2c, p2d, p2e, p2f;
}

/** The space-waiter flag, written rarely by both sides. */
abstract class SendCtxRingFields extends SendCtxRingPad2 {
    boolean waiting;
    long p30, p31, p32, p33, p34, p35, p36, p37, p38, p39, p3a, p3b, p3c, p3d, p3e, p3f;
}
