package io.regmem.registration.internal;

import io.regmem.registration.CacheStats;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;

/**
 * Devices and registration caches as they open and close, for regmem's JMX beans and Micrometer
 * binder (pools: {@code io.regmem.core.internal.PoolLifecycle}). A device is passed as {@code Object}
 * so that this package names no verbs class (as {@link CacheStatsBridge}). Internal: not exported.
 */
public final class Lifecycle {
    /** A registration cache as the metrics see it: a name and its counters. */
    public record Cache(String name, Supplier<CacheStats> stats) {
    }

    /** Told of each device and cache as it opens and closes (on the thread that does it; must not throw). */
    public interface Listener {
        /** A device opened (an {@code RdmaDevice}). */
        void deviceOpened(Object device);

        /** A device closed. */
        void deviceClosed(Object device);

        /** A registration cache was built. */
        void cacheOpened(Cache cache);

        /** A registration cache closed. */
        void cacheClosed(Cache cache);
    }

    private static final List<Listener> LISTENERS = new CopyOnWriteArrayList<>();
    private static final Map<Supplier<CacheStats>, Cache> CACHES = new ConcurrentHashMap<>();
    private static final AtomicInteger CACHE_NAMES = new AtomicInteger();

    private Lifecycle() {
    }

    /** Called when a device opened. */
    public static void deviceOpened(Object device) {
        for (Listener l : LISTENERS) {
            l.deviceOpened(device);
        }
    }

    /** Called when a device closed. */
    public static void deviceClosed(Object device) {
        for (Listener l : LISTENERS) {
            l.deviceClosed(device);
        }
    }

    /** Called when a cache over a PD of {@code device} is built. */
    static void cacheOpened(String device, Supplier<CacheStats> stats) {
        Cache c = new Cache(device + ".cache" + CACHE_NAMES.incrementAndGet(), stats);
        CACHES.put(stats, c);
        for (Listener l : LISTENERS) {
            l.cacheOpened(c);
        }
    }

    /** Called when that cache closes. */
    static void cacheClosed(Supplier<CacheStats> stats) {
        Cache c = CACHES.remove(stats);
        if (c != null) {
            for (Listener l : LISTENERS) {
                l.cacheClosed(c);
            }
        }
    }

    /** The caches open now. */
    public static List<Cache> openCaches() {
        return List.copyOf(CACHES.values());
    }

    /** Adds a listener; it is not told of what is open already (read the open lists after adding it). */
    public static void addListener(Listener listener) {
        LISTENERS.add(listener);
    }

    /** Removes a listener. */
    public static void removeListener(Listener listener) {
        LISTENERS.remove(listener);
    }
}
