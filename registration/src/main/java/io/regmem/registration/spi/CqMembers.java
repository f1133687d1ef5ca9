package io.regmem.registration.spi;

import org.agrona.collections.ArrayUtil;

/**
 * The QPs whose work completes on a provider's CQ, as the verbs layer reports them
 * ({@link ProviderCq#attach}, {@link ProviderCq#detach}): those whose send queue completes there and
 * those whose receive queue does. Copy-on-write arrays of the provider's own QP type, which a poll
 * iterates without a lock; changes (QP creation and destruction) are serialised here.
 *
 * @param <Q> the provider's QP type
 */
public final class CqMembers<Q extends ProviderQp> {
    private volatile Q[] senders;
    private volatile Q[] receivers;

    /** An empty set; {@code none} is an empty array of the provider's QP type. */
    public CqMembers(Q[] none) {
        if (none.length != 0) {
            throw new IllegalArgumentException("CqMembers starts from an empty array, got " + none.length + " element(s)");
        }
        senders = none;
        receivers = none;
    }

    /** Adds {@code qp} as a sender and/or a receiver (a QP whose two queues complete on one CQ is both). */
    public synchronized void add(Q qp, boolean sends, boolean receives) {
        if (sends) {
            senders = ArrayUtil.add(senders, qp);
        }
        if (receives) {
            receivers = ArrayUtil.add(receivers, qp);
        }
    }

    /** Removes {@code qp} from both sets (no effect if it is in neither). */
    public synchronized void remove(Q qp) {
        senders = ArrayUtil.remove(senders, qp);
        receivers = ArrayUtil.remove(receivers, qp);
    }

    /** The QPs whose send queue completes here (a snapshot: never modify it). */
    public Q[] senders() {
        return senders;
    }

    /** The QPs whose receive queue completes here (a snapshot: never modify it). */
    public Q[] receivers() {
        return receivers;
    }

    /**
     * True if {@code qp} is one of {@code qps} (by identity): a poll that runs the senders and then the
     * receivers skips a receiver it already ran as a sender.
     */
    public static boolean contains(ProviderQp[] qps, ProviderQp qp) {
        for (ProviderQp q : qps) {
            if (q == qp) {
                return true;
            }
        }
        return false;
    }
}
