package io.regmem.registration.metrics;

import io.regmem.core.BufferPool;
import io.regmem.core.internal.PoolLifecycle;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.internal.Lifecycle;

/**
 * Feeds a {@link Sink} every pool, device and registration cache open now and each one that opens
 * or closes from now on, until {@link #stop()}.
 */
final class Sources implements PoolLifecycle.Listener, Lifecycle.Listener {
    /** What a source is added to and removed from (on the thread that opens or closes it; must not throw). */
    interface Sink {
        void add(BufferPool pool);

        void add(RdmaDevice device);

        void add(Lifecycle.Cache cache);

        /** A pool, device or cache closed: drop what {@code add} made for it. */
        void remove(Object source);
    }

    private final Sink sink;

    private Sources(Sink sink) {
        this.sink = sink;
    }

    /** Starts feeding {@code sink}: first what is open, then what opens and closes. */
    static Sources start(Sink sink) {
        Sources s = new Sources(sink);
        PoolLifecycle.addListener(s);
        Lifecycle.addListener(s);
        for (Object p : PoolLifecycle.open()) {
            sink.add((BufferPool) p);
        }
        for (RdmaDevice d : RdmaDevice.openDevices()) {
            sink.add(d);
        }
        for (Lifecycle.Cache c : Lifecycle.openCaches()) {
            sink.add(c);
        }
        return s;
    }

    /** Stops listening (the sink removes what it added itself). */
    void stop() {
        PoolLifecycle.removeListener(this);
        Lifecycle.removeListener(this);
    }

    @Override
    public void poolOpened(Object pool) {
        sink.add((BufferPool) pool);
    }

    @Override
    public void poolClosed(Object pool) {
        sink.remove(pool);
    }

    @Override
    public void deviceOpened(Object device) {
        sink.add((RdmaDevice) device);
    }

    @Override
    public void deviceClosed(Object device) {
        sink.remove(device);
    }

    @Override
    public void cacheOpened(Lifecycle.Cache cache) {
        sink.add(cache);
    }

    @Override
    public void cacheClosed(Lifecycle.Cache cache) {
        sink.remove(cache);
    }
}
