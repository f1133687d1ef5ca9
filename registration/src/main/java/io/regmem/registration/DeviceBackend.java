package io.regmem.registration;

/**
 * What a provider supplies to an {@link RdmaDevice}: the device's limits and, as providers grow,
 * its data path. The object model (ownership, counts, keys, destroy rules) is the same for every
 * provider and lives in the {@code RdmaDevice} family itself, so every provider obeys it alike.
 */
public interface DeviceBackend {

    /** The provider's name, e.g. {@code soft}. */
    String providerName();

    /** The device's limits. */
    DeviceAttributes attributes();

    /**
     * True if the device should progress its queues on a thread of its own, so completions appear
     * without anybody polling. Default: false (every {@link CompletionQueue#poll} progresses).
     */
    default boolean progressThread() {
        return false;
    }

    /** Releases the provider's own resources; called once, after every verbs object is gone. */
    default void close() {
    }
}
