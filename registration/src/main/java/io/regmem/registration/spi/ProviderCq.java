package io.regmem.registration.spi;

/** The provider's half of a completion queue. */
public interface ProviderCq {

    /**
     * Makes progress on the work that completes on this CQ (and on what that work depends on), so
     * that its completions appear in the CQ ({@link QpContext#completeSend}, {@link QpContext#completeRecv}).
     * Called by every poll before it reads the queue. While a single QP uses the CQ, the poll holds
     * that QP's lock ({@link QpContext#lock()}) around this call: the provider must not block on the
     * lock of a QP ordered before it (soft: one with a lower creation number; {@code tryLock} and
     * leave its work for later); otherwise no lock is held. An asynchronous provider drives its
     * transport here; a provider with a progress thread of its own may do nothing.
     */
    void progress();

    /**
     * True if {@link #progress()} has nothing to do now, checked without any lock: a poll that finds
     * the CQ empty and its provider idle returns at once and takes no lock, so a thread spinning on
     * an idle CQ does not hold up the threads that post to its QPs. Default: false (always progress).
     */
    default boolean idle() {
        return false;
    }

    /**
     * The verbs layer: {@code qp} (a QP this provider made, {@link ProviderDevice#createQp}) completes
     * its sends here ({@code sends}) and/or its receives ({@code receives}); called once per CQ when
     * the QP is created, before its first post. {@link CqMembers} keeps the set.
     */
    void attach(ProviderQp qp, boolean sends, boolean receives);

    /**
     * The verbs layer: {@code qp} no longer completes here; called when it is destroyed, once
     * {@link ProviderQp#destroy()} returned. A QP that was never attached is ignored.
     */
    void detach(ProviderQp qp);

    /**
     * True if this CQ's completions are made without anybody polling it (the device runs a progress
     * thread): a completion channel's waiter then sleeps until an event wakes it, instead of
     * progressing the CQ between short sleeps. Default: false.
     */
    default boolean progressesOnItsOwn() {
        return false;
    }

    /**
     * Lets a completion channel's waiter sleep until a peer publishes work for this CQ (a CQ that does
     * not progress on its own): sets the sleeping words of the connections whose work completes here
     * (32-bit futex words that the peer clears and wakes once it published work, as
     * {@code futex_waitv} waits on them) and writes their addresses into {@code words} from
     * {@code from}; the waiter then looks for work a last time and waits on them, and calls
     * {@link #awake()} after. Any thread; never blocks.
     *
     * @return how many words it wrote; -1 if this CQ's work can come without a peer clearing such a
     *         word (datagrams, a transport's sockets), or the words do not fit: the waiter then sleeps
     *         in short slices and progresses the CQ between them. Default: -1.
     */
    default int sleeping(long[] words, int from) {
        return -1;
    }

    /** Clears the sleeping words {@link #sleeping} set (the waiter woke). Default: nothing. */
    default void awake() {
    }

    /** The CQ is destroyed (no QP uses it any more). */
    void destroy();
}
