package io.regmem.core;

import static org.assertj.core.api.Assertions.assertThat;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.LongRange;

class SizeClassesTest {

    @Property
    void indexIsTheSmallestClassThatFits(@ForAll @LongRange(min = 1, max = 1 << 20) long size,
                                         @ForAll @IntRange(min = 4, max = 12) int quantumShift) {
        long quantum = 1L << quantumShift;
        long largest = Math.max(4 * quantum, 1L << 20);
        SizeClasses classes = new SizeClasses(quantum, largest);
        if (size > largest) {
            return;
        }
        int idx = classes.indexOf(size);
        // The model: a linear search of the class table.
        int expected = 0;
        while (classes.size(expected) < size) {
            expected++;
        }
        assertThat(idx).isEqualTo(expected);
        assertThat(classes.size(idx) % quantum).isZero();
    }

    @Property
    void classesGrowAndWasteLessThanAQuarter(@ForAll @IntRange(min = 3, max = 12) int quantumShift) {
        long quantum = 1L << quantumShift;
        SizeClasses classes = new SizeClasses(quantum, 1L << 22);
        assertThat(classes.size(0)).isEqualTo(quantum);
        assertThat(classes.size(classes.count() - 1)).isEqualTo(1L << 22);
        for (int i = 1; i < classes.count(); i++) {
            long prev = classes.size(i - 1);
            long size = classes.size(i);
            assertThat(size).isGreaterThan(prev);
            if (prev >= 4 * quantum) {
                // the worst case is one byte more than the previous class
                assertThat((double) (size - (prev + 1)) / size).isLessThan(0.25);
            }
        }
    }
}
