package io.regmem.core.internal;

import io.regmem.core.BufferPool;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * The pools open in this JVM, and who wants to hear when one opens or closes (regmem's JMX beans
 * and Micrometer binder). Internal: exported to regmem's own modules only.
 */
public final class PoolLifecycle {
    /** Told of each pool as it opens and as it closes (on the thread that builds or closes it; must not throw). */
    public interface Listener {
        /** A pool was built. */
        void opened(BufferPool pool);

        /** A pool closed. */
        void closed(BufferPool pool);
    }

    private static final Set<BufferPool> OPEN = ConcurrentHashMap.newKeySet();
    private static final List<Listener> LISTENERS = new CopyOnWriteArrayList<>();

    private PoolLifecycle() {
    }

    /** Called by the pool when it is built. */
    public static void opened(BufferPool pool) {
        OPEN.add(pool);
        for (Listener l : LISTENERS) {
            l.opened(pool);
        }
    }

    /** Called by the pool when it closes. */
    public static void closed(BufferPool pool) {
        if (OPEN.remove(pool)) {
            for (Listener l : LISTENERS) {
                l.closed(pool);
            }
        }
    }

    /** The pools open now (a snapshot). */
    public static List<BufferPool> open() {
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
