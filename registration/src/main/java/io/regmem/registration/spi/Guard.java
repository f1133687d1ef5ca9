package io.regmem.registration.spi;

/**
 * What keeps a resolved piece of memory reachable: a region's registration ({@link MrContext}) or a
 * DMA mapping. {@link Segments} checks its pieces' guards again between copy pieces, inside a new
 * grace-period section, so a deregistration that waited for the previous section is seen.
 */
@FunctionalInterface
public interface Guard {

    /** True while the registration or mapping still lets the data path reach its memory. */
    boolean isValid();
}
