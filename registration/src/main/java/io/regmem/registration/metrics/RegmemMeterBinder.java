package io.regmem.registration.metrics;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.binder.BaseUnits;
import io.micrometer.core.instrument.binder.MeterBinder;
import io.regmem.core.BufferPool;
import io.regmem.registration.CacheStats;
import io.regmem.registration.DatagramDrop;
import io.regmem.registration.DeviceCounters;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.WcStatus;
import io.regmem.registration.internal.Lifecycle;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;
import java.util.function.ToDoubleFunction;

/**
 * The figures of {@link RegmemMBeans} as Micrometer meters, in Micrometer's naming conventions
 * (dot-separated, base units in the unit, tags for the object). Bind it once; from then on every
 * pool, device and registration cache open, and each one opened later, has its meters, removed
 * from the registry when it closes; {@link #close()} removes them all and stops.
 *
 * <table>
 * <caption>Meters</caption>
 * <tr><th>name</th><th>type</th><th>tags</th></tr>
 * <tr><td>{@code regmem.pool.memory.reserved}, {@code .used}, {@code .cached}</td><td>gauge, bytes</td><td>{@code pool}</td></tr>
 * <tr><td>{@code regmem.pool.buffers.live}</td><td>gauge</td><td>{@code pool}</td></tr>
 * <tr><td>{@code regmem.pool.allocations}, {@code regmem.pool.exhausted}, {@code regmem.pool.given.back} (chunks)</td><td>function counter</td><td>{@code pool}</td></tr>
 * <tr><td>{@code regmem.pool.memory.given.back}</td><td>function counter, bytes</td><td>{@code pool}</td></tr>
 * <tr><td>{@code regmem.device.objects}, {@code regmem.device.connections}</td><td>gauge</td><td>{@code device}</td></tr>
 * <tr><td>{@code regmem.device.completions}</td><td>function counter</td><td>{@code device}, {@code status} (lower case: {@code success}, {@code rem_access_err}, ...)</td></tr>
 * <tr><td>{@code regmem.device.datagrams.dropped}</td><td>function counter</td><td>{@code device}, {@code reason} (lower case: {@code no_receive}, {@code too_small}, {@code qkey}, {@code no_qp})</td></tr>
 * <tr><td>{@code regmem.cache.gets}</td><td>function counter</td><td>{@code cache}, {@code result} ({@code hit}, {@code miss})</td></tr>
 * <tr><td>{@code regmem.cache.evictions}, {@code regmem.cache.invalidations}</td><td>function counter</td><td>{@code cache}</td></tr>
 * <tr><td>{@code regmem.cache.regions}, {@code regmem.cache.registered} (bytes)</td><td>gauge</td><td>{@code cache}</td></tr>
 * </table>
 *
 * <p>Micrometer ({@code io.micrometer:micrometer-core}) is an optional dependency of regmem: add it
 * to use this class. Meters read the objects' own counters when the registry polls them.
 */
public final class RegmemMeterBinder implements MeterBinder, AutoCloseable {
    private final Map<Object, List<Meter>> meters = new ConcurrentHashMap<>();
    private MeterRegistry registry;
    private Sources sources;

    /** A binder; {@link #bindTo} starts it. */
    public RegmemMeterBinder() {
    }

    @Override
    public synchronized void bindTo(MeterRegistry meterRegistry) {
        if (sources != null) {
            throw new IllegalStateException("RegmemMeterBinder: bound already (one registry per binder)");
        }
        registry = meterRegistry;
        sources = Sources.start(new Sources.Sink() {
            @Override
            public void add(BufferPool pool) {
                meters.put(pool, poolMeters(pool));
            }

            @Override
            public void add(RdmaDevice device) {
                meters.put(device, deviceMeters(device));
            }

            @Override
            public void add(Lifecycle.Cache cache) {
                meters.put(cache, cacheMeters(cache));
            }

            @Override
            public void remove(Object source) {
                drop(source);
            }
        });
    }

    /** Removes every meter this binder registered and stops adding new ones. */
    @Override
    public synchronized void close() {
        if (sources == null) {
            return;
        }
        sources.stop();
        sources = null;
        for (Object o : meters.keySet()) {
            drop(o);
        }
    }

    private void drop(Object source) {
        List<Meter> ms = meters.remove(source);
        if (ms != null) {
            for (Meter m : ms) {
                registry.remove(m);
            }
        }
    }

