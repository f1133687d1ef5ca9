package io.regmem.core;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;

/** ScatterList against a list model: random lengths and gaps, with and without coalescing. */
class ScatterListPropertyTest {

    @Property(tries = 200)
    void agreesWithAListModel(@ForAll @Size(max = 60) List<@IntRange(min = 1, max = 5000) Integer> lengths,
                              @ForAll @Size(max = 60) List<@IntRange(min = 0, max = 2) Integer> gaps,
                              @ForAll boolean coalesce) {
        ScatterList sg = new ScatterList(1, coalesce, Integer.MAX_VALUE);
        List<long[]> model = new ArrayList<>();
        long address = 0x10000;
        long total = 0;
        for (int i = 0; i < lengths.size(); i++) {
            long len = lengths.get(i);
            int gap = i < gaps.size() ? gaps.get(i) : 1;
            address += gap * 64L;
            sg.add(address, len);
            if (coalesce && !model.isEmpty() && model.getLast()[0] + model.getLast()[1] == address) {
                model.getLast()[1] += len;
            } else {
                model.add(new long[] {address, len});
            }
            address += len;
            total += len;
        }
        assertThat(sg.count()).isEqualTo(model.size());
        assertThat(sg.totalLength()).isEqualTo(total);
        long sum = 0;
        for (int i = 0; i < model.size(); i++) {
            assertThat(sg.address(i)).isEqualTo(model.get(i)[0]);
            assertThat(sg.length(i)).isEqualTo(model.get(i)[1]);
            sum += sg.length(i);
        }
        assertThat(sum).isEqualTo(total);
    }
}
