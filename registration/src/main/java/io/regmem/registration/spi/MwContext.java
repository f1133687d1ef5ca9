package io.regmem.registration.spi;

/**
 * A memory window as a work request names it ({@link PostedWr#bindMw()}): opaque to providers, which
 * hand it back to the verbs layer ({@link MemoryAccess#bindWindow}).
 */
public interface MwContext {
}
