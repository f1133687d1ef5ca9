package io.regmem.registration.spi;

import java.lang.foreign.MemorySegment;

/** The provider's handle of a registered memory region. */
public interface ProviderMr {

    /** Bytes of the exported form of the region's remote key {@code rkey} (soft: 4). */
    int exportedKeySize(int rkey);

    /**
     * Writes the provider-neutral exported form of a remote key of this region into {@code to}
     * (exactly {@link #exportedKeySize} bytes): what a peer gives to {@link ProviderQp#importRemoteKey}
     * (soft: the 32-bit rkey, big-endian; UCX: a packed rkey).
     *
     * @param rkey the region's current rkey
     */
    void exportRemoteKey(int rkey, MemorySegment to);

    /**
     * Deregisters. When this returns the provider touches none of the region's memory, and no access
     * through any of its keys will start. The verbs layer has made the keys invalid before.
     */
    void deregister();
}
