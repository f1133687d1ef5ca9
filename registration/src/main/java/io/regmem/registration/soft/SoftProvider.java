package io.regmem.registration.soft;

import io.regmem.registration.DeviceAttributes;
import io.regmem.registration.spi.GracePeriod;
import io.regmem.registration.spi.ProviderDevice;
import io.regmem.registration.spi.ProviderOptions;
import io.regmem.registration.spi.RdmaProvider;
import java.util.Map;
import java.util.Set;

/**
 * The embedded, in-process provider: {@code RdmaDevice.open("soft", options)}. Every
 * {@link DeviceAttributes} component can be set as an option ({@code maxSendSge=2},
 * {@code maxFastRegPageListLen=8}, {@code maxQpWr=4}, {@code iWarp=true}, ...), so tests can build
 * exactly the device a rule needs; {@code progressThread=true} executes posted work on a thread of
 * the device's own as well as in {@code poll}; {@code udOversizeError=true} completes a UD send
 * larger than {@code activeMtu} with {@code LOC_LEN_ERR} instead of the IBA's silent success. An
 * unknown option is {@code EINVAL}.
 *
 * <p>Its data path checks keys, bounds and rights exactly as a NIC does and moves bytes with
 * {@code MemorySegment.copy} through the registered segments themselves; connections link two QPs
 * of this JVM by a listener name. Fault injection for tests: {@link io.regmem.registration.faults.QpFaults}.
 */
public final class SoftProvider implements RdmaProvider {

    /** Made by {@link java.util.ServiceLoader}. */
    public SoftProvider() {
    }

    @Override
    public String name() {
        return "soft";
    }

    /**
     * The grace-period domain of the soft data path, shared by every soft device of this JVM (one
     * reader per live soft QP): its counters show how often deregistration had to wait.
     */
    public static GracePeriod gracePeriod() {
        return SoftWire.GRACE;
    }

    /** Options besides the {@link DeviceAttributes} components. */
    private static final Set<String> OWN_OPTIONS = Set.of("progressThread", "udOversizeError");

    @Override
    public ProviderDevice open(Map<String, String> given) {
        ProviderOptions options = ProviderOptions.of("soft", given, OWN_OPTIONS);
        boolean progress = options.progressThread();
        return new SoftDevice(options.attributes(DeviceAttributes.defaults(), null, null), progress,
                options.flag("udOversizeError", false));
    }
}
