package io.regmem.core;

import java.util.ArrayList;
import java.util.BitSet;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * What {@link BufferPool#closeAndReport()} finds: counts the live buffers it is offered and lists the
 * first {@link LeakReport#MAX_LISTED} with their allocation sites.
 */
final class LeakCollector {
    private long count;
    private long bytes;
    private final List<LeakReport.Leak> listed = new ArrayList<>();

    /**
     * The live buffers of a closing pool: PARANOID keeps them ({@code paranoidLive}, with their
     * sites); the other modes find them as the slots that are neither idle nor held free by a thread
     * cache or a stash ({@code paranoidLive} null). Large buffers are listed by their own table.
     */
    static LeakReport collect(String pool, Set<PooledBuffer> paranoidLive, SizeClass[] classes,
                              ThreadCaches caches, LargeBuffers large) {
        LeakCollector leaks = new LeakCollector();
        if (paranoidLive != null) {
            for (PooledBuffer b : paranoidLive) {
                leaks.offer(b);
            }
        } else {
            leaks.offerUnheldSlots(classes, caches.all());
        }
        for (PooledBuffer b : large.live()) {
            leaks.offer(b);
        }
        return leaks.report(pool);
    }

    void offer(PooledBuffer b) {
        if (b.isLive()) {
            count++;
            bytes += b.capacity();
            if (listed.size() < LeakReport.MAX_LISTED) {
                listed.add(new LeakReport.Leak(b.toString(), b.allocationSite()));
            }
        }
    }

    /**
     * Offers the live slots of every class: those neither idle nor held free by a thread cache or a
     * stash (a live buffer's handle is referenced by its owner only). Drains each stash to look and
     * gives it back, in case the close is refused.
     */
    void offerUnheldSlots(SizeClass[] classes, List<ThreadCache> caches) {
        Map<Slab, BitSet> held = new IdentityHashMap<>();
        for (ThreadCache tc : caches) {
            for (Magazine m : tc.magazines) {
                if (m == null) {
                    continue;
                }
                PooledBuffer[] stack = m.stack;
                for (int i = 0, top = Math.min(m.top, stack.length); i < top; i++) {
                    PooledBuffer b = stack[i];
                    if (b != null) {
                        held.computeIfAbsent(b.slab, k -> new BitSet()).set(b.slot());
                    }
                }
            }
        }
        for (SizeClass sc : classes) {
            List<PooledBuffer> stashed = new ArrayList<>();
            for (PooledBuffer b = sc.stash.poll(); b != null; b = sc.stash.poll()) {
                stashed.add(b);
                held.computeIfAbsent(b.slab, k -> new BitSet()).set(b.slot());
            }
            for (PooledBuffer b : stashed) {
                sc.release(b);
            }
            sc.lock.lock();
            try {
                for (Slab slab : sc.slabs) {
                    BitSet h = held.get(slab);
                    for (int slot = 0; slot < slab.slots; slot++) {
                        if (!slab.isIdle(slot) && (h == null || !h.get(slot))) {
                            offerSlot(slab, slot);
                        }
                    }
                }
            } finally {
                sc.lock.unlock();
            }
        }
    }

    /** A slot found live though no handle was offered (its handle is referenced by its owner only). */
    private void offerSlot(Slab slab, int slot) {
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
