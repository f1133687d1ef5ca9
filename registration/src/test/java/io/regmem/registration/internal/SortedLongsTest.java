package io.regmem.registration.internal;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.testkit.NoLeaks;
import java.util.Arrays;
import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;
import net.jqwik.api.lifecycle.AddLifecycleHook;

@AddLifecycleHook(NoLeaks.class) // (a jqwik class: its example runs on jqwik too, which JUnit's @ExtendWith does not reach)
class SortedLongsTest {
    /** The obvious answer: scan for the last key at or below. */
    private static int naiveFloor(long[] keys, int n, long key) {
        int found = -1;
        for (int i = 0; i < n; i++) {
            if (keys[i] <= key) {
                found = i;
            }
        }
        return found;
    }

    @Property(tries = 2000)
    void floorAgreesWithAScan(@ForAll @Size(max = 200) long[] raw, @ForAll @IntRange(max = 200) int prefix,
                              @ForAll long probe, @ForAll @IntRange(min = -1, max = 1) int nudge) {
        long[] keys = raw.clone();
        Arrays.sort(keys);
        int n = Math.min(prefix, keys.length);
        // Probe at, just below and just above existing keys as well as at random values.
        long key = n > 0 && (probe & 1) == 0 ? keys[Math.floorMod(probe, n)] + nudge : probe;
        assertThat(SortedLongs.floor(keys, n, key)).isEqualTo(naiveFloor(keys, n, key));
    }

    @Example
    void edges() {
        long[] keys = {10, 20, 20, 30};
        assertThat(SortedLongs.floor(keys, 0, 100)).isEqualTo(-1);
        assertThat(SortedLongs.floor(keys, 4, 9)).isEqualTo(-1);
        assertThat(SortedLongs.floor(keys, 4, 10)).isEqualTo(0);
        assertThat(SortedLongs.floor(keys, 4, 20)).isEqualTo(2); // the last of equal keys
        assertThat(SortedLongs.floor(keys, 4, Long.MAX_VALUE)).isEqualTo(3);
        assertThat(SortedLongs.floor(keys, 2, Long.MAX_VALUE)).isEqualTo(1); // only the prefix counts
        assertThat(SortedLongs.floor(keys, 1, Long.MIN_VALUE)).isEqualTo(-1);
    }
}
