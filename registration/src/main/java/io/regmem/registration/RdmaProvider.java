package io.regmem.registration;

import java.util.Map;

/**
 * A transport provider found through {@link java.util.ServiceLoader} by its {@link #name()}
 * ({@code soft}, {@code ucx}). {@link RdmaDevice#open(String, Map)} calls it.
 */
public interface RdmaProvider {

    /** The name users open the provider by. */
    String name();

    /**
     * Opens a device backend.
     *
     * @param options provider options (for soft: any {@link DeviceAttributes} component, e.g. {@code maxSendSge=2})
     * @throws io.regmem.core.RdmaException {@link io.regmem.core.Errno#EINVAL} for a bad option
     */
    DeviceBackend open(Map<String, String> options);
}
