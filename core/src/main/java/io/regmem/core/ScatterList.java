package io.regmem.core;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;

/**
 * An ordered, reusable list of (address, length) entries: the Java counterpart of the kernel's
 * {@code struct scatterlist} before DMA mapping. Lengths are 64-bit.
 *
 * <p>Entries live in two parallel {@code long[]}s that grow (doubling) only when the list outgrows
 * them, so once sized, {@link #add}/{@link #clear} allocate nothing. With coalescing on, an entry
 * that starts exactly where the previous one ends extends it instead of adding one.
 *
 * <p>Rules (each broken one throws {@link RdmaException} with {@link Errno#EINVAL} and leaves the
 * list unchanged): a length must be positive (the kernel lets a zero-length entry become a 0-byte
 * SGE; regmem rejects it), an address non-zero, {@code address + length} must not overflow, the
 * total must not overflow a {@code long}, and the count must stay within {@code maxEntries}.
 *
 * <p>Not thread-safe: one owner at a time, like the I/O it describes.
 */
public final class ScatterList {
    private final boolean coalesce;
    private final int maxEntries;
    private long[] addresses;
    private long[] lengths;
    private int count;
    private long total;

    /** An empty list with room for 16 entries, no coalescing and no entry limit. */
    public ScatterList() {
        this(16, false, Integer.MAX_VALUE);
    }

    /**
     * @param initialCapacity entries to make room for now (0 or more)
     * @param coalesce        merge an entry into the previous one when they are adjacent
     * @param maxEntries      the most entries the list may hold (at least 1)
     */
    public ScatterList(int initialCapacity, boolean coalesce, int maxEntries) {
        if (initialCapacity < 0 || maxEntries < 1) {
            throw new RdmaException(Errno.EINVAL, "ScatterList: initialCapacity " + initialCapacity
                    + " must be >= 0 and maxEntries " + maxEntries + " >= 1");
        }
        this.coalesce = coalesce;
        this.maxEntries = maxEntries;
        int cap = Math.min(initialCapacity, maxEntries);
        this.addresses = new long[cap];
        this.lengths = new long[cap];
    }

    /**
     * Appends {@code [address, address + length)}.
     *
     * @return this list
     * @throws RdmaException {@link Errno#EINVAL} if a rule of the class comment is broken
     */
    public ScatterList add(long address, long length) {
        if (length <= 0) {
            throw new RdmaException(Errno.EINVAL, "ScatterList: entry " + count + " has length " + length
                    + "; lengths must be positive");
        }
        if (address == 0) {
            throw new RdmaException(Errno.EINVAL, "ScatterList: entry " + count + " has address 0");
        }
        if (Long.compareUnsigned(address + length, address) < 0) {
            throw new RdmaException(Errno.EINVAL, "ScatterList: entry 0x" + Long.toHexString(address) + " + "
                    + length + " overflows the address space");
        }
        long newTotal = total + length;
        if (newTotal < 0) {
            throw new RdmaException(Errno.EINVAL, "ScatterList: total length " + total + " + " + length
                    + " overflows a long");
        }
        if (coalesce && count > 0 && addresses[count - 1] + lengths[count - 1] == address) {
            lengths[count - 1] += length;
            total = newTotal;
            return this;
        }
        if (count == maxEntries) {
            throw new RdmaException(Errno.EINVAL, "ScatterList: full at maxEntries " + maxEntries);
        }
        if (count == addresses.length) {
            int cap = (int) Math.min(maxEntries, Math.max(4L, 2L * addresses.length));
            addresses = Arrays.copyOf(addresses, cap);
            lengths = Arrays.copyOf(lengths, cap);
        }
        addresses[count] = address;
        lengths[count] = length;
        count++;
        total = newTotal;
        return this;
    }

    /**
     * Appends a native segment's whole range.
     *
     * @throws RdmaException {@link Errno#EINVAL} for a heap segment (it has no stable address) or an empty one
     */
    public ScatterList add(MemorySegment segment) {
        if (!segment.isNative()) {
            throw new RdmaException(Errno.EINVAL, "ScatterList: " + segment + " is a heap segment; only native "
                    + "memory has a stable address");
        }
        return add(segment.address(), segment.byteSize());
    }

    /**
     * Appends {@code [offset, offset + length)} of a pooled buffer.
     *
     * @throws RdmaException {@link Errno#EINVAL} if the range is not inside the buffer's capacity;
     *                       {@link Errno#EBADF} if the buffer was freed (checked pools)
     */
    public ScatterList add(PooledBuffer buffer, long offset, long length) {
        long base = buffer.address();
        if (offset < 0 || length <= 0 || offset > buffer.capacity() - length) {
            throw new RdmaException(Errno.EINVAL, "ScatterList: range [" + offset + ", +" + length + ") is not inside "
                    + buffer);
        }
        return add(base + offset, length);
    }

    /** The number of entries. */
    public int count() {
        return count;
    }

    /** The address of entry {@code i}. */
    public long address(int i) {
        return addresses[checkIndex(i)];
    }

    /** The length of entry {@code i}. */
    public long length(int i) {
        return lengths[checkIndex(i)];
    }

    /**
     * Copies entries {@code [from, from + n)} into the caller's arrays at {@code at}: a bulk read for
     * code that turns lists into work requests.
     *
     * @throws RdmaException {@link Errno#EINVAL} if the entries or the destination range are out of bounds
     */
    public void copyTo(int from, int n, long[] addressesOut, long[] lengthsOut, int at) {
        if (from < 0 || n < 0 || from > count - n || at < 0 || at > addressesOut.length - n || at > lengthsOut.length - n) {
            throw new RdmaException(Errno.EINVAL, "ScatterList: copyTo(from " + from + ", n " + n + ", at " + at
                    + ") is out of bounds for " + count + " entries and the destination");
        }
        System.arraycopy(addresses, from, addressesOut, at, n);
        System.arraycopy(lengths, from, lengthsOut, at, n);
    }

    /** The sum of all lengths. */
    public long totalLength() {
        return total;
    }

    /** True if adjacent entries are merged. */
    public boolean coalescing() {
        return coalesce;
    }

    /** The most entries this list accepts. */
    public int maxEntries() {
        return maxEntries;
    }

    /** Removes every entry; keeps the arrays, so refilling allocates nothing. */
    public ScatterList clear() {
        count = 0;
        total = 0;
        return this;
    }

    private int checkIndex(int i) {
        if (i < 0 || i >= count) {
            throw new RdmaException(Errno.EINVAL, "ScatterList: index " + i + " is not in [0, " + count + ")");
        }
        return i;
    }

    @Override
    public String toString() {
        StringBuilder sb = new StringBuilder("ScatterList[").append(count).append(" entries, ").append(total).append(" bytes");
        for (int i = 0; i < Math.min(count, 8); i++) {
            sb.append(i == 0 ? ": " : ", ").append("0x").append(Long.toHexString(addresses[i])).append('+').append(lengths[i]);
        }
        return sb.append(count > 8 ? ", ...]" : "]").toString();
    }
}
