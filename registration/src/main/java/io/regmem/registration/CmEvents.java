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
    /** The ID whose event handler this thread is running, if any. */
    private static final ThreadLocal<CmId> IN_HANDLER = new ThreadLocal<>();
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
                    deliver(ev);
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
            deliver(event);
        }
    }

    /** True while this thread runs {@code id}'s event handler. */
    static boolean inHandlerOf(CmId id) {
        return IN_HANDLER.get() == id;
    }

    /** Runs the handler of an event, outside every lock. */
    private static void deliver(CmEvent event) {
        CmEvent e = event.type() == CmEvent.Type.MULTICAST_JOIN ? event.id().joins.take(event) : event;
        if (e == null) {
            return; // the join was left before its event was taken
        }
        CmId id = e.id();
        CmEventHandler h = id.handler;
        if (h == null) {
            return;
        }
        CmId outer = IN_HANDLER.get();
        IN_HANDLER.set(id);
        boolean destroy;
        try {
            destroy = h.onEvent(e);
        } catch (RuntimeException | Error thrown) {
            if (!id.device().errors.report(thrown)) {
                throw thrown; // no error handler: the thread that delivered the event sees it, as before
            }
            return;
        } finally {
            IN_HANDLER.set(outer);
        }
        if (destroy && !id.isDestroyed()) {
            destroyAfterEvent(id);
        }
    }

    /** What a handler's "true" asks for: reject a request, disconnect and free the QP, destroy the ID. */
    private static void destroyAfterEvent(CmId id) {
        if (id.connState() == CmId.ConnState.REQUESTED) {
            id.reject();
        } else if (id.connState() == CmId.ConnState.CONNECTED) {
            id.disconnect();
        }
        if (id.qp() != null) {
            id.destroyQp();
        }
        id.close();
    }
}
