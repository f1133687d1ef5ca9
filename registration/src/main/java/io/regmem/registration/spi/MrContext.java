package io.regmem.registration.spi;

import io.regmem.registration.MemoryRegion;
import java.lang.foreign.MemorySegment;

/** What the verbs layer tells a provider about a region it registers. */
public interface MrContext {

    /**
     * The public region (PD, access, keys), for the verbs layer's own helpers; a provider uses the
     * values below instead.
     */
    MemoryRegion region();

    /** The region's name, for messages. */
    String name();

    /** Its rights ({@link io.regmem.registration.Access} bits). */
    int access();

    /** True for an integrity (signature) MR. */
    boolean isIntegrity();

    /** The registered memory, or null for a fast-registration MR (it maps pages later, by REG_MR). */
    MemorySegment segment();

    /** True for a memory window's view of part of another region. */
    boolean isWindow();
}
