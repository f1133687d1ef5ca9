package io.regmem.registration.spi;

/** The provider's handle of a registered memory region. */
public interface ProviderMr {

    /**
     * The provider-neutral exported form of a remote key of this region: the bytes a peer gives to
     * {@link ProviderQp#importRemoteKey} (soft: the 32-bit rkey, big-endian; UCX: a packed rkey).
     *
     * @param rkey the region's current rkey
     */
    byte[] exportRemoteKey(int rkey);

    /**
     * Deregisters. When this returns the provider touches none of the region's memory, and no access
     * through any of its keys will start. The verbs layer has made the keys invalid before.
     */
    void deregister();
}
