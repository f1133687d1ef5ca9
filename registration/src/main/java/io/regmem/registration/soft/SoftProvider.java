package io.regmem.registration.soft;

import io.regmem.registration.DeviceAttributes;
import io.regmem.registration.DeviceBackend;
import io.regmem.registration.RdmaProvider;
import java.util.Map;

/**
 * The embedded, in-process provider: {@code RdmaDevice.open("soft", options)}. Every
 * {@link DeviceAttributes} component can be set as an option ({@code maxSendSge=2},
 * {@code maxFastRegPageListLen=8}, {@code maxQpWr=4}, {@code iWarp=true}, ...), so tests can build
 * exactly the device a rule needs.
 */
public final class SoftProvider implements RdmaProvider {

    /** Made by {@link java.util.ServiceLoader}. */
    public SoftProvider() {
    }

    @Override
    public String name() {
        return "soft";
    }

    @Override
    public DeviceBackend open(Map<String, String> options) {
        DeviceAttributes attributes = DeviceAttributes.defaults().with(options);
        return new SoftBackend(attributes);
    }

    /** The soft device's backend: its limits (its data path arrives with the next steps of issue 3). */
    private record SoftBackend(DeviceAttributes attributes) implements DeviceBackend {
        @Override
        public String providerName() {
            return "soft";
        }
    }
}
