package io.regmem.registration.spi;

import java.lang.foreign.MemorySegment;

/** What the verbs layer tells a provider about a region it registers. */
public interface MrContext extends Guard {

    /** The region's name, for messages. */
    String name();

    /** Its rights ({@code Access} bits). */
    int access();

    /** True for an integrity (signature) MR. */
    boolean isIntegrity();

    /** The registered memory, or null for a fast-registration MR (it maps pages later, by REG_MR). */
    MemorySegment segment();

    /** True for a memory window's view of part of another region. */
    boolean isWindow();

    /** True while the region is registered and its mapping valid (false once deregistered or invalidated). */
    @Override
    boolean isValid();

    /**
     * True from the moment the region's deregistration made its keys invalid until the provider's
     * {@link ProviderMr#deregister()} returned (false after a revoke or an invalidation, which wait for
     * nothing). A provider that places the answer of a request started before (a READ's bytes, the
     * value an atomic found) into the region at completion may still place it while this is true, and
     * its {@code deregister()} waits for that; so a deregistration never makes a request fail after
     * its target executed it.
     */
    default boolean isDeregistering() {
        return false;
    }
}
