package io.regmem.registration.metrics;

import io.regmem.core.BufferPool;
import io.regmem.core.PoolStats;
import io.regmem.registration.CacheStats;
import io.regmem.registration.DatagramDrop;
import io.regmem.registration.DeviceCounters;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.WcStatus;
import io.regmem.registration.internal.Lifecycle;
import java.util.LinkedHashMap;
import java.util.Map;

/** The MXBean implementations: thin readers over the pools', devices' and caches' own counters. */
final class Beans {
    private Beans() {
    }

    static final class Pool implements BufferPoolMXBean {
        private final BufferPool pool;

        Pool(BufferPool pool) {
            this.pool = pool;
        }

        private PoolStats stats() {
            return pool.stats();
        }

        @Override
        public String getName() {
            return pool.name();
        }

        @Override
        public String getSafetyMode() {
            return pool.safetyMode().name();
        }

        @Override
        public long getMaxBytes() {
            return pool.maxBytes();
        }

        @Override
        public long getReservedBytes() {
            return stats().reservedBytes();
        }

        @Override
        public long getInUseBytes() {
            return stats().inUseBytes();
        }

        @Override
        public long getCachedBytes() {
            return stats().cachedBytes();
        }

        @Override
        public long getLiveBuffers() {
            return stats().liveBuffers();
        }

        @Override
        public long getAllocations() {
            return stats().allocations();
        }

        @Override
        public long getFrees() {
            return stats().frees();
        }

        @Override
        public long getCacheMisses() {
            return stats().cacheMisses();
        }

        @Override
        public long getExhausted() {
            return stats().exhausted();
        }

        @Override
        public long getChunks() {
            return stats().chunks();
        }

        @Override
        public long getGivenBackChunks() {
            return stats().givenBackChunks();
        }

        @Override
        public long getGivenBackBytes() {
            return stats().givenBackBytes();
        }
    }

    static final class Device implements RdmaDeviceMXBean {
        private final RdmaDevice device;
        private final DeviceCounters counters;

        Device(RdmaDevice device) {
            this.device = device;
            this.counters = device.counters();
        }

        @Override
        public String getName() {
            return device.name();
        }

        @Override
        public int getObjects() {
            return counters.objects();
        }

        @Override
        public int getConnections() {
            return counters.connections();
        }

        @Override
        public long getCompletions() {
            return counters.completions();
        }

        @Override
        public long getErrors() {
            return counters.errors();
        }

        @Override
        public Map<String, Long> getErrorsByStatus() {
            Map<String, Long> m = new LinkedHashMap<>();
            for (WcStatus s : WcStatus.values()) {
                long n = s == WcStatus.SUCCESS ? 0 : counters.completions(s);
                if (n > 0) {
                    m.put(s.name(), n);
                }
            }
            return m;
        }

        @Override
        public Map<String, Long> getDatagramsDropped() {
            Map<String, Long> m = new LinkedHashMap<>();
            for (DatagramDrop d : DatagramDrop.values()) {
                long n = counters.datagramsDropped(d);
                if (n > 0) {
                    m.put(d.name(), n);
                }
            }
            return m;
        }
    }

    static final class Cache implements RegistrationCacheMXBean {
        private final Lifecycle.Cache cache;

        Cache(Lifecycle.Cache cache) {
            this.cache = cache;
        }

        private CacheStats stats() {
            return cache.stats().get();
        }

        @Override
        public String getName() {
            return cache.name();
        }

        @Override
        public long getGets() {
            return stats().gets();
        }

        @Override
        public long getHits() {
            return stats().hits();
        }

        @Override
        public long getMisses() {
            return stats().misses();
        }

        @Override
        public long getEvictions() {
            return stats().evictions();
        }

        @Override
        public long getInvalidations() {
            return stats().invalidations();
        }

        @Override
        public int getRegions() {
            return stats().regions();
        }

        @Override
        public long getRegisteredBytes() {
            return stats().registeredBytes();
        }
    }
}
