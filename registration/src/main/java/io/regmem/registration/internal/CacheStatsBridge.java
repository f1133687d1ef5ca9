package io.regmem.registration.internal;

import io.regmem.registration.CacheStats;
import java.util.function.BiFunction;
import java.util.function.Function;
import java.util.function.Supplier;

/**
 * How a registration cache ({@code io.regmem.registration.cache}) adds its counters to its protection
 * domain's {@code cacheStats()} without a public method on the PD for it: the PD class installs the
 * function when it is initialised (the JDK's shared-secrets pattern), and the cache calls
 * {@link #attach}. Internal: this package is not exported. The PD is passed as {@code Object} so this
 * class names no verbs object (no import circle).
 */
public final class CacheStatsBridge {
    private static volatile BiFunction<Object, Supplier<CacheStats>, Runnable> attach;
    private static volatile Function<Object, String> deviceName;

    private CacheStatsBridge() {
    }

    /** Installed once, by the protection domain's class initialiser. */
    public static void install(BiFunction<Object, Supplier<CacheStats>, Runnable> attachToPd,
                               Function<Object, String> deviceOfPd) {
        attach = attachToPd;
        deviceName = deviceOfPd;
    }

    /**
     * Adds {@code stats} to {@code pd}'s cache counters; running the returned action detaches it,
     * keeping its counters in the PD's totals.
     */
    public static Runnable attach(Object pd, Supplier<CacheStats> stats) {
        Runnable detach = attach.apply(pd, stats);
        Lifecycle.cacheOpened(deviceName.apply(pd), stats);
        return () -> {
            detach.run();
            Lifecycle.cacheClosed(stats);
        };
    }
}
