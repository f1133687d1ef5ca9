package io.regmem.bench;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

/** The benchmarks' stand-in CQ: ids come back in order, across many laps of the phase bit, and an empty CQ says so. */
class StandInCqTest {
    @Test
    void idsComeBackInOrderAcrossLaps() {
        StandInCq cq = new StandInCq(8);
        assertThat(cq.poll()).as("empty").isEqualTo(-1);
        long next = 0;
        long expect = 0;
        for (int round = 0; round < 100; round++) { // 100 rounds of up to 8: many laps, both phases
            int n = 1 + round % 8;
            for (int i = 0; i < n; i++) {
                cq.complete(next++);
            }
            for (int i = 0; i < n; i++) {
                assertThat(cq.poll()).isEqualTo(expect++);
            }
            assertThat(cq.poll()).as("empty again after round %d", round).isEqualTo(-1);
        }
        cq.complete((1L << 62) - 1);
        assertThat(cq.poll()).as("the largest id it carries").isEqualTo((1L << 62) - 1);
    }

    @Test
    void capacityMustBeAPowerOfTwo() {
        assertThatThrownBy(() -> new StandInCq(130)).isInstanceOf(IllegalArgumentException.class);
    }
}
