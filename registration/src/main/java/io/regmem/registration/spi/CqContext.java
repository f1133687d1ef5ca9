package io.regmem.registration.spi;

/** What the verbs layer offers a provider for one completion queue. */
public interface CqContext {

    /** What the provider attached ({@link #attach}), or null. */
    Object attachment();

    /** Attaches the provider's own state. */
    void attach(Object state);
}