    private List<Meter> poolMeters(BufferPool pool) {
        List<Meter> ms = new ArrayList<>();
        String tag = pool.name();
        ms.add(gauge("regmem.pool.memory.reserved", pool, p -> p.stats().reservedBytes(), BaseUnits.BYTES,
                "Chunk memory reserved from the chunk source", "pool", tag));
        ms.add(gauge("regmem.pool.memory.used", pool, p -> p.stats().inUseBytes(), BaseUnits.BYTES,
                "Capacity of live buffers", "pool", tag));
        ms.add(gauge("regmem.pool.memory.cached", pool, p -> p.stats().cachedBytes(), BaseUnits.BYTES,
                "Free buffers held ready by thread caches and stashes", "pool", tag));
        ms.add(gauge("regmem.pool.buffers.live", pool, p -> p.stats().liveBuffers(), BaseUnits.BUFFERS,
                "Buffers allocated and not freed", "pool", tag));
        ms.add(counter("regmem.pool.allocations", pool, p -> p.stats().allocations(), "Allocations", "pool", tag));
        ms.add(counter("regmem.pool.exhausted", pool, p -> p.stats().exhausted(), "Allocations refused at maxBytes",
                "pool", tag));
        ms.add(counter("regmem.pool.given.back", pool, p -> p.stats().givenBackChunks(),
                "Size-class chunks given back while the pool ran (trim, decay)", "pool", tag));
        ms.add(counter("regmem.pool.memory.given.back", pool, p -> p.stats().givenBackBytes(),
                "Bytes of size-class chunks given back while the pool ran", "pool", tag));
        return ms;
    }

    private List<Meter> deviceMeters(RdmaDevice device) {
        List<Meter> ms = new ArrayList<>();
        DeviceCounters c = device.counters();
        String tag = device.name();
        ms.add(gauge("regmem.device.objects", c, DeviceCounters::objects, BaseUnits.OBJECTS, "Live verbs objects",
                "device", tag));
        ms.add(gauge("regmem.device.connections", c, DeviceCounters::connections, BaseUnits.CONNECTIONS,
                "Queue pairs ready to send", "device", tag));
        for (WcStatus s : WcStatus.values()) {
            ms.add(FunctionCounter.builder("regmem.device.completions", c, x -> x.completions(s))
                    .description("Completions polled, by status").tags("device", tag, "status",
                            s.name().toLowerCase(Locale.ROOT))
                    .register(registry));
        }
        for (DatagramDrop d : DatagramDrop.values()) {
            ms.add(FunctionCounter.builder("regmem.device.datagrams.dropped", c, x -> x.datagramsDropped(d))
                    .description("Unreliable datagrams addressed to the device's QPs and dropped, by reason")
                    .tags("device", tag, "reason", d.name().toLowerCase(Locale.ROOT)).register(registry));
        }
        return ms;
    }

    private List<Meter> cacheMeters(Lifecycle.Cache cache) {
        List<Meter> ms = new ArrayList<>();
        Supplier<CacheStats> s = cache.stats();
        String tag = cache.name();
        ms.add(FunctionCounter.builder("regmem.cache.gets", s, x -> x.get().hits()).description("Cache gets")
                .tags("cache", tag, "result", "hit").register(registry));
        ms.add(FunctionCounter.builder("regmem.cache.gets", s, x -> x.get().misses()).description("Cache gets")
                .tags("cache", tag, "result", "miss").register(registry));
        ms.add(counter("regmem.cache.evictions", s, x -> x.get().evictions(), "Idle regions evicted", "cache", tag));
        ms.add(counter("regmem.cache.invalidations", s, x -> x.get().invalidations(), "Regions invalidated", "cache",
                tag));
        ms.add(gauge("regmem.cache.regions", s, x -> x.get().regions(), null, "Regions indexed", "cache", tag));
        ms.add(gauge("regmem.cache.registered", s, x -> x.get().registeredBytes(), BaseUnits.BYTES,
                "Bytes the indexed regions cover", "cache", tag));
        return ms;
    }

    private <T> Meter gauge(String name, T obj, ToDoubleFunction<T> f, String unit, String description, String... tags) {
        return Gauge.builder(name, obj, f).strongReference(true).baseUnit(unit).description(description).tags(tags)
                .register(registry);
    }

    private <T> Meter counter(String name, T obj, ToDoubleFunction<T> f, String description, String... tags) {
        return FunctionCounter.builder(name, obj, f).description(description).tags(tags).register(registry);
    }
}
