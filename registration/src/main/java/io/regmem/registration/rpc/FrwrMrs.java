package io.regmem.registration.rpc;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.MemoryRegion;
import java.util.ArrayDeque;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Iterator;
import java.util.Set;

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
    /** Every MR this transport made and has not destroyed (identity: {@link #put} checks membership). */
    private final Set<MemoryRegion> all = Collections.newSetFromMap(new IdentityHashMap<>());

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
        if (req == null || mr == null) {
            throw new RdmaException(Errno.EINVAL, "RpcTransport.mrPut(" + req + ", " + mr
                    + "): needs a request and an MR");
        }
        synchronized (this) {
            if (!all.contains(mr)) {
                if (mr.isDestroyed()) {
                    return; // destroyed with the transport's MRs (a flush): its state is unknown, it is not reused
                }
                throw new RdmaException(Errno.EINVAL, "RpcTransport.mrPut: " + mr
                        + " is not one of this transport's MRs");
            }
        }
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
                Iterator<MemoryRegion> it = all.iterator();
                mr = it.next();
                it.remove();
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
