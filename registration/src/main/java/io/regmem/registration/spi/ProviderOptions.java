package io.regmem.registration.spi;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.DeviceAttributes;
import io.regmem.registration.link.Secret;
import java.lang.reflect.RecordComponent;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Collectors;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.BusySpinIdleStrategy;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.SleepingIdleStrategy;
import org.agrona.concurrent.YieldingIdleStrategy;

/**
 * A device's options as {@code RdmaDevice.open(provider, options)} gave them, read the one way every
 * provider reads them: the {@link DeviceAttributes} limits (which lower what the device offers) and
 * the provider's own options, each typed and ranged, every bad value an {@link Errno#EINVAL} that
 * names the provider, the option, what it must be and what it got:
 * {@code "shm: ringBytes must be 65536 to 268435456, got 12"}. Made by {@link #of}, which refuses an
 * unknown option at once.
 */
public final class ProviderOptions {
    private static final Set<String> ATTRIBUTE_NAMES = Arrays.stream(DeviceAttributes.class.getRecordComponents())
            .map(RecordComponent::getName).collect(Collectors.toUnmodifiableSet());
    /** The idle strategies a progress thread takes, by name. */
    public static final String IDLE_STRATEGIES = "busy, yield, backoff or sleep";
    private static final Set<String> IDLE_NAMES = Set.of("busy", "yield", "backoff", "sleep");

    private final String provider;
    private final Map<String, String> options;
    private final Set<String> own;

    private ProviderOptions(String provider, Map<String, String> options, Set<String> own) {
        this.provider = provider;
        this.options = options;
        this.own = own;
    }

    /**
     * The options of a device of {@code provider}, whose own options (besides the attribute limits)
     * are {@code own}.
     *
     * @throws RdmaException {@link Errno#EINVAL} for an option that is neither, naming every known one
     */
    public static ProviderOptions of(String provider, Map<String, String> options, Set<String> own) {
        for (String key : options.keySet()) {
            if (!ATTRIBUTE_NAMES.contains(key) && !own.contains(key)) {
                TreeSet<String> known = new TreeSet<>(ATTRIBUTE_NAMES);
                known.addAll(own);
                throw new RdmaException(Errno.EINVAL, provider + ": unknown option '" + key + "' (known: " + known + ")");
            }
        }
        return new ProviderOptions(provider, Map.copyOf(options), Set.copyOf(own));
    }

    /** The provider's name, as messages begin. */
    public String provider() {
        return provider;
    }

    /** The option's value as given, or {@code dflt}. */
    public String get(String name, String dflt) {
        return options.getOrDefault(name, dflt);
    }

    /**
     * {@code true} or {@code false}, or {@code dflt} if not given.
     *
     * @throws RdmaException {@link Errno#EINVAL} for anything else
     */
    public boolean flag(String name, boolean dflt) {
        String v = options.get(name);
        if (v == null) {
            return dflt;
        }
        if (!v.equals("true") && !v.equals("false")) {
            throw invalid(name + " must be true or false, got " + v);
        }
        return v.equals("true");
    }

    /**
     * A whole number in [{@code min}, {@code max}], or {@code dflt} if not given.
     *
     * @throws RdmaException {@link Errno#EINVAL} for a value that is not one
     */
    public long number(String name, long dflt, long min, long max) {
        String v = options.get(name);
        if (v == null) {
            return dflt;
        }
        long n;
        try {
            n = Long.parseLong(v);
        } catch (NumberFormatException e) {
            throw invalid(name + " must be " + min + " to " + max + ", got " + v);
        }
        if (n < min || n > max) {
            throw invalid(name + " must be " + min + " to " + max + ", got " + v);
        }
        return n;
    }

    /** A millisecond count in [{@code min}, 600000] (ten minutes), or {@code dflt}. */
    public long millis(String name, long dflt, long min) {
        return number(name, dflt, min, 600_000);
    }

    /** The {@code progressThread} option: {@code true} runs the device on a thread of its own. */
    public boolean progressThread() {
        return flag("progressThread", false);
    }

    /** The {@code idleStrategy} option's name ({@value #IDLE_STRATEGIES}; default {@code backoff}), checked. */
    public String idleStrategyName() {
        String name = options.getOrDefault("idleStrategy", "backoff");
        if (!IDLE_NAMES.contains(name)) {
            throw invalid("idleStrategy must be " + IDLE_STRATEGIES + ", got " + name);
        }
        return name;
    }

    /**
     * The {@code idleStrategy} option: {@code busy} (spin), {@code yield}, {@code backoff} (spin, yield,
     * then park from 1 us up to 1 ms) or {@code sleep} (park 100 us).
     */
    public IdleStrategy idleStrategy() {
        return idleStrategy(idleStrategyName());
    }

    /** True if the idle strategy parks (a progress thread that may then sleep until woken). */
    public boolean idleSleeps() {
        String name = idleStrategyName();
        return !name.equals("busy") && !name.equals("yield");
    }

    private IdleStrategy idleStrategy(String name) {
        return switch (name) {
            case "busy" -> new BusySpinIdleStrategy();
            case "yield" -> new YieldingIdleStrategy();
            case "backoff" -> new BackoffIdleStrategy(64, 64, 1_000, 1_000_000);
            default -> new SleepingIdleStrategy(100_000); // "sleep" (the name was checked)
        };
    }

    /**
     * The secret that authenticates connections between processes: {@code secret} or
     * {@code secretFile}, else the environment's or the user's (see {@code Secret}).
     */
    public byte[] secret() {
        return Secret.configured(provider, options, System.getenv());
    }

    /**
     * {@code defaults} lowered by the attribute options; {@code iWarp=true} or
     * {@code integrityHandover=true} where the provider has not that capability is refused, as are
     * multicast limits above 0 where {@code defaults} has none (a provider without multicast).
     *
     * @param noIwarp      why the provider offers no iWARP (null: it does)
     * @param noIntegrity  why the provider offers no T10-PI signature offload (null: it does)
     * @throws RdmaException {@link Errno#EINVAL} for a bad limit; {@link Errno#EOPNOTSUPP} for a capability
     *                       not offered
     */
    public DeviceAttributes attributes(DeviceAttributes defaults, String noIwarp, String noIntegrity) {
        HashMap<String, String> limits = new HashMap<>(options);
        limits.keySet().removeAll(own);
        DeviceAttributes attributes = defaults.with(limits);
        if (attributes.iWarp() && noIwarp != null) {
            throw new RdmaException(Errno.EOPNOTSUPP, provider + ": iWarp=true is not offered (" + noIwarp + ")");
        }
        if (attributes.integrityHandover() && noIntegrity != null) {
            throw new RdmaException(Errno.EOPNOTSUPP, provider + ": integrityHandover=true is not offered (" + noIntegrity
                    + ")");
        }
        if (defaults.maxMcastGroups() == 0 && attributes.maxMcastGroups() > 0) {
            throw new RdmaException(Errno.EOPNOTSUPP, provider + ": maxMcastGroups=" + attributes.maxMcastGroups()
                    + " is not offered (this provider carries no multicast)");
        }
        return attributes;
    }

    /** An {@link Errno#EINVAL} whose message begins with the provider's name. */
    public RdmaException invalid(String rule) {
        return new RdmaException(Errno.EINVAL, provider + ": " + rule);
    }
}
