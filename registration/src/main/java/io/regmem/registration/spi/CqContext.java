package io.regmem.registration.spi;

import io.regmem.registration.CompletionQueue;

/** What the verbs layer offers a provider for one completion queue. */
public interface CqContext {

    /** The public completion queue. */
    CompletionQueue completionQueue();

    /** What the provider attached ({@link #attach}), or null. */
    Object attachment();

    /** Attaches the provider's own state. */
    void attach(Object state);
}
