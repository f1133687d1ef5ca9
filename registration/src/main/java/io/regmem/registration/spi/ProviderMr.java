package io.regmem.registration.spi;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/** The provider's handle of a registered memory region. */
public interface ProviderMr {

    /** Bytes of the exported form of the region's remote key {@code rkey}; by default 4 (the key itself). */
    default int exportedKeySize(int rkey) {
        return 4;
    }

    /**
     * Writes the provider-neutral exported form of a remote key of this region into {@code to}
     * (exactly {@link #exportedKeySize} bytes): what a peer gives to {@link ProviderQp#importRemoteKey}
     * (soft: the 32-bit rkey, big-endian; UCX: a packed rkey).
     *
     * By default: the 32-bit rkey, big-endian (soft, shm).
     *
     * @param rkey the region's current rkey
     */
    default void exportRemoteKey(int rkey, MemorySegment to) {
        to.set(ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN), 0, rkey);
    }

    /**
     * Deregisters. When this returns the provider touches none of the region's memory, and no access
     * through any of its keys will start. The verbs layer has made the keys invalid before.
     */
    void deregister();
}
