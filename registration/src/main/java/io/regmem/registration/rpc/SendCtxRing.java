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
public final class SendCtxRing {
    private static final VarHandle HEAD;
    private static final VarHandle TAIL;
    private static final VarHandle WAITING;

    static {
        try {
            MethodHandles.Lookup l = MethodHandles.lookup();
            HEAD = l.findVarHandle(SendCtxRing.class, "head", int.class);
            TAIL = l.findVarHandle(SendCtxRing.class, "tail", int.class);
            WAITING = l.findVarHandle(SendCtxRing.class, "waiting", boolean.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private final SendCtx[] slots;
    private final int last;
    private final int batch;
    private final Consumer<SendCtx> onRelease;
    private final Runnable onSpace;
    @SuppressWarnings("unused") // through HEAD
    private int head;
    @SuppressWarnings("unused") // through TAIL
    private int tail;
    @SuppressWarnings("unused") // through WAITING
    private boolean waiting;
    /** Consumer-owned. */
    private int budget;
    private long fullEvents;
    private long staleCompletions;

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
        this.budget = batch;
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
        int h = (int) HEAD.getOpaque(this);
        int n = next(h);
        if (n == (int) TAIL.getAcquire(this)) {
            WAITING.setVolatile(this, true);
            if (n == (int) TAIL.getVolatile(this)) {
                fullEvents++;
                return null;
            }
            WAITING.setVolatile(this, false); // a completion made room meanwhile
        }
        SendCtx sc = slots[n];
        sc.generation++;
        sc.numSge = 0;
        sc.owner = null;
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
        int h = (int) HEAD.getOpaque(this);
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
        int t = (int) TAIL.getOpaque(this);
        int h = (int) HEAD.getAcquire(this);
        if (sc == null || !outstanding(sc.index, t, h)) {
            throw new RdmaException(Errno.EINVAL, "SendCtxRing: put of " + sc + " which is not outstanding (tail "
                    + t + ", head " + h + ")");
        }
        SendCtx s;
        do {
            t = next(t);
            s = slots[t];
            if (onRelease != null) {
                onRelease.accept(s);
            }
            s.owner = null;
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
        int t = (int) TAIL.getOpaque(this);
        int h = (int) HEAD.getAcquire(this);
        if (index < 0 || index > last || !outstanding(index, t, h) || slots[index].generation != gen) {
            staleCompletions++;
            return false;
        }
        putLocked(slots[index]);
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
        if ((boolean) WAITING.getVolatile(this)) {
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
        int t = (int) TAIL.getOpaque(this);
        return (int) HEAD.getAcquire(this) == t ? -1 : next(t);
    }

    /** The newest outstanding slot's index (head), or -1: producer side. */
    int newestIndex() {
        int h = (int) HEAD.getAcquire(this);
        return h == (int) TAIL.getOpaque(this) ? -1 : h;
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
        budget = batch;
    }

    @Override
    public String toString() {
        return "SendCtxRing[" + slots.length + " slots, head " + (int) HEAD.getAcquire(this) + ", tail "
                + (int) TAIL.getAcquire(this) + "]";
    }
}
