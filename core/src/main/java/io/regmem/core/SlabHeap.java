package io.regmem.core;

import java.util.Arrays;

/**
 * A size class's slabs with idle slots, lowest address first: a binary min-heap keyed by
 * {@link Slab#base}, each slab knowing its position ({@link Slab#heapIndex}, -1 when out), so that
 * a slab leaves from anywhere in O(log n) and nothing is allocated but the array's rare growth.
 * Binding from the lowest slab first (address-ordered first fit, as jemalloc's bins and most
 * allocators that give memory back do) packs live buffers into the oldest chunks and lets the
 * newest empty out, which is what makes them {@linkplain BufferPool#trim() trimmable}. Guarded by
 * the size class's lock.
 */
final class SlabHeap {
    private Slab[] heap = new Slab[16];
    private int size;

    boolean isEmpty() {
        return size == 0;
    }

    int size() {
        return size;
    }

    /** The lowest slab, or null. */
    Slab peek() {
        return size == 0 ? null : heap[0];
    }

    /** Adds a slab that is not in the heap. */
    void add(Slab s) {
        if (size == heap.length) {
            heap = Arrays.copyOf(heap, size * 2);
        }
        heap[size] = s;
        s.heapIndex = size;
        size++;
        up(size - 1);
    }

    /** Removes a slab if it is in the heap. */
    void remove(Slab s) {
        int i = s.heapIndex;
        if (i < 0) {
            return;
        }
        s.heapIndex = -1;
        size--;
        Slab last = heap[size];
        heap[size] = null;
        if (i < size) {
            heap[i] = last;
            last.heapIndex = i;
            down(i);
            up(last.heapIndex);
        }
    }

    private void up(int i) {
        Slab s = heap[i];
        while (i > 0) {
            int parent = (i - 1) >>> 1;
            Slab p = heap[parent];
            if (Long.compareUnsigned(p.base, s.base) <= 0) {
                break;
            }
            heap[i] = p;
            p.heapIndex = i;
            i = parent;
        }
        heap[i] = s;
        s.heapIndex = i;
    }

    private void down(int i) {
        Slab s = heap[i];
        int half = size >>> 1;
        while (i < half) {
            int child = 2 * i + 1;
            Slab c = heap[child];
            int right = child + 1;
            if (right < size && Long.compareUnsigned(heap[right].base, c.base) < 0) {
                child = right;
                c = heap[child];
            }
            if (Long.compareUnsigned(s.base, c.base) <= 0) {
                break;
            }
            heap[i] = c;
            c.heapIndex = i;
            i = child;
        }
        heap[i] = s;
        s.heapIndex = i;
    }
}
