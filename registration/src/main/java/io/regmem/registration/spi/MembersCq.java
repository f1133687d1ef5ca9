package io.regmem.registration.spi;

import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;

/**
 * A {@link ProviderCq} that keeps the QPs completing on it in {@link CqMembers}: the verbs layer's
 * {@link #attach} and {@link #detach} are done here, and whether it progresses on its own is its
 * device's; a provider's CQ extends it and iterates
 * {@link #members} in {@link #progress()}.
 *
 * @param <Q> the provider's QP type
 */
public abstract class MembersCq<Q extends ProviderQp> implements ProviderCq {
    /** The QPs whose send and receive queues complete here. */
    protected final CqMembers<Q> members;
    private final Class<?> type;
    private final BooleanSupplier selfProgressing;
    /** The kind of QP besides {@code Q} this CQ takes, or null; and how many of them complete here. */
    private final Class<? extends ProviderQp> otherType;
    private final AtomicInteger others = new AtomicInteger();

    /**
     * @param none            an empty array of the provider's QP type
     * @param selfProgressing whether its device runs a progress thread ({@link #progressesOnItsOwn()})
     */
    protected MembersCq(Q[] none, BooleanSupplier selfProgressing) {
        this(none, selfProgressing, null);
    }

    /**
     * As {@link #MembersCq(ProviderQp[], BooleanSupplier)}, also taking QPs of {@code others} (a
     * provider's datagram QPs, progressed by other means than {@link #members}): they are only
     * counted ({@link #others()}).
     */
    protected MembersCq(Q[] none, BooleanSupplier selfProgressing, Class<? extends ProviderQp> others) {
        this.members = new CqMembers<>(none);
        this.type = none.getClass().getComponentType();
        this.selfProgressing = selfProgressing;
        this.otherType = others;
    }

    @Override
    public final boolean progressesOnItsOwn() {
        return selfProgressing.getAsBoolean();
    }

    /** Nothing to release by default: the CQ holds no resource of its own. */
    @Override
    public void destroy() {
    }

    @SuppressWarnings("unchecked")
    @Override
    public final void attach(ProviderQp qp, boolean sends, boolean receives) {
        if (type.isInstance(qp)) {
            members.add((Q) qp, sends, receives);
        } else if (otherType != null && otherType.isInstance(qp)) {
            others.incrementAndGet();
        } else {
            throw new ClassCastException(qp.getClass().getName() + " is no QP of this CQ's provider");
        }
    }

    @SuppressWarnings("unchecked")
    @Override
    public final void detach(ProviderQp qp) {
        if (type.isInstance(qp)) {
            members.remove((Q) qp);
        } else if (otherType != null && otherType.isInstance(qp)) {
            others.decrementAndGet();
        }
    }

    /** How many QPs of the other kind the constructor named complete here (read without a lock). */
    protected final int others() {
        return others.get();
    }
}
