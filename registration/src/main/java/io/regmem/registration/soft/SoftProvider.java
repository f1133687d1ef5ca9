package io.regmem.registration.soft;

import io.regmem.registration.DeviceAttributes;
import io.regmem.registration.DeviceBackend;
import io.regmem.registration.RdmaProvider;
import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.lang.reflect.RecordComponent;
import java.util.Arrays;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;

/**
 * The embedded, in-process provider: {@code RdmaDevice.open("soft", options)}. Every
 * {@link DeviceAttributes} component can be set as an option ({@code maxSendSge=2},
 * {@code maxFastRegPageListLen=8}, {@code maxQpWr=4}, {@code iWarp=true}, ...), so tests can build
 * exactly the device a rule needs; {@code progressThread=true} executes posted work on a thread of
 * the device's own instead of in {@code poll}. An unknown option is {@code EINVAL}.
 */
public final class SoftProvider implements RdmaProvider {

    /** Made by {@link java.util.ServiceLoader}. */
    public SoftProvider() {
    }

    @Override
    public String name() {
        return "soft";
    }

    /** Options besides the {@link DeviceAttributes} components. */
    private static final Set<String> OWN_OPTIONS = Set.of("progressThread");

    @Override
    public DeviceBackend open(Map<String, String> options) {
        for (String key : options.keySet()) {
            if (!OWN_OPTIONS.contains(key) && !ATTRIBUTE_NAMES.contains(key)) {
                throw new RdmaException(Errno.EINVAL, "soft: unknown option '" + key + "' (known: " + ATTRIBUTE_NAMES
                        + ", " + OWN_OPTIONS + ")");
            }
        }
        DeviceAttributes attributes = DeviceAttributes.defaults().with(options);
        String progress = options.getOrDefault("progressThread", "false");
        if (!progress.equals("true") && !progress.equals("false")) {
            throw new RdmaException(Errno.EINVAL, "soft: progressThread must be true or false, got " + progress);
        }
        return new SoftBackend(attributes, Boolean.parseBoolean(progress));
    }

    private static final Set<String> ATTRIBUTE_NAMES = Arrays.stream(DeviceAttributes.class.getRecordComponents())
            .map(RecordComponent::getName).collect(Collectors.toUnmodifiableSet());

    /**
     * The soft device's backend: its limits and whether it runs a progress thread. Its data path is
     * the shared verbs engine of the registration package, which checks keys, bounds and rights
     * exactly as a NIC does and moves bytes with {@code MemorySegment.copy}.
     */
    private record SoftBackend(DeviceAttributes attributes, boolean progressThread) implements DeviceBackend {
        @Override
        public String providerName() {
            return "soft";
        }
    }
}
