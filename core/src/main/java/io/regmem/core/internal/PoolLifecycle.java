package io.regmem.core.internal;

import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * The pools open in this JVM, and who wants to hear when one opens or closes (regmem's JMX beans
 * and Micrometer binder). Internal: exported to regmem's own modules only. A pool is passed as
 * {@code Object} (it is always an {@code io.regmem.core.BufferPool}), so that this package does not
 * depend on the one that depends on it.
 */
public final class PoolLifecycle {
    /** Told of each pool as it opens and as it closes (on the thread that builds or closes it; must not throw). */
    public interface Listener {
        /** A pool was built. */
        void poolOpened(Object pool);

        /** A pool closed. */
        void poolClosed(Object pool);
    }

    private static final Set<Object> OPEN = ConcurrentHashMap.newKeySet();
    private static final List<Listener> LISTENERS = new CopyOnWriteArrayList<>();

    private PoolLifecycle() {
    }

    /** Called by the pool when it is built. */
    public static void opened(Object pool) {
        OPEN.add(pool);
        for (Listener l : LISTENERS) {
            l.poolOpened(pool);
        }
    }

    /** Called by the pool when it closes. */
    public static void closed(Object pool) {
        if (OPEN.remove(pool)) {
            for (Listener l : LISTENERS) {
                l.poolClosed(pool);
            }
        }
    }

    /** The pools open now (a snapshot). */
    public static List<Object> open() {
        return List.copyOf(OPEN);
    }

    /** Adds a listener; it is not told of the pools open already (read {@link #open()} after adding it). */
    public static void addListener(Listener listener) {
        LISTENERS.add(listener);
    }

    /** Removes a listener. */
    public static void removeListener(Listener listener) {
        LISTENERS.remove(listener);
    }
}
