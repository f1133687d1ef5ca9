package io.regmem.registration;

/**
 * The attachment every context offers its provider ({@code attach}/{@code attachment} of
 * {@link io.regmem.registration.spi.QpContext}, {@link io.regmem.registration.spi.CqContext} and
 * {@link io.regmem.registration.spi.CmContext}): the provider's own state for the object, reached
 * from the context the verbs layer hands it.
 */
abstract class ProviderState {
    private volatile Object attachment;

    /** What the provider attached, or null. */
    public Object attachment() {
        return attachment;
    }

    /** Attaches the provider's own state. */
    public void attach(Object state) {
        attachment = state;
    }
}
