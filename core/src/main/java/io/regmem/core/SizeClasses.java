package io.regmem.core;

/**
 * The size classes of a pool: four per doubling, in units of the pool's alignment (the quantum
 * {@code q}), as jemalloc and Netty do.
 *
 * <pre>
 *   index  0   1   2   3 | 4   5   6   7 | 8    9    10   11 | 12   ...
 *   size   1q  2q  3q  4q| 5q  6q  7q  8q| 10q  12q  14q  16q| 20q  ...
 * </pre>
 *
 * Up to 4q the classes step by q; in the doubling (2^k q, 2^(k+1) q] they step by 2^(k-2) q, so
 * internal waste stays below 25%. The index of a size is computed with a leading-zero count, not a
 * search: for n = ceil(size / q) units, n &lt;= 4 gives n - 1, otherwise with lg = floor(log2(n - 1))
 * the index is 4 lg + ((n - 1) &gt;&gt; (lg - 2)) - 8.
 */
final class SizeClasses {
    private final int quantumShift;
    private final long[] sizes;

    /**
     * @param quantum power of two, the smallest class and the alignment of every class
     * @param largest power of two, a multiple of 4 quanta: the largest class
     */
    SizeClasses(long quantum, long largest) {
        this.quantumShift = Long.numberOfTrailingZeros(quantum);
        int count = indexOfUnits(largest >>> quantumShift) + 1;
        this.sizes = new long[count];
        for (int i = 0; i < count; i++) {
            sizes[i] = unitsOf(i) << quantumShift;
        }
    }

    /** The number of classes. */
    int count() {
        return sizes.length;
    }

    /** The size of class {@code index} in bytes. */
    long size(int index) {
        return sizes[index];
    }

    /** The smallest class that holds {@code size} bytes; {@code size} in [1, largest]. */
    int indexOf(long size) {
        return indexOf(size, quantumShift);
    }

    /** {@link #indexOf(long)} for classes of quantum {@code 1 << quantumShift} (the allocator's fast path keeps the shift). */
    static int indexOf(long size, int quantumShift) {
        return indexOfUnits((size + (1L << quantumShift) - 1) >>> quantumShift);
    }

    /** log2 of the quantum. */
    int quantumShift() {
        return quantumShift;
    }

    private static int indexOfUnits(long n) {
        if (n <= 4) {
            return (int) n - 1;
        }
        int lg = 63 - Long.numberOfLeadingZeros(n - 1);
        return 4 * lg + (int) ((n - 1) >>> (lg - 2)) - 8;
    }

    private static long unitsOf(int index) {
        if (index < 4) {
            return index + 1;
        }
        int lg = index / 4 + 1;          // the doubling (2^lg, 2^(lg+1)]
        int sub = index % 4 + 1;         // 1..4 steps of 2^(lg-2)
        return (1L << lg) + ((long) sub << (lg - 2));
    }
}
