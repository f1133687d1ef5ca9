package io.regmem.registration.spi;

/**
 * A {@link ProviderCq} that keeps the QPs completing on it in {@link CqMembers}: the verbs layer's
 * {@link #attach} and {@link #detach} are done here; a provider's CQ extends it and iterates
 * {@link #members} in {@link #progress()}.
 *
 * @param <Q> the provider's QP type
 */
public abstract class MembersCq<Q extends ProviderQp> implements ProviderCq {
    /** The QPs whose send and receive queues complete here. */
    protected final CqMembers<Q> members;
    private final Class<?> type;

    /** @param none an empty array of the provider's QP type */
    protected MembersCq(Q[] none) {
        this.members = new CqMembers<>(none);
        this.type = none.getClass().getComponentType();
    }

    @SuppressWarnings("unchecked")
    @Override
    public final void attach(ProviderQp qp, boolean sends, boolean receives) {
        members.add((Q) type.cast(qp), sends, receives);
    }

    @SuppressWarnings("unchecked")
    @Override
    public final void detach(ProviderQp qp) {
        members.remove((Q) type.cast(qp));
    }
}
