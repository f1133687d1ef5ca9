package io.regmem.registration.spi;

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

    /**
     * @param none            an empty array of the provider's QP type
     * @param selfProgressing whether its device runs a progress thread ({@link #progressesOnItsOwn()})
     */
    protected MembersCq(Q[] none, BooleanSupplier selfProgressing) {
        this.members = new CqMembers<>(none);
        this.type = none.getClass().getComponentType();
        this.selfProgressing = selfProgressing;
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
        } else {
            attachOther(qp);
        }
    }

    @SuppressWarnings("unchecked")
    @Override
    public final void detach(ProviderQp qp) {
        if (type.isInstance(qp)) {
            members.remove((Q) qp);
        } else {
            detachOther(qp);
        }
    }

    /**
     * A QP of another kind than {@code Q} completes here (a provider's datagram QP, progressed by
     * other means than {@link #members}). Default: refused as a QP of another provider.
     */
    protected void attachOther(ProviderQp qp) {
        throw new ClassCastException(qp.getClass().getName() + " is no QP of this CQ's provider");
    }

    /** A QP {@link #attachOther} took no longer completes here. Default: nothing to do. */
    protected void detachOther(ProviderQp qp) {
    }
}
