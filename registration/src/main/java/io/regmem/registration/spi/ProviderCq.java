package io.regmem.registration.spi;

/** The provider's half of a completion queue. */
public interface ProviderCq {

    /**
     * Makes progress on the work that completes on this CQ (and on what that work depends on), so
     * that its completions appear in the CQ ({@link QpContext#completeSend}, {@link QpContext#completeRecv}).
     * Called by every poll before it reads the queue, with no lock held. An asynchronous provider
     * drives its transport here; a provider with a progress thread of its own may do nothing.
     */
    void progress();

    /** The CQ is destroyed (no QP uses it any more). */
    void destroy();
}
