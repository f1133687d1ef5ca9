package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.internal.SortedLongs;
import java.util.Arrays;

/**
 * A device's DMA mappings by address, for resolving local-DMA-key SGEs, fast-reg pages and the
 * checks of rw context init. Mappings may not overlap. An immutable sorted snapshot published
 * through a volatile field: lookups take no lock (rw init checks every entry of a scatter list);
 * changes copy it under the table's own lock (mappings change rarely: at map and unmap), never
 * waiting for the data path.
 */
final class DmaTable {
    private record Snapshot(long[] starts, DmaMapping[] mappings) {
    }

    private volatile Snapshot snapshot = new Snapshot(new long[0], new DmaMapping[0]);
    private final Object lock = new Object();

    void add(DmaMapping m) {
        synchronized (lock) {
            Snapshot s = snapshot;
            int at = Arrays.binarySearch(s.starts, m.address());
            int ins = at >= 0 ? at : -at - 1;
            DmaMapping below = ins > 0 ? s.mappings[ins - 1] : null;
            DmaMapping above = at >= 0 ? s.mappings[at] : ins < s.mappings.length ? s.mappings[ins] : null;
            if (below != null && below.address() + below.length() > m.address()) {
                throw overlap(m, below);
            }
            if (above != null && above.address() < m.address() + m.length()) {
                throw overlap(m, above);
            }
            int n = s.starts.length;
            long[] starts = new long[n + 1];
            DmaMapping[] mappings = new DmaMapping[n + 1];
            System.arraycopy(s.starts, 0, starts, 0, ins);
            System.arraycopy(s.mappings, 0, mappings, 0, ins);
            starts[ins] = m.address();
            mappings[ins] = m;
            System.arraycopy(s.starts, ins, starts, ins + 1, n - ins);
            System.arraycopy(s.mappings, ins, mappings, ins + 1, n - ins);
            snapshot = new Snapshot(starts, mappings);
        }
    }

    private static RdmaException overlap(DmaMapping m, DmaMapping other) {
        return new RdmaException(Errno.EINVAL, m.device + ": DMA mapping 0x" + Long.toHexString(m.address())
                + "+" + m.length() + " overlaps " + other);
    }

    void remove(DmaMapping m) {
        synchronized (lock) {
            Snapshot s = snapshot;
            int at = Arrays.binarySearch(s.starts, m.address());
            if (at < 0 || s.mappings[at] != m) {
                return;
            }
            int n = s.starts.length;
            long[] starts = new long[n - 1];
            DmaMapping[] mappings = new DmaMapping[n - 1];
            System.arraycopy(s.starts, 0, starts, 0, at);
            System.arraycopy(s.mappings, 0, mappings, 0, at);
            System.arraycopy(s.starts, at + 1, starts, at, n - at - 1);
            System.arraycopy(s.mappings, at + 1, mappings, at, n - at - 1);
            snapshot = new Snapshot(starts, mappings);
        }
    }

    /** The live mapping holding all of {@code [address, address + length)}, or null. Lock-free. */
    DmaMapping find(long address, long length) {
        Snapshot s = snapshot;
        int found = SortedLongs.floor(s.starts, s.starts.length, address);
        if (found < 0) {
            return null;
        }
        DmaMapping m = s.mappings[found];
        long off = address - m.address();
        return length >= 0 && off + length <= m.length() && m.segment().scope().isAlive() ? m : null;
    }
}
