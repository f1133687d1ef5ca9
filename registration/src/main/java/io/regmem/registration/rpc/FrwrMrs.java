package io.regmem.registration.rpc;

import io.regmem.registration.MemoryRegion;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;

/**
 * A transport's fast-registration MRs ({@code rb_mrs}, {@code rb_all_mrs} and {@code frwr_ops.c}'s
 * pool side): a shared free list under one lock, each request's own cache of MRs it used before,
 * refill on demand while connected, and teardown one MR at a time with the deregistration outside
 * the lock.
 */
final class FrwrMrs {
    private final RpcBuffer buffer;
    private final int pages;
    private final int perRefresh;
    private final ArrayDeque<MemoryRegion> free = new ArrayDeque<>();
    private final List<MemoryRegion> all = new ArrayList<>();

    FrwrMrs(RpcBuffer buffer, int pages, int perRefresh) {
        this.buffer = buffer;
        this.pages = pages;
        this.perRefresh = perRefresh;
    }

    MemoryRegion get(Req req, boolean connected) {
        MemoryRegion mr = req.mrs.poll();
        if (mr != null) {
            return mr;
        }
        synchronized (this) {
            mr = free.poll();
        }
        if (mr == null) {
            refresh(connected);
        }
        return mr;
    }

    void put(Req req, MemoryRegion mr) {
        req.mrs.push(mr);
    }

    void refresh(boolean connected) {
        if (!connected) {
            return;
        }
        for (int i = 0; i < perRefresh; i++) {
            MemoryRegion mr = buffer.pd().allocMr(pages);
            synchronized (this) {
                all.add(mr);
                free.add(mr);
            }
        }
    }

    void destroy() {
        while (true) {
            MemoryRegion mr;
            synchronized (this) {
                if (all.isEmpty()) {
                    break;
                }
                mr = all.remove(all.size() - 1);
                free.remove(mr);
            }
            if (!mr.isDestroyed()) {
                mr.close();
            }
        }
        buffer.forEachReq(r -> r.mrs.clear());
    }

    synchronized int count() {
        return all.size();
    }
}
