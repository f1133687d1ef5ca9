package io.regmem.core;

import java.util.ArrayList;
import java.util.List;

/**
 * What {@link BufferPool#closeAndReport()} finds: counts the live buffers it is offered and lists the
 * first {@link LeakReport#MAX_LISTED} with their allocation sites.
 */
final class LeakCollector {
    private long count;
    private long bytes;
    private final List<LeakReport.Leak> listed = new ArrayList<>();

    void offer(PooledBuffer b) {
        if (b.isLive()) {
            count++;
            bytes += b.capacity();
            if (listed.size() < LeakReport.MAX_LISTED) {
                listed.add(new LeakReport.Leak(b.toString(), b.allocationSite));
            }
        }
    }

    LeakReport report(String pool) {
        return new LeakReport(pool, count, bytes, List.copyOf(listed));
    }
}
