package io.regmem.registration;

import java.util.ArrayList;

/**
 * Connection events waiting for delivery on this thread. A {@link CmId} call opens a scope
 * ({@link #begin}); events its provider reports are queued and run by the handlers when the
 * outermost scope ends ({@link #end}), after every lock was released. An event reported outside any
 * scope (from a provider's own thread) is delivered at once.
 */
final class CmEvents {
    private static final ThreadLocal<CmEvents> CURRENT = ThreadLocal.withInitial(CmEvents::new);
    private final ArrayList<CmEvent> queued = new ArrayList<>();
    private int depth;

    private CmEvents() {
    }

    static void begin() {
        CURRENT.get().depth++;
    }

    static void end() {
        CmEvents e = CURRENT.get();
        if (--e.depth > 0) {
            return;
        }
        boolean done = false;
        try {
            while (!e.queued.isEmpty()) {
                CmEvent[] batch = e.queued.toArray(CmEvent[]::new);
                e.queued.clear();
                for (CmEvent ev : batch) {
                    CmId.deliver(ev);
                }
            }
            done = true;
        } finally {
            if (!done) {
                e.queued.clear(); // a handler threw: the rest of this call's events are dropped with it
            }
        }
    }

    static void post(CmEvent event) {
        CmEvents e = CURRENT.get();
        if (e.depth > 0) {
            e.queued.add(event);
        } else {
            CmId.deliver(event);
        }
    }
}
