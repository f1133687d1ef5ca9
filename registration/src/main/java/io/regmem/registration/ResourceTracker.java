package io.regmem.registration;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A device's registry of live verbs objects, in creation order (the kernel's restrack): tests end
 * by asserting it is empty, and {@link RdmaDevice#close()} refuses to close over survivors,
 * listing each with its type, owner and creation site.
 */
public final class ResourceTracker {
    private final AtomicLong ids = new AtomicLong();
    private final ConcurrentSkipListMap<Long, RdmaResource> live = new ConcurrentSkipListMap<>();

    ResourceTracker() {
    }

    long nextId() {
        return ids.incrementAndGet();
    }

    void add(RdmaResource r) {
        live.put(r.id(), r);
    }

    void remove(RdmaResource r) {
        live.remove(r.id(), r);
    }

    /** The live objects, oldest first (a snapshot). */
    public List<RdmaResource> survivors() {
        return new ArrayList<>(live.values());
    }

    /** The live objects of one class, oldest first. */
    public <T extends RdmaResource> List<T> survivors(Class<T> type) {
        List<T> out = new ArrayList<>();
        for (RdmaResource r : live.values()) {
            if (type.isInstance(r)) {
                out.add(type.cast(r));
            }
        }
        return out;
    }

    /** The number of live objects. */
    public int count() {
        return live.size();
    }

    /** A report of the survivors, one line each, or "no live objects". */
    public String report() {
        if (live.isEmpty()) {
            return "no live objects";
        }
        StringBuilder sb = new StringBuilder();
        sb.append(live.size()).append(" live object(s):");
        for (RdmaResource r : live.values()) {
            sb.append("\n  ").append(r.describe());
        }
        return sb.toString();
    }

    /**
     * Destroys every survivor in the mandatory order (QPs, CM IDs, windows, SRQs, MRs, DMA mappings,
     * CQs with their events acknowledged, channels, PDs): {@link RdmaDevice#forceClose()}, device lock held.
     */
    void destroyAll() {
        for (CmId id : survivors(CmId.class)) {
            if (id.qp() != null) {
                id.destroyQp(true);
            }
        }
        for (CmId id : survivors(CmId.class)) {
            if (!id.isDestroyed()) {
                id.close();
            }
        }
        for (MemoryWindow mw : survivors(MemoryWindow.class)) {
            mw.close();
        }
        for (SharedReceiveQueue srq : survivors(SharedReceiveQueue.class)) {
            srq.close();
        }
        for (MemoryRegion mr : survivors(MemoryRegion.class)) {
            mr.close();
        }
        for (DmaMapping m : survivors(DmaMapping.class)) {
            m.close();
        }
        for (CompletionQueue cq : survivors(CompletionQueue.class)) {
            cq.close(true);
        }
        for (CompletionChannel ch : survivors(CompletionChannel.class)) {
            ch.close();
        }
        for (ProtectionDomain pd : survivors(ProtectionDomain.class)) {
            pd.close();
        }
    }
}
