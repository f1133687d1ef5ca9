package io.regmem.registration.spi;

import io.regmem.registration.MemoryRegion;
import java.lang.foreign.MemorySegment;

/** What the verbs layer tells a provider about a region it registers. */
public interface MrContext {

    /** The public region (PD, access, keys). */
    MemoryRegion region();

    /** The registered memory, or null for a fast-registration MR (it maps pages later, by REG_MR). */
    MemorySegment segment();

    /** True for a memory window's view of part of another region. */
    boolean isWindow();
}
