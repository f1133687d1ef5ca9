package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.spi.ProviderDevice;
import io.regmem.registration.spi.RdmaProvider;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.ServiceLoader;

/**
 * {@link RdmaDevice#open(String, Map)}: the options every device takes ({@link RdmaDevice#NAME},
 * {@link RdmaDevice#RW_FORCE_MR}, {@link RdmaDevice#TRACK_SITES}) checked and taken out, the provider
 * found through {@link ServiceLoader} and given the rest, the device named and listed.
 */
final class DeviceOpening {
    private DeviceOpening() {
    }

    static RdmaDevice open(String provider, Map<String, String> options) {
        if (provider == null || options == null) {
            throw new RdmaException(Errno.EINVAL, "RdmaDevice: open needs a provider name and an options map (empty for "
                    + "none), got " + provider + " and " + (options == null ? "null" : "a map"));
        }
        for (Map.Entry<String, String> e : options.entrySet()) {
            if (e.getKey() == null || e.getValue() == null) {
                throw new RdmaException(Errno.EINVAL, "RdmaDevice: option " + e.getKey() + "=" + e.getValue()
                        + " has a null name or value");
            }
        }
        List<String> names = new ArrayList<>();
        for (RdmaProvider p : ServiceLoader.load(RdmaProvider.class, RdmaDevice.class.getClassLoader())) {
            if (p.name().equals(provider)) {
                Map<String, String> own = new HashMap<>(options);
                boolean forceMr = parseFlag(own.remove(RdmaDevice.RW_FORCE_MR), RdmaDevice.RW_FORCE_MR);
                int sites = parseTrackSites(own.remove(RdmaDevice.TRACK_SITES));
                String asked = own.remove(RdmaDevice.NAME);
                checkName(asked);
                ProviderDevice backend = p.open(Map.copyOf(own));
                RdmaDevice device;
                try {
                    device = OpenDevices.add(provider, asked, n -> new RdmaDevice(backend, provider, n));
                } catch (RuntimeException e) {
                    backend.close();
                    throw e;
                }
                device.rwForceMr = forceMr;
                device.trackSites = sites;
                backend.countDropsIn((reason, count) -> dropped(device, reason, count));
                return device;
            }
            names.add(p.name());
        }
        String hint = provider.equals("ucx") ? "; the ucx provider is the regmem-ucx artifact (module io.regmem.ucx): put it on the "
                + "class path, or on the module path with --add-modules io.regmem.ucx" : "";
        throw new RdmaException(Errno.ENOENT, "RdmaDevice: no provider named '" + provider + "' (present: " + names + ")" + hint);
    }

    /** Datagrams {@code device} dropped before they reached a QP: counted, and a JFR event naming the device. */
    private static void dropped(RdmaDevice device, DatagramDrop reason, long count) {
        device.counters.dropped(reason, count);
        RegistrationEvents.DatagramDropped event = new RegistrationEvents.DatagramDropped();
        if (event.shouldCommit()) {
            event.qp = device.name() + " (no QP)";
            event.reason = reason.name();
            event.commit();
        }
    }

    private static void checkName(String name) {
        if (name != null && (name.isEmpty() || name.length() > 64 || !name.matches("[A-Za-z0-9_.-]+"))) {
            throw new RdmaException(Errno.EINVAL, "RdmaDevice: option " + RdmaDevice.NAME + " must be 1 to 64 letters, "
                    + "digits, '-', '_' or '.', got '" + name + "'");
        }
    }

    private static int parseTrackSites(String value) {
        if (value == null || value.equals("sampled")) {
            return 1;
        }
        return switch (value) {
            case "all" -> 2;
            case "off" -> 0;
            default -> throw new RdmaException(Errno.EINVAL, "RdmaDevice: option " + RdmaDevice.TRACK_SITES
                    + " must be all, sampled or off, got " + value);
        };
    }

    private static boolean parseFlag(String value, String name) {
        if (value == null || value.equalsIgnoreCase("false")) {
            return false;
        }
        if (value.equalsIgnoreCase("true")) {
            return true;
        }
        throw new RdmaException(Errno.EINVAL, "RdmaDevice: option " + name + " must be true or false, got " + value);
    }
}
