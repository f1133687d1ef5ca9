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
}
