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
 * <li>{@link #getLocked()} (consumer): the next slot, or null when N - 1 are outstanding (the ring is
 * out of slots; the caller waits for the space hook and retries).</li>
 * <li>{@link #putLocked(SendCtx)} (producer, on a Send completion): releases every slot from the one
 * after the tail up to and including {@code sc}, then publishes the new tail. Valid because a
 * reliable-connected send queue completes in order: a signaled completion proves every earlier
 * unsignaled Send finished.</li>
 * <li>{@link #ungetLocked(SendCtx)} (consumer): gives back the latest slot when its Send was never
 * posted, so no completion would ever release it.</li>
 * </ul>
 *
 * <p>Work-request ids are sequence numbers: the k-th hand-out since the ring was made carries
 * {@code wrId} k (a {@code long}, so it never wraps; bits 62 and 63 stay clear). A completion is
 * applied only if its id is after the tail's ({@code tailSeq < id}) and was handed out
 * ({@code id <= headSeq}): a duplicate, or a completion for an earlier user of the slot, is at or
 * before the tail and is counted and dropped, never applied to the slot's next user. The slot is
 * found from the id ({@code tail + (id - tailSeq)} going round), so the completion handler reads
 * nothing the sender writes: it keeps its last look at {@code headSeq} and reads the sender's line
 * again only for an id beyond it, or after an unget (a counter on a line of its own, rarely written,
 * says so). An unget gives the slot's sequence number back with the slot, as the kernel gives the
 * slot back: a Send that was never posted has no completion, and the next Send reuses the number.
 *
 * <p>Memory ordering: the consumer publishes {@code headSeq} with a release store after filling the
 * slot, and reads {@code tailSeq} (acquire) only when its last look says the ring is full; the
 * producer publishes {@code tailSeq} after releasing the slots. What a release hook reads of a slot
 * was written before the Send was posted, so the completion that reaches the producer through the
 * completion queue orders it. Space waiters (only with a space hook): a consumer that finds the ring
 * full raises a flag unless it is up and re-reads the tail, and the producer reads the flag after
 * publishing the tail, both sides with volatile (sequentially consistent) accesses, so one of them
 * always sees the other and no wake-up is lost. Without a space hook, neither side touches the flag.
 *
 * <p>Signaling ({@link #signal(int, boolean)}): a budget of {@code batch} WRs; a Send is signaled
 * when it must be (it holds page mappings to release) or when its WRs exceed the budget, which then
 * refills to {@code batch}. So at most {@code batch} unsignaled WRs are outstanding after each
 * signaled one, and the ring never fills with unsignaled slots only ({@code batch < N - 1}).
 */
public final class SendCtxRing extends SendCtxRingFields {
    private static final VarHandle HEAD_SEQ;
    private static final VarHandle TAIL_SEQ;
    private static final VarHandle UNGETS;
    private static final VarHandle WAITING;

    static {
        try {
            MethodHandles.Lookup l = MethodHandles.lookup();
            HEAD_SEQ = l.findVarHandle(SendCtxRingConsumer.class, "headSeq", long.class);
            TAIL_SEQ = l.findVarHandle(SendCtxRingProducer.class, "tailSeq", long.class);
            UNGETS = l.findVarHandle(SendCtxRingUngets.class, "ungets", int.class);
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

    /** The slot {@code d} after {@code i} going round ({@code 0 <= d < N}). */
    private int ahead(int i, long d) {
        int j = i + (int) d;
        return j > last ? j - slots.length : j;
    }

    /**
     * Hands out the next slot (consumer only, {@code rpcrdma_sendctx_get_locked}), or null when
     * N - 1 slots are outstanding; then the space hook runs once a completion frees some.
     */
    public SendCtx getLocked() {
        long s = headSeq + 1; // consumer-owned
        if (s - tailSeqCache > last) { // only then look at the producer's line
            tailSeqCache = (long) TAIL_SEQ.getAcquire(this);
            if (s - tailSeqCache > last && !awaitSpace(s)) {
                fullEvents++;
                return null;
            }
        }
        int n = next(head);
        head = n;
        SendCtx sc = slots[n];
        sc.wrId = s;
        if (sc.numSge != 0 || sc.owner != null || sc.holdsRef) { // stores only where needed: stores drain in order
            sc.numSge = 0;
            sc.owner = null;
            sc.holdsRef = false;
        }
        HEAD_SEQ.setRelease(this, s);
        return sc;
    }

    /** The ring looked full for hand-out {@code s}: raise the waiting flag (if there is a hook) and look again. */
    private boolean awaitSpace(long s) {
        if (onSpace == null) {
            return false; // nobody to wake: the caller retries when it likes
        }
        if (!(boolean) WAITING.getVolatile(this)) { // only the producer lowers it: once up, it stays up
            WAITING.setVolatile(this, true);
        }
        tailSeqCache = (long) TAIL_SEQ.getVolatile(this);
        return s - tailSeqCache <= last; // room after all: the flag stays up, one spurious wake-up at most
    }

    /**
     * Gives back the latest slot, whose Send was never posted (consumer only,
     * {@code rpcrdma_sendctx_unget_locked}); the next hand-out is the same slot with the same work
     * request id.
     *
     * @throws RdmaException {@link Errno#EINVAL} if {@code sc} is not the latest slot handed out
     *                       (nothing changes)
     */
    public void ungetLocked(SendCtx sc) {
        long s = headSeq;
        boolean none = s == (long) TAIL_SEQ.getAcquire(this);
        if (sc == null || none || slots[head] != sc) {
            throw new RdmaException(Errno.EINVAL, "SendCtxRing: unget of " + sc + " refused; only the latest slot "
                    + "handed out (" + (none ? "none" : slots[head]) + ") may be given back");
        }
        sc.owner = null;
        head = prev(head);
        HEAD_SEQ.setRelease(this, s - 1);
        // After the head: a producer that sees the new count sees the head moved back.
        UNGETS.setVolatile(this, ungets + 1);
        wakeIfWaiting(); // another sender may be waiting for the slot given back
    }

    /**
     * Releases every outstanding slot up to and including {@code sc} (producer only,
     * {@code rpcrdma_sendctx_put_locked}), in order, calling the release hook for each.
     *
     * @throws RdmaException {@link Errno#EINVAL} if {@code sc} is not outstanding (outside
     *                       (tail, head]): a contract violation; nothing changes
     */
    public void putLocked(SendCtx sc) {
        long id = sc == null ? 0 : sc.wrId;
        long d = id - tailSeq; // producer-owned
        if (sc == null || d <= 0 || d > last || ahead(tail, d) != sc.index || !handedOut(id)) {
            throw new RdmaException(Errno.EINVAL, "SendCtxRing: put of " + sc + " which is not outstanding (tail "
                    + tailSeq + ", head " + (long) HEAD_SEQ.getAcquire(this) + ")");
        }
        sweep(d, id);
    }

    /**
     * Applies a Send completion by its work-request id (producer only): the slot it names is
     * released with everything before it if the id is outstanding; otherwise the completion is stale
     * (a duplicate, one for an earlier user of the slot, or an id never handed out), counted and
     * ignored.
     *
     * @return true if applied
     */
    public boolean complete(long wrId) {
        long d = wrId - tailSeq; // producer-owned; ids that are not ours (negative, tagged) land far away
        if (d <= 0 || d > last || !handedOut(wrId)) {
            staleCompletions++;
            return false;
        }
        sweep(d, wrId);
        return true;
    }

    /**
     * Whether hand-out {@code id} (after the tail) is still handed out (producer): answered from the
     * producer's last look at the head while no unget happened since; otherwise the head is read again.
     */
    private boolean handedOut(long id) {
        if (id <= headSeqCache && (int) UNGETS.getAcquire(this) == ungetsSeen) {
            return true;
        }
        return id <= refreshHead();
    }

    /** Reads the consumer's head (producer): the unget count first, so the head read is at least as new. */
    private long refreshHead() {
        ungetsSeen = (int) UNGETS.getAcquire(this);
        long h = (long) HEAD_SEQ.getAcquire(this);
        headSeqCache = h;
        return h;
    }

    /** Releases the {@code d} slots after the tail (checked outstanding), the last being hand-out {@code id}, then publishes the tail. */
    private void sweep(long d, long id) {
        int t = tail;
        if (onRelease != null) {
            for (long i = 0; i < d; i++) {
                t = next(t);
                onRelease.accept(slots[t]); // the slot's owner is cleared by its next hand-out, on the consumer's side
            }
        } else {
            t = ahead(t, d);
        }
        tail = t;
        if (onSpace == null) {
            TAIL_SEQ.setRelease(this, id);
        } else {
            TAIL_SEQ.setVolatile(this, id); // then the flag: a volatile store and load, as the consumer's
            wakeIfWaiting();
        }
    }

    private void wakeIfWaiting() {
        if (onSpace != null && (boolean) WAITING.getVolatile(this)) {
            WAITING.setVolatile(this, false);
            onSpace.run();
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

    /** Slots handed out and not yet released (any thread; a snapshot). */
    public int outstanding() {
        long t = (long) TAIL_SEQ.getAcquire(this);
        long span = (long) HEAD_SEQ.getAcquire(this) - t; // the head read second: never behind this tail
        return (int) Math.min(Math.max(span, 0), last);
    }

    /** The oldest outstanding slot's index (the one after the tail), or -1: producer side. */
    int oldestIndex() {
        return refreshHead() == tailSeq ? -1 : next(tail);
    }

    /**
     * The work-request id of the newest outstanding slot, or -1 (producer side): what a completion
     * handler that only knows "everything posted so far completed" would complete.
     */
    public long newestWrId() {
        long h = refreshHead();
        return h == tailSeq ? -1 : h;
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
     * flushed) and starts over at slot 0, as a reconnect does. The ids go on counting, so a
     * completion from before the reset is stale.
     */
    public void reset() {
        long h = refreshHead();
        if (h != tailSeq) {
            sweep(h - tailSeq, h);
        }
        head = 0;
        tail = 0;
        tailSeqCache = h;
        budget = batch;
    }

    @Override
    public String toString() {
        return "SendCtxRing[" + slots.length + " slots, head " + (long) HEAD_SEQ.getAcquire(this) + ", tail "
                + (long) TAIL_SEQ.getAcquire(this) + "]";
    }
}

/** Padding before the consumer's fields (JCTools-style: superclass fields are laid out first). */
abstract class SendCtxRingPad0 {
    long p00, p01, p02, p03, p04, p05, p06, p07, p08, p09, p0a, p0b, p0c, p0d, p0e, p0f;
}

/** The consumer's fields, on their own cache lines. */
abstract class SendCtxRingConsumer extends SendCtxRingPad0 {
    /** The last hand-out's id: written by the consumer (release), read by the producer (acquire). */
    long headSeq;
    /** The last slot handed out (consumer only). */
    int head;
    /** The consumer's last look at the tail: the tail is re-read only when the ring looks full. */
    long tailSeqCache;
    /** The unsignaled-WR budget. */
    int budget;
    long fullEvents;
}

abstract class SendCtxRingPad1 extends SendCtxRingConsumer {
    long p10, p11, p12, p13, p14, p15, p16, p17, p18, p19, p1a, p1b, p1c, p1d, p1e, p1f;
}

/** The producer's fields, on their own cache lines. */
abstract class SendCtxRingProducer extends SendCtxRingPad1 {
    /** The last released hand-out's id: written by the producer (release), read by the consumer (acquire). */
    long tailSeq;
    /** The last slot released (producer only). */
    int tail;
    /** The producer's last look at the head, and the unget count it saw first. */
    long headSeqCache;
    int ungetsSeen;
    long staleCompletions;
}

abstract class SendCtxRingPad2 extends SendCtxRingProducer {
    long p20, p21, p22, p23, p24, p25, p26, p27, p28, p29, p2a, p2b, p2c, p2d, p2e, p2f;
}

/** Ungets so far: written by the consumer at each unget (rare), read by the producer at each completion. */
abstract class SendCtxRingUngets extends SendCtxRingPad2 {
    int ungets;
}

abstract class SendCtxRingPad3 extends SendCtxRingUngets {
    long p30, p31, p32, p33, p34, p35, p36, p37, p38, p39, p3a, p3b, p3c, p3d, p3e, p3f;
}

/** The space-waiter flag, written rarely by both sides. */
abstract class SendCtxRingFields extends SendCtxRingPad3 {
    boolean waiting;
    long p40, p41, p42, p43, p44, p45, p46, p47, p48, p49, p4a, p4b, p4c, p4d, p4e, p4f;
}
