package io.regmem.registration.spi;

import java.util.Map;

/**
 * A transport provider, found through {@link java.util.ServiceLoader} by its {@link #name()}
 * ({@code soft}, {@code ucx}): {@code RdmaDevice.open(name, options)} calls it.
 * Register an implementation in {@code META-INF/services/io.regmem.registration.spi.RdmaProvider}
 * (or with {@code provides} in a module).
 */
public interface RdmaProvider {

    /** The name users open the provider by. */
    String name();

    /**
     * Opens a device.
     *
     * @param options the provider's own options (the device-wide ones, {@code name},
     *                {@code rwForceMr} and {@code trackSites}, are taken out before)
     * @throws io.regmem.core.RdmaException {@link io.regmem.core.Errno#EINVAL} for a bad option;
     *                                      {@link io.regmem.core.Errno#ENODEV} when the transport is absent
     */
    ProviderDevice open(Map<String, String> options);
}
