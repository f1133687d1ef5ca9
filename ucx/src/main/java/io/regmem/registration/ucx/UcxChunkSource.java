package io.regmem.registration.ucx;

import io.regmem.core.Chunk;
import io.regmem.core.ChunkSource;
import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Map;
import java.util.TreeMap;

/**
 * Chunks that UCX allocates and registers itself ({@code ucp_mem_map} with
 * {@code UCP_MEM_MAP_ALLOCATE}; UCX picks shared memory where it can, which a peer on the same host
 * can reach without the owner's CPU). A region registered over such a chunk reuses its registration
 * ({@link UcxDevice#registerMemory}): no {@code ucp_mem_map} per region. Chunks are zero-filled when
 * handed out. {@link #retire} keeps a chunk's memory until the device closes (an unchecked view may
 * still read it); {@link #release} gives it back at once. A chunk must be released before its
 * device closes, which frees what is left.
 */
final class UcxChunkSource implements ChunkSource {
    private static final long PAGE = 4096;
    private final UcxDevice device;

    UcxChunkSource(UcxDevice device) {
        this.device = device;
    }

    /** Memory UCX allocated for {@link UcxChunkSource}, by address (worker lock). */
    private final TreeMap<Long, Allocation> allocations = new TreeMap<>();
    /** Allocations given back while regions still used them, or retired: freed at close (worker lock). */
    private final ArrayList<Allocation> parked = new ArrayList<>();

    /** A chunk UCX allocated: its registration, range, packed key, and the regions registered over it. */
    static final class Allocation {
        final MemorySegment memh;
        final long address;
        final long length;
        final byte[] packed;
        /** Regions registered over it (worker lock). */
        int regions;
        /** Given back (worker lock): freed when the last region goes. */
        boolean released;

        Allocation(MemorySegment memh, long address, long length, byte[] packed) {
            this.memh = memh;
            this.address = address;
            this.length = length;
            this.packed = packed;
        }

        long address() {
            return address;
        }
    }

    /** Allocates and registers {@code size} bytes with UCX ({@code UCP_MEM_MAP_ALLOCATE}). */
    Allocation allocate(long size) {
        device.lockWorker();
        try {
            MemorySegment memh = device.context().allocate(size);
            try {
                long[] range = device.context().mappedRange(memh);
                if (range[1] < size) {
                    throw new RdmaException(Errno.ENOMEM, "ucx: ucp_mem_map gave " + range[1] + " bytes for " + size);
                }
                Allocation a = new Allocation(memh, range[0], size, device.context().packRemoteKey(memh));
                allocations.put(a.address, a);
                return a;
            } catch (RuntimeException e) {
                device.context().unmap(memh);
                throw e;
            }
        } finally {
            device.workerLock.unlock();
        }
    }

    /**
     * Gives an allocation back: freed now, or (retired, or regions still registered over it) kept
     * until the last region goes or the device closes. Nothing to do once the device closed (it
     * freed everything).
     */
    void free(Allocation a, boolean retire) {
        device.workerLock.lock();
        try {
            if (device.isClosed() || a.released) {
                return;
            }
            a.released = true;
            allocations.remove(a.address);
            if (retire) {
                parked.add(a); // an unchecked view may still read it: the memory stays until close
            } else if (a.regions > 0) {
                parked.add(a);
            } else {
                device.context().unmap(a.memh);
            }
        } finally {
            device.workerLock.unlock();
        }
    }

    /** A region over allocation {@code a} was deregistered (worker lock held). */
    void regionGone(Allocation a) {
        a.regions--;
        if (a.released && a.regions == 0 && parked.remove(a)) {
            device.context().unmap(a.memh);
        }
    }

    /** The allocation that holds {@code [address, address + length)} whole, or null (worker lock held). */
    Allocation allocationOf(long address, long length) {
        Map.Entry<Long, Allocation> e = allocations.floorEntry(address);
        if (e == null) {
            return null;
        }
        Allocation a = e.getValue();
        return address - a.address <= a.length - length ? a : null;
    }

    /** Frees every allocation left: at the device's close, worker lock held. */
    void freeAll() {
        for (Allocation a : allocations.values()) {
            device.context().unmap(a.memh);
        }
        for (Allocation a : parked) {
            device.context().unmap(a.memh);
        }
        allocations.clear();
        parked.clear();
    }


    @Override
    public Chunk allocate(long size, long alignment) {
        if (size <= 0 || size % PAGE != 0 || Long.bitCount(alignment) != 1 || alignment > PAGE) {
            throw new RdmaException(Errno.EINVAL, this + ": allocate(" + size + ", " + alignment + "): size must be a "
                    + "positive multiple of " + PAGE + " and alignment a power of two up to " + PAGE);
        }
        Allocation a = allocate(size);
        Ucp.NATIVE.asSlice(a.address(), size).fill((byte) 0);
        return new Chunk(this, a.address(), size, a);
    }

    @Override
    public void release(Chunk chunk) {
        free(allocation(chunk), false);
    }

    @Override
    public void retire(Chunk chunk) {
        free(allocation(chunk), true);
    }

    private Allocation allocation(Chunk chunk) {
        if (chunk.source() != this || !(chunk.sourceToken() instanceof Allocation a)) {
            throw new RdmaException(Errno.EINVAL, this + ": " + chunk + " belongs to another source");
        }
        return a;
    }

    @Override
    public long pageSize() {
        return PAGE;
    }

    @Override
    public String name() {
        return "ucx";
    }

    @Override
    public String toString() {
        return "UcxChunkSource[" + device + "]";
    }
}
