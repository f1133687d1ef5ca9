package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.spi.Guard;
import java.lang.foreign.MemorySegment;

/**
 * Native memory made visible to a device without a memory region ({@code ib_dma_map_sg} /
 * {@code ib_dma_map_single}): SGEs over it use the PD's {@link ProtectionDomain#localDmaLkey()},
 * and fast-reg MRs map its pages. The device reaches the memory only through the segment, so a
 * segment whose scope has ended is simply not reachable: no access can touch freed memory.
 */
public final class DmaMapping extends RdmaResource implements AutoCloseable {
    private final MemorySegment segment;
    /** What a software data path checks between copy pieces: false once unmapped. */
    final Guard guard = () -> !isDestroyed();

    DmaMapping(RdmaDevice device, MemorySegment segment) {
        super(device, "DmaMapping", null, true);
        this.segment = segment;
    }

    /** The mapped memory. */
    public MemorySegment segment() {
        return segment;
    }

    /** The first mapped address. */
    public long address() {
        return segment.address();
    }

    /** Bytes mapped. */
    public long length() {
        return segment.byteSize();
    }

    /**
     * Unmaps ({@code ib_dma_unmap_sg}): when this returns, no copy through the mapping (local DMA
     * key SGEs, fast-reg MR pages) is in progress and none will start.
     *
     * @throws RdmaException {@link Errno#EBADF} if already unmapped
     */
    @Override
    public void close() {
        synchronized (device.lock) {
            checkAlive("close");
            device.dma.remove(this);
            markDestroyed();
        }
        device.provider().quiesce();
    }

    static void checkMappable(MemorySegment segment, String who) {
        if (!segment.isNative() || segment.byteSize() == 0) {
            throw new RdmaException(Errno.EINVAL, who + ": cannot DMA-map " + segment + ": only non-empty native memory");
        }
        Reach.check(segment, who, "DMA-map");
    }
}
