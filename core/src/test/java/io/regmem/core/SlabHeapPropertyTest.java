package io.regmem.core;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import java.util.TreeMap;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;

/**
 * {@link SlabHeap} against a sorted-map model: random adds, removals from anywhere (a trim's), and
 * removals of the lowest (a slab running out of idle slots); the lowest is always the model's first,
 * and every slab knows whether, and where, it is in the heap.
 */
class SlabHeapPropertyTest {
    private static final Chunk CHUNK = new Chunk(ChunkSource.arena(), 1L << 40, 1L << 30, null);

    @Property(tries = 300)
    void agreesWithASortedMap(@ForAll @Size(max = 200) List<@IntRange(min = 0, max = 63) Integer> ops) {
        List<Slab> slabs = new ArrayList<>();
        for (int i = 0; i < 64; i++) {
            // distinct addresses in scrambled order
            slabs.add(new Slab(null, CHUNK, 0, ((i * 37L) % 64) << 16, 64, 1));
        }
        SlabHeap heap = new SlabHeap();
        TreeMap<Long, Slab> model = new TreeMap<>();
        for (int op : ops) {
            Slab s = slabs.get(op);
            if (op % 5 == 4 && !model.isEmpty()) { // the lowest leaves
                Slab low = heap.peek();
                assertThat(low).isSameAs(model.firstEntry().getValue());
                heap.remove(low);
                model.remove(low.base);
            } else if (s.heapIndex >= 0) {
                heap.remove(s);
                model.remove(s.base);
            } else {
                heap.add(s);
                model.put(s.base, s);
            }
            assertThat(heap.size()).isEqualTo(model.size());
            assertThat(heap.peek()).isSameAs(model.isEmpty() ? null : model.firstEntry().getValue());
            for (Slab x : slabs) {
                assertThat(x.heapIndex >= 0).isEqualTo(model.containsKey(x.base));
            }
        }
        heap.remove(slabs.get(0)); // removing what is not there changes nothing
        assertThat(heap.size()).isEqualTo(model.size() - (model.containsKey(slabs.get(0).base) ? 1 : 0));
    }
}
