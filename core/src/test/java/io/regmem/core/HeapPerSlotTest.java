package io.regmem.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * What a pool costs the Java heap at storage scale: one million 4 KiB buffers (4 GiB of mapped,
 * untouched memory) allocated, then freed, the heap measured after full GCs each time. A live
 * buffer costs its handle (48 bytes with compressed oops, nothing tracks it); an idle slot, whether
 * it was ever used or not, a bit and a share of its slab (under 2 bytes), whatever the safety mode.
 * The bounds leave room for the noise of a heap measurement; the test prints what it measured.
 */
@ExtendWith(NoLeaks.class)
class HeapPerSlotTest {
    private static final int N = 1_000_000;
    private static final long SIZE = 4096;

    private static long heapAfterGc() {
        Runtime rt = Runtime.getRuntime();
        long best = Long.MAX_VALUE;
        for (int i = 0; i < 4; i++) {
            System.gc(); // a full collection on the JDK's collectors unless -XX:+ExplicitGCInvokesConcurrent
            best = Math.min(best, rt.totalMemory() - rt.freeMemory());
        }
        return best;
    }

    private static void fill(BufferPool pool, PooledBuffer[] held) {
        for (int i = 0; i < held.length; i++) {
            held[i] = pool.allocate(SIZE);
        }
    }

    private static void empty(PooledBuffer[] held) {
        for (int i = 0; i < held.length; i++) {
            held[i].close();
            held[i] = null;
        }
    }

    @Test
    void aMillionSlotsCostUnder48BytesLiveAndUnder2BytesIdle() {
        for (SafetyMode mode : new SafetyMode[] {SafetyMode.CHECKED, SafetyMode.FAST}) {
            measure(mode);
        }
    }

    private static void measure(SafetyMode mode) {
        PooledBuffer[] held = new PooledBuffer[N]; // made before the baseline: its 4 bytes per reference are the test's
        try (BufferPool pool = BufferPool.builder().name("heap-" + mode).safetyMode(mode).maxBytes(8L << 30).build()) {
            pool.allocate(SIZE).close(); // the class's fixed state (stash, this thread's cache) exists from here
            long base = heapAfterGc();
            fill(pool, held);
            long carved = heapAfterGc();
            empty(held);
            long idle = heapAfterGc();
            fill(pool, held); // the second time round: every slot was carved and used before
            long live = heapAfterGc();
            empty(held);
            long idleAgain = heapAfterGc();
            double perLive = (double) (live - idleAgain) / N;
            double perIdle = (double) (Math.max(idle, idleAgain) - base) / N;
            System.out.printf("HeapPerSlotTest %s: %,d slots of %d B; heap per live buffer %.1f B (%.1f B on first "
                    + "carve, slab share included), per idle slot %.2f B%n", mode, N, SIZE, perLive,
                    (double) (carved - base) / N, perIdle);
            assertThat(perLive).as("%s: heap per live buffer", mode).isLessThan(48 + 4);
            assertThat(perIdle).as("%s: heap per idle slot", mode).isLessThan(2 + 0.5);
            // and a stale handle still fails after its slot went idle and was taken again
            PooledBuffer again = pool.allocate(SIZE);
            int generation = again.generation();
            again.close();
            assertThat(again.isLive()).isFalse();
            PooledBuffer other = pool.allocate(SIZE);
            other.close();
            if (mode == SafetyMode.CHECKED) {
                assertThat(catchThrowable(() -> again.checkGeneration(generation)))
                        .isInstanceOf(RdmaException.class);
            }
        }
    }
}
