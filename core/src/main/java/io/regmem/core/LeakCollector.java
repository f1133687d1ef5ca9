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
                listed.add(new LeakReport.Leak(b.toString(), b.allocationSite()));
            }
        }
    }

    /** A slot found live though no handle was offered (its handle is referenced by its owner only). */
    void offerSlot(Slab slab, int slot) {
        count++;
        bytes += slab.slotSize;
        if (listed.size() < LeakReport.MAX_LISTED) {
            listed.add(new LeakReport.Leak("PooledBuffer[0x" + Long.toHexString(slab.address(slot)) + ", capacity "
                    + slab.slotSize + "]", null));
        }
    }

    LeakReport report(String pool) {
        return new LeakReport(pool, count, bytes, List.copyOf(listed));
    }
}
