package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.util.Map;
import java.util.TreeMap;

/**
 * A device's DMA mappings by address, for resolving local-DMA-key SGEs and fast-reg pages.
 * Mappings may not overlap. Read by the data path under the fabric lock; changed under the
 * device lock and the fabric lock.
 */
final class DmaTable {
    private final TreeMap<Long, DmaMapping> byAddress = new TreeMap<>();

    void add(DmaMapping m) {
        Fabric.LOCK.lock();
        try {
            Map.Entry<Long, DmaMapping> below = byAddress.floorEntry(m.address() + m.length() - 1);
            if (below != null && below.getValue().address() + below.getValue().length() > m.address()) {
                throw new RdmaException(Errno.EINVAL, m.device + ": DMA mapping 0x" + Long.toHexString(m.address())
                        + "+" + m.length() + " overlaps " + below.getValue());
            }
            byAddress.put(m.address(), m);
        } finally {
            Fabric.LOCK.unlock();
        }
    }

    void remove(DmaMapping m) {
        Fabric.LOCK.lock();
        try {
            byAddress.remove(m.address(), m);
        } finally {
            Fabric.LOCK.unlock();
        }
    }

    /** The mapping holding all of {@code [address, address + length)}, or null. Fabric lock held. */
    DmaMapping find(long address, long length) {
        Map.Entry<Long, DmaMapping> e = byAddress.floorEntry(address);
        if (e == null) {
            return null;
        }
        DmaMapping m = e.getValue();
        long off = address - m.address();
        return off + length <= m.length() && m.segment().scope().isAlive() ? m : null;
    }
}
