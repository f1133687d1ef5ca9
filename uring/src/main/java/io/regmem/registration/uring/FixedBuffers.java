package io.regmem.registration.uring;

import static io.regmem.registration.uring.UringLayout.*;

import io.regmem.core.Chunk;
import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.core.internal.Unistd;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A ring's sparse, tagged fixed-buffer table: an index per chunk in the kernel's table. The table is
 * written by the owner only (the kernel refuses other threads on a single-issuer ring), so indexes
 * are taken by the owner only: at once for a chunk born on the owner, at the owner's next call (or
 * when an operation needs it) for one born on another thread. A chunk that leaves before the owner
 * registered it is let go at once by whoever frees it and never takes an index, so other threads'
 * allocations never wait for the owner and never fail for want of an index. A chunk leaving after
 * is cleared from the table by the owner; its index is free again as soon as no operation of ours
 * names it (the kernel keeps the old buffer pinned by reference until its own last use), and its
 * memory is held ({@link Chunk#holdRelease()}) until the kernel's tag completion arrived too.
 * So the indexes in use are the chunks the owner registered and has not retired, plus cleared ones
 * named by operations in flight: {@code fixedBuffers} needs to cover the registered pools' chunks
 * alive at once, nothing more.
 */
final class FixedBuffers {
    private final IoRing ring;
    private final int fd;
    private final MemorySegment capture;
    private final MemorySegment scratch;
    private final int max;
    /** Guarded by itself. */
    private final BitSet used = new BitSet();
    private final AtomicLong nextTag = new AtomicLong(1);
    /** Owner only: cleared slots whose tag completion is due. */
    private final Map<Long, FixedSlot> awaiting = new HashMap<>();
    /** Owner only: slots of chunks that left, cleared, whose operations or tag completion are still due. */
    private final List<FixedSlot> retiring = new ArrayList<>();
    /** Work other threads left for the owner: chunks to register or retire. */
    private final ConcurrentLinkedQueue<Deferred> deferred = new ConcurrentLinkedQueue<>();
    private volatile boolean hasDeferred;

    private record Deferred(FixedSlot slot, Runnable hold, boolean add) {
    }

    FixedBuffers(IoRing ring, int fd, MemorySegment capture, MemorySegment scratch, int max) {
        this.ring = ring;
        this.fd = fd;
        this.capture = capture;
        this.scratch = scratch;
        this.max = max;
    }

    /** Slots in use, tags awaited included. */
    int inUse() {
        synchronized (used) {
            return used.cardinality();
        }
    }

    /** True while a cleared slot's tag completion has not arrived. */
    boolean awaitingTags() {
        return !awaiting.isEmpty();
    }

    /** True while a chunk that left waits for its operations or its tag (owner). */
    boolean retiring() {
        return !retiring.isEmpty();
    }

    /** True when another thread left work for the owner (a volatile read). */
    boolean hasDeferred() {
        return hasDeferred;
    }

    /**
     * A new chunk of a registered pool (any thread). On the owner it takes an index and enters the
     * kernel's table at once; on another thread it takes nothing and waits for the owner's next call
     * (or an operation on it), so an allocation on another thread never fails for want of an index.
     *
     * @throws RdmaException {@link Errno#ENOMEM} on the owner when every index holds a chunk of a
     *                       registered pool, or one still named by an operation in flight
     */
    FixedSlot add(IoRegistration reg, Chunk chunk) {
        if (ring.isClosed()) {
            throw new RdmaException(Errno.EBADF, ring + ": closed; " + chunk + " of pool " + reg.pool().name()
                    + " cannot be registered");
        }
        if (chunk.size() > MAX_FIXED_BUFFER_BYTES) {
            throw new RdmaException(Errno.EINVAL, ring + ": " + chunk + " of pool " + reg.pool().name() + " is larger than "
                    + "io_uring's 1 GiB per fixed buffer (build the pool with a smaller chunk size and maximum class)");
        }
        FixedSlot s = new FixedSlot(ring, reg, chunk, IoRing.TAG_BASE | nextTag.getAndIncrement());
        if (ring.onOwner()) {
            if (hasDeferred) {
                runDeferred(); // retirements other threads left may give indexes back
            }
            register(s);
        } else {
            defer(new Deferred(s, null, true));
        }
        return s;
    }

    /**
     * A chunk leaves (any thread): no new operation may use it. One the owner never registered is let
     * go at once (the kernel never saw it); otherwise the owner clears it and lets go when quiet.
     */
    void remove(FixedSlot s, Runnable hold) {
        boolean neverRegistered;
        synchronized (s) {
            s.removed = true;
            neverRegistered = !s.claimed;
        }
        if (ring.isClosed() || neverRegistered) {
            if (hold != null) {
                hold.run();
            }
            return;
        }
        if (ring.onOwner()) {
            retire(s, hold);
        } else {
            defer(new Deferred(s, hold, false));
        }
    }

    /** The owner's part of what other threads left: registrations and retirements. */
    void runDeferred() {
        hasDeferred = false;
        Deferred d;
        while ((d = deferred.poll()) != null) {
            FixedSlot s = d.slot();
            if (d.add()) {
                try {
                    register(s); // (nothing if it left its pool before: it was let go then)
                } catch (RdmaException e) {
                    s.failure = e;
                    s.removed = true;
                }
            } else {
                retire(s, d.hold());
            }
        }
    }

    /** The ring closed without its owner: let every held chunk go (the kernel has no I/O of the owner left). */
    void releaseDeferred() {
        for (FixedSlot s : retiring) {
            finish(s);
        }
        retiring.clear();
        Deferred d;
        while ((d = deferred.poll()) != null) {
            if (!d.add() && d.hold() != null) {
                d.hold().run();
            }
        }
    }

    /** A tag completion (owner, while reaping). */
    void tagArrived(long tag) {
        FixedSlot s = awaiting.remove(tag);
        if (s != null) {
            s.tagSeen = true;
            finishRetired();
        }
    }

    /**
     * Enters a chunk in the kernel's table (owner): claims it (unless it already left its pool), takes
     * an index and updates the table. A failure gives the index back and throws.
     */
    private void register(FixedSlot s) {
        synchronized (s) {
            if (s.removed) {
                return;
            }
            s.claimed = true;
        }
        int index;
        synchronized (used) {
            index = used.nextClearBit(0);
            if (index >= max) {
                throw new RdmaException(Errno.ENOMEM, ring + ": all " + max + " fixed-buffer slots are taken by chunks of "
                        + "registered pools (or by chunks that left, named by operations in flight); " + s.chunk + " of pool "
                        + s.registration.pool().name() + " cannot be registered (IoRing.Builder.fixedBuffers)");
            }
            used.set(index);
        }
        s.index = index;
        MemorySegment u = scratch;
        u.fill((byte) 0);
        u.set(ValueLayout.JAVA_LONG, 64, s.start);
        u.set(ValueLayout.JAVA_LONG, 72, s.end - s.start);
        u.set(ValueLayout.JAVA_LONG, 80, s.tag);
        long rc = update(s.index, u.address() + 64, u.address() + 80);
        if (rc < 0) {
            releaseIndex(s);
            int errno = (int) -rc;
            String what = "registering " + s.chunk + " as fixed buffer " + index;
            if (errno == Errno.ENOMEM.value()) {
                throw RingMemory.memlock(what, s.end - s.start);
            }
            if (errno == Errno.EFAULT.value()) {
                throw new RdmaException(Errno.EFAULT, ring + ": " + what + " failed with EFAULT: the kernel cannot pin this "
                        + "memory (file-backed shared mappings such as FileChannel.map cannot be fixed buffers)");
            }
            throw new RdmaException(Errno.of(errno), ring + ": " + what + " failed with errno " + errno);
        }
        s.registered = true;
    }

    /** Clears a slot in the kernel's table; its tag completion follows once nothing uses the chunk. */
    private void clear(FixedSlot s) {
        scratch.fill((byte) 0); // an empty iovec (the slot becomes sparse) and tag 0
        long rc = update(s.index, scratch.address() + 64, scratch.address() + 80);
        if (rc < 0) {
            throw new RdmaException(Errno.of((int) -rc), ring + ": clearing " + s + " failed with errno " + -rc);
        }
        s.cleared = true;
        awaiting.put(s.tag, s);
    }

    /** {@code IORING_REGISTER_BUFFERS_UPDATE} of one slot; 1, or -errno. */
    private long update(int index, long iovec, long tag) {
        MemorySegment u = scratch;
        u.set(ValueLayout.JAVA_INT, RSRC_UPDATE2_OFFSET, index);
        u.set(ValueLayout.JAVA_INT, RSRC_UPDATE2_OFFSET + 4, 0);
        u.set(ValueLayout.JAVA_LONG, RSRC_UPDATE2_DATA, iovec);
        u.set(ValueLayout.JAVA_LONG, RSRC_UPDATE2_TAGS, tag);
        u.set(ValueLayout.JAVA_INT, RSRC_UPDATE2_NR, 1);
        u.set(ValueLayout.JAVA_INT, RSRC_UPDATE2_NR + 4, 0);
        return Unistd.syscall(capture, SYS_IO_URING_REGISTER, fd, REGISTER_BUFFERS_UPDATE, u.address(), RSRC_UPDATE2_SIZE, 0, 0);
    }

    /**
     * On the owner: clears the slot; once no operation of ours names it its index is free again, and
     * once the kernel is done with the chunk too (its tag completion) its memory is let go. Never
     * waits: operations still using the chunk are cancelled where the kernel can, and the retirement
     * ends at the completion that makes the slot quiet ({@link #finishRetired}), reaped by whichever
     * call of the owner's comes next.
     */
    private void retire(FixedSlot s, Runnable hold) {
        s.hold = hold;
        if (s.registered && !s.cleared) {
            clear(s);
        }
        if (!settle(s)) {
            retiring.add(s);
            ring.cancelOn(s);
        }
    }

    /** Ends the retirements whose slots became quiet, and frees the indexes no operation names any more (owner). */
    void finishRetired() {
        for (int i = retiring.size() - 1; i >= 0; i--) {
            if (settle(retiring.get(i))) {
                retiring.remove(i);
            }
        }
    }

    /**
     * A retiring slot's progress (owner): its index is freed once no operation names it, and the slot
     * finished (its memory let go) once it is quiet; true when finished.
     */
    private boolean settle(FixedSlot s) {
        if (s.indexIdle()) {
            releaseIndex(s);
        }
        if (s.quiet()) {
            finish(s);
            return true;
        }
        return false;
    }

    private void finish(FixedSlot s) {
        releaseIndex(s);
        Runnable h = s.hold;
        s.hold = null;
        if (h != null) {
            h.run();
        }
    }

    /** Gives the slot's index back, once (owner, or a failed registration). */
    private void releaseIndex(FixedSlot s) {
        int index = s.index;
        if (index >= 0) {
            s.index = -1;
            synchronized (used) {
                used.clear(index);
            }
        }
    }

    private void defer(Deferred d) {
        deferred.add(d);
        hasDeferred = true;
    }
}
