package io.regmem.bench;

import io.regmem.netty.RegmemTransport;
import io.regmem.registration.RdmaDevice;
import java.util.HashMap;
import java.util.Map;

/**
 * The regmem Netty transport of a two-process benchmark, from its name: {@code regmem-PROVIDER}, or
 * {@code regmem-PROVIDER:k=v,k=v} with device options (for example {@code regmem-shm:inlineThreshold=65536});
 * {@code -Dbench.receives}, {@code -Dbench.receiveSize}, {@code -Dbench.sends}, {@code -Dbench.busyPollNanos} and {@code -Dbench.chunkPollNanos} set the
 * transport's, defaults otherwise.
 */
record BenchTransports(RdmaDevice device, RegmemTransport transport) implements AutoCloseable {

    static BenchTransports open(String name) {
        String spec = name.substring("regmem-".length());
        int colon = spec.indexOf(':');
        Map<String, String> options = colon >= 0 ? options(spec.substring(colon + 1), ",") : Map.of();
        RdmaDevice dev = RdmaDevice.open(colon >= 0 ? spec.substring(0, colon) : spec, options);
        try {
            return new BenchTransports(dev, RegmemTransport.builder(dev)
                    .receives(Integer.getInteger("bench.receives", RegmemTransport.DEFAULT_RECEIVES))
                    .sends(Integer.getInteger("bench.sends", RegmemTransport.DEFAULT_SENDS))
                    .receiveSize(Integer.getInteger("bench.receiveSize", RegmemTransport.DEFAULT_RECEIVE_SIZE))
                    .busyPollNanos(Long.getLong("bench.busyPollNanos", RegmemTransport.DEFAULT_BUSY_POLL_NANOS))
                    .chunkPollNanos(Long.getLong("bench.chunkPollNanos", RegmemTransport.DEFAULT_CHUNK_POLL_NANOS)).build());
        } catch (RuntimeException e) {
            dev.close();
            throw e;
        }
    }

    /** Device options written {@code k=v} with {@code separator} between them, as a map (empty for an empty string). */
    static Map<String, String> options(String spec, String separator) {
        Map<String, String> m = new HashMap<>();
        for (String kv : spec.split(separator)) {
            if (!kv.isBlank()) {
                int eq = kv.indexOf('=');
                if (eq <= 0) {
                    throw new IllegalArgumentException("device options: k=v" + separator + "k=v, got " + spec);
                }
                m.put(kv.substring(0, eq).trim(), kv.substring(eq + 1).trim());
            }
        }
        return m;
    }

    @Override
    public void close() {
        transport.close();
        device.close();
    }
}
