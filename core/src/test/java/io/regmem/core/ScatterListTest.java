package io.regmem.core;

import static io.regmem.core.NoLeaks.closeClean;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

@ExtendWith(NoLeaks.class)
class ScatterListTest {

    private static void assertEinval(Runnable call, String part) {
        assertThatThrownBy(call::run).isInstanceOf(RdmaException.class)
                .satisfies(e -> assertThat(((RdmaException) e).errno()).isEqualTo(Errno.EINVAL))
                .hasMessageContaining("ScatterList").hasMessageContaining(part);
    }

    @Test
    void addsEntriesOfEveryKind() {
        BufferPool pool = BufferPool.builder().build();
        PooledBuffer b = pool.allocate(4096);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment seg = arena.allocate(100);
            ScatterList sg = new ScatterList();
            sg.add(0x1000, 10).add(seg).add(b, 96, 4000);
            assertThat(sg.count()).isEqualTo(3);
            assertThat(sg.address(0)).isEqualTo(0x1000);
            assertThat(sg.length(0)).isEqualTo(10);
            assertThat(sg.address(1)).isEqualTo(seg.address());
            assertThat(sg.length(1)).isEqualTo(100);
            assertThat(sg.address(2)).isEqualTo(b.address() + 96);
            assertThat(sg.length(2)).isEqualTo(4000);
            assertThat(sg.totalLength()).isEqualTo(4110);
        }
        b.close();
        closeClean(pool);
    }

    @Test
    void copyToCopiesARangeAndRefusesOutOfBounds() {
        ScatterList sg = new ScatterList().add(0x1000, 10).add(0x3000, 20).add(0x5000, 30);
        long[] a = new long[4];
        long[] l = new long[4];
        sg.copyTo(1, 2, a, l, 1);
        assertThat(a).containsExactly(0, 0x3000, 0x5000, 0);
        assertThat(l).containsExactly(0, 20, 30, 0);
        for (int[] bad : new int[][] {{2, 2, 0}, {-1, 1, 0}, {0, 2, 3}, {0, -1, 0}}) {
            assertThatThrownBy(() -> sg.copyTo(bad[0], bad[1], a, l, bad[2])).isInstanceOfSatisfying(RdmaException.class,
                    e -> assertThat(e.errno()).isEqualTo(Errno.EINVAL));
        }
        assertThat(a).as("a refused copy changes nothing").containsExactly(0, 0x3000, 0x5000, 0);
    }

    @Test
    void lengthsAreSixtyFourBit() {
        ScatterList sg = new ScatterList();
        sg.add(1L << 40, 5L << 32).add(1L << 44, 3L << 32);
        assertThat(sg.totalLength()).isEqualTo(8L << 32);
        assertThat(sg.length(0)).isEqualTo(5L << 32);
    }

    @Test
    void coalescesAdjacentEntriesWhenAsked() {
        ScatterList sg = new ScatterList(4, true, 8);
        sg.add(0x1000, 0x100).add(0x1100, 0x100).add(0x1300, 0x10).add(0x1310, 0x10);
        assertThat(sg.count()).isEqualTo(2);
        assertThat(sg.length(0)).isEqualTo(0x200);
        assertThat(sg.address(1)).isEqualTo(0x1300);
        assertThat(sg.length(1)).isEqualTo(0x20);
        ScatterList plain = new ScatterList();
        plain.add(0x1000, 0x100).add(0x1100, 0x100);
        assertThat(plain.count()).isEqualTo(2);
    }

    @Test
    void badEntriesAreEinvalAndChangeNothing() {
        BufferPool pool = BufferPool.builder().build();
        PooledBuffer b = pool.allocate(64);
        ScatterList sg = new ScatterList(2, false, 2);
        sg.add(0x1000, 8);
        assertEinval(() -> sg.add(0x2000, 0), "length 0");
        assertEinval(() -> sg.add(0x2000, -5), "length -5");
        assertEinval(() -> sg.add(0, 5), "address 0");
        assertEinval(() -> sg.add(-16L, 32), "overflows the address space");
        assertEinval(() -> sg.add(MemorySegment.ofArray(new byte[8])), "heap segment");
        assertEinval(() -> sg.add(b, 60, 8), "not inside");
        assertEinval(() -> sg.add(b, -1, 8), "not inside");
        assertEinval(() -> sg.add(b, 0, 0), "not inside");
        assertEinval(() -> sg.add(b, Long.MAX_VALUE, 8), "not inside");
        sg.add(0x3000, Long.MAX_VALUE - 100);
        assertEinval(() -> new ScatterList().add(0x10, Long.MAX_VALUE - 10).add(0x1000, 100), "overflows a long");
        assertEinval(() -> sg.add(0x9000, 1), "full at maxEntries 2");
        assertEinval(() -> sg.address(2), "index 2");
        assertEinval(() -> sg.length(-1), "index -1");
        assertThat(sg.count()).isEqualTo(2);
        assertThat(sg.totalLength()).isEqualTo(8 + Long.MAX_VALUE - 100);
        b.close();
        assertThatThrownBy(() -> sg.clear().add(b, 0, 8)).isInstanceOf(RdmaException.class)
                .satisfies(e -> assertThat(((RdmaException) e).errno()).isEqualTo(Errno.EBADF));
        closeClean(pool);
    }

    @Test
    void clearKeepsTheArraysForReuse() {
        ScatterList sg = new ScatterList(0, false, Integer.MAX_VALUE);
        for (int i = 0; i < 100; i++) {
            sg.add(0x1000 + i * 0x100L, 0x10);
        }
        sg.clear();
        assertThat(sg.count()).isZero();
        assertThat(sg.totalLength()).isZero();
        sg.add(0x5000, 7);
        assertThat(sg.address(0)).isEqualTo(0x5000);
        assertThat(sg.count()).isEqualTo(1);
    }
}
