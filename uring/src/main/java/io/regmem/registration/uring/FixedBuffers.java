package io.regmem.registration.uring;

import static io.regmem.registration.uring.UringLayout.*;

import io.regmem.core.Chunk;
import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
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
 * A ring's sparse, tagged fixed-buffer table: a slot per registered chunk. Slots are taken on any
 * thread (a chunk is born where its pool allocates); the kernel's table is written by the owner
 * only (the kernel refuses other threads on a single-issuer ring), at once when the owner is the
 * caller, else at its next call. A chunk leaving is cleared from the table and its memory held
 * ({@link Chunk#holdRelease()}) until the kernel's tag completion and its last operation arrived.
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

    /** A new chunk of a registered pool (any thread): a slot now, the kernel's table on the owner. */
    FixedSlot add(IoRegistration reg, Chunk chunk) {
        if (ring.isClosed()) {
            throw new RdmaException(Errno.EBADF, ring + ": closed; " + chunk + " of pool " + reg.pool().name()
                    + " cannot be registered");
        }
        if (chunk.size() > MAX_FIXED_BUFFER_BYTES) {
            throw new RdmaException(Errno.EINVAL, ring + ": " + chunk + " of pool " + reg.pool().name() + " is larger than "
                    + "io_uring's 1 GiB per fixed buffer (build the pool with a smaller chunk size and maximum class)");
        }
        int index;
        synchronized (used) {
            index = used.nextClearBit(0);
            if (index >= max) {
                throw new RdmaException(Errno.ENOMEM, ring + ": all " + max + " fixed-buffer slots are taken; "
                        + chunk + " of pool " + reg.pool().name() + " cannot be registered (IoRing.Builder.fixedBuffers)");
            }
            used.set(index);
        }
        FixedSlot s = new FixedSlot(ring, reg, chunk, index, IoRing.TAG_BASE | nextTag.getAndIncrement());
        if (ring.onOwner()) {
            try {
                register(s);
            } catch (RuntimeException e) {
                freeIndex(index);
                throw e;
            }
        } else {
            defer(new Deferred(s, null, true));
        }
        return s;
    }

    /** A chunk leaves (any thread): no new operation may use it; the owner clears it and lets go when quiet. */
    void remove(FixedSlot s, Runnable hold) {
        s.removed = true;
        if (ring.isClosed()) {
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
                if (s.removed) {
                    continue; // gone before it was registered: its retirement follows in the queue
                }
                try {
                    register(s);
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

    private void register(FixedSlot s) {
        MemorySegment u = scratch;
        u.fill((byte) 0);
        u.set(ValueLayout.JAVA_LONG, 64, s.start);
        u.set(ValueLayout.JAVA_LONG, 72, s.end - s.start);
        u.set(ValueLayout.JAVA_LONG, 80, s.tag);
        long rc = update(s.index, u.address() + 64, u.address() + 80);
        if (rc < 0) {
            int errno = (int) -rc;
            String what = "registering " + s.chunk + " as fixed buffer " + s.index;
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
        long rc = Sys.syscall(capture, SYS_IO_URING_REGISTER, fd, REGISTER_BUFFERS_UPDATE, u.address(), RSRC_UPDATE2_SIZE, 0, 0);
        return rc < 0 ? -Sys.errno(capture) : rc;
    }

    /**
     * On the owner: clears the slot; once the kernel and every operation are done with the chunk,
     * its index is free and its memory let go. Never waits: operations still using the chunk are
     * cancelled where the kernel can, and the retirement ends at the completion that makes the slot
     * quiet ({@link #finishRetired}), reaped by whichever call of the owner's comes next.
     */
    private void retire(FixedSlot s, Runnable hold) {
        s.hold = hold;
        if (s.registered && !s.cleared) {
            clear(s);
        }
        if (s.quiet()) {
            finish(s);
            return;
        }
        retiring.add(s);
        ring.cancelOn(s);
    }

    /** Ends the retirements whose slots became quiet (owner). */
    void finishRetired() {
        for (int i = retiring.size() - 1; i >= 0; i--) {
            FixedSlot s = retiring.get(i);
            if (s.quiet()) {
                retiring.remove(i);
                finish(s);
            }
        }
    }

    private void finish(FixedSlot s) {
        freeIndex(s.index);
        Runnable h = s.hold;
        s.hold = null;
        if (h != null) {
            h.run();
        }
    }

    private void freeIndex(int index) {
        synchronized (used) {
            used.clear(index);
        }
    }

    private void defer(Deferred d) {
        deferred.add(d);
        hasDeferred = true;
    }
}
